# Figures, the failed-cell table and the edge-map gallery, each captioned for
# `snakemake --report results/report.html`.
#
# The report stage's jobs are thin clients of the measurement service, whose tools workers do the
# work: they claim no core (threads: 0), so that they run side by side even at --cores 1, and one
# `render` each, whose limit (profiles/default/config.yaml) bounds how many start at once.
#
# No output here, in aggregate.smk or in history.smk is update(): Snakemake restores an update()
# output of a failed job under a new time, so the stale file would count as up to date for good.
# A failed job leaves no output instead, and the next run makes it again.


include: "report_common.smk"


# One job per entry of the figure table (convlab.report.figuretable): they run side by side (the
# service renders them), so the report waits for the slowest figure, not for their sum.
rule figures:
    input:
        # the narrowest it reads: the slice of the family drawn against size, or every row
        summary=REPORT.figure_rows,
        recorded=RECORDED,
    output:
        # Captioned by figure.rst, which shows the entry's caption file from the job's params (a
        # rule has one caption file).
        figure=report(
            f"{RESULTS}/figures/{{file}}",
            caption="../report/figure.rst",
            category=REPORT.figure_category,
            subcategory=REPORT.figure_subcategory,
            labels=REPORT.figure_labels,
        ),
    log:
        f"{RESULTS}/logs/figures/{{file}}.log",
    wildcard_constraints:
        file=REPORT.figure_files,
    priority: REPORT.figure_priority
    conda:
        "../../envs/convlab.yaml"
    threads: 0
    resources:
        render=1,
    params:
        code=CODE["report"],
        runner=RUNNER,
        outdir=lambda wildcards, output: os.path.dirname(output.figure),
        name=REPORT.figure_name,
        caption=REPORT.figure_caption,
    shell:
        logged(
            "{params.runner} figures --summary {input.summary} --outdir {params.outdir} "
            "--figure {params.name}"
        )


rule gallery_input:
    input:
        image="data/input_{size}.png",
    output:
        image=report(
            f"{RESULTS}/gallery/input_{{size}}.png",
            caption="../report/input.rst",
            category=PLAN.gallery_family,
            subcategory="Gallery",
            labels={"kernel": "input image", "size": "{size}"},
        ),
    log:
        f"{RESULTS}/logs/gallery/input_{{size}}.log",
    priority: MIDWAY
    conda:
        "../../envs/convlab.yaml"
    shell:
        logged("cp {input.image} {output.image}")


rule gallery:
    input:
        image="data/input_{size}.png",
        kernel=PLAN.gallery_kernel_files,
        original=f"{RESULTS}/gallery/input_{{size}}.png",
    output:
        edges=report(
            f"{RESULTS}/gallery/{{kernel}}_{{size}}.png",
            caption="../report/gallery.rst",
            category=PLAN.gallery_family,
            subcategory="Gallery",
            labels={"kernel": "{kernel}", "size": "{size}"},
        ),
    log:
        f"{RESULTS}/logs/gallery/{{kernel}}_{{size}}.log",
    priority: MIDWAY
    conda:
        "../../envs/convlab.yaml"
    resources:
        **PLACEMENT,
        gpu=GPU_JOB,
    params:
        code=CODE["gallery"],
        runner=RUNNER,
        spec=PLAN.gallery_spec,
    shell:
        logged(
            "{params.runner} gallery --spec {params.spec:q} --image {input.image} --out {output.edges}"
        )


# ---- The seeds side by side with this run, the roofline and the findings.


# Each family's seeds against its slice of the summary, then every seed in one table.
rule seed_comparison_family:
    input:
        summary=FAMILY_SUMMARY,
        seeds=SEED_TABLES,
        method_map=METHOD_MAP,
        # names this run's device where the family has no row
        bandwidth=BANDWIDTH,
    output:
        table=FAMILY_COMPARISON,
    log:
        f"{RESULTS}/logs/seeds/comparison_{{experiment}}.log",
    wildcard_constraints:
        experiment=SEEDED_FAMILIES,
    conda:
        "../../envs/convlab.yaml"
    threads: 0
    resources:
        render=1,
    params:
        code=CODE["report"],
        runner=RUNNER,
    shell:
        logged(
            "{params.runner} seed-compare --family {wildcards.experiment} --seeds {input.seeds} "
            "--map {input.method_map} --summary {input.summary} --bandwidth {input.bandwidth} "
            "--out {output.table}"
        )


rule seed_comparison:
    input:
        parts=expand(FAMILY_COMPARISON, experiment=SEEDED, allow_missing=True),
    output:
        table=report(
            f"{SEED_DIR}/comparison.csv",
            caption="../report/seed_comparison.rst",
            category="Summary",
            labels={"table": "seed numbers vs this run"},
        ),
    log:
        f"{RESULTS}/logs/seeds/comparison.log",
    conda:
        "../../envs/convlab.yaml"
    threads: 0
    resources:
        render=1,
    params:
        code=CODE["report"],
        runner=RUNNER,
    shell:
        logged(
            "{params.runner} seed-compare --parts {input.parts} --out {output.table}"
        )


# One table page per seed and one job per seed figure; the seeds, their figures and captions are the
# seed table's (convlab.report.seeds).
rule seed_table:
    input:
        comparison=REPORT.seed_comparison_part,
        recorded=RECORDED,
    output:
        table=report(
            SEED_TABLE,
            caption="../report/seed_table.rst",
            category=REPORT.seed_experiment,
            subcategory="Seed {seed} vs this run",
            labels=REPORT.seed_table_labels,
        ),
    log:
        REPORT.seed_table_log,
    wildcard_constraints:
        seed=SEED_IDS,
    conda:
        "../../envs/convlab.yaml"
    threads: 0
    resources:
        render=1,
    params:
        code=CODE["report"],
        runner=RUNNER,
    shell:
        logged(
            "{params.runner} seed-table --seed {wildcards.seed} --comparison {input.comparison} "
            "--out {output.table}"
        )


rule seed_figure:
    input:
        comparison=REPORT.seed_comparison_part,
        summary=REPORT.seed_summary,
        recorded=RECORDED,
    output:
        figure=report(
            SEED_FIGURE,
            caption="../report/seed_figure.rst",
            category=REPORT.seed_experiment,
            subcategory="Seed {seed} vs this run",
            labels=REPORT.seed_figure_labels,
        ),
    log:
        REPORT.seed_figure_log,
    wildcard_constraints:
        seed=SEED_IDS,
        figure=SEED_FIGURES,
    conda:
        "../../envs/convlab.yaml"
    threads: 0
    resources:
        render=1,
    params:
        code=CODE["report"],
        runner=RUNNER,
        # the caption file renders it: a caption can read the job's params, not the seed table
        caption=REPORT.seed_figure_caption,
    shell:
        logged(
            "{params.runner} seed-figure --seed {wildcards.seed} --figure {wildcards.figure} "
            "--comparison {input.comparison} --summary {input.summary} --out {output.figure}"
        )


rule roofline:
    input:
        summary=f"{RESULTS}/summary.csv",
        bandwidth=BANDWIDTH,
        ceiling=CEILING,
        recorded=RECORDED,
    output:
        figure=report(
            f"{RESULTS}/figures/roofline.png",
            caption="../report/roofline.rst",
            category="Summary",
            labels={"table": "roofline (every experiment)"},
        ),
    log:
        f"{RESULTS}/logs/roofline.log",
    conda:
        "../../envs/convlab.yaml"
    threads: 0
    resources:
        render=1,
    params:
        code=CODE["report"],
        runner=RUNNER,
    shell:
        logged(
            "{params.runner} roofline --summary {input.summary} --bandwidth {input.bandwidth} "
            "--ceiling {input.ceiling} --out {output.figure}"
        )


rule findings:
    input:
        summary=f"{RESULTS}/summary.csv",
        comparison=f"{SEED_DIR}/comparison.csv",
        bandwidth=BANDWIDTH,
        ceiling=CEILING,
        recorded=RECORDED,
    output:
        page=report(
            f"{RESULTS}/findings.html",
            caption="../report/findings.rst",
            category="Summary",
            labels={"table": "findings"},
        ),
    log:
        f"{RESULTS}/logs/findings.log",
    conda:
        "../../envs/convlab.yaml"
    threads: 0
    resources:
        render=1,
    params:
        code=CODE["report"],
        runner=RUNNER,
    shell:
        logged(
            "{params.runner} findings --summary {input.summary} --comparison {input.comparison} "
            "--bandwidth {input.bandwidth} --ceiling {input.ceiling} --out {output.page}"
        )


# Every device under results/ side by side: this run's summary and those already there (other
# GPUs' folders are read, never rebuilt, by this run).
rule gpus:
    input:
        summaries=PLAN.device_summaries(),
        # this run's seed comparisons, for the page's table of the seeds' GPUs
        comparisons=expand(f"{SEED_DIR}/comparison.csv", device=DEVICES),
    output:
        page=report(
            "results/gpus.html",
            caption="../report/gpus.rst",
            category="Summary",
            labels={"table": "devices compared"},
        ),
    log:
        "results/logs/gpus.log",
    conda:
        "../../envs/convlab.yaml"
    threads: 0
    resources:
        render=1,
    params:
        code=CODE["report"],
        runner=RUNNER,
    shell:
        logged("{params.runner} gpus --results results --out {output.page}")


# Quick and GPU-free: they run on the submitting host.
localrules:
    gpus,
    seed_comparison_family,
    seed_comparison,
    seed_table,
    seed_figure,
    roofline,
    findings,
