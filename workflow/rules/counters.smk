# Hardware counters (config counters: true): every ok cell's kernel replayed once under Nsight
# Compute after all the cells, apart from their timed launches (docs/counters.md); then the
# measured roofline and the findings that name each kernel's bottleneck.


rule counters:
    input:
        cells=PLAN.device_cells,
        # Only to start after the run's verdict: the pair step before it needs this GPU too, and the
        # report's drawing, which waits for the verdict, then runs while the counters are read.
        # Ancient: a new verdict alone reads no counters again.
        verdict=RECORDED,
    output:
        table=f"{RESULTS}/counters.csv",
    log:
        f"{RESULTS}/logs/counters.log",
    conda:
        "../../envs/convlab.yaml"
    resources:
        **PLACEMENT,
        gpu=GPU_JOB,
    params:
        code=CODE["measurement"],
        runner=RUNNER,
        results=lambda wildcards, output: os.path.dirname(output.table),
        backend=BACKEND,
        device=lambda wildcards: wildcards.device,
        grid=PLAN.grid_of,
    shell:
        logged(
            "{params.runner} counters --results {params.results} --backend {params.backend} "
            "--device {params.device} --grid {params.grid:q} --out {output.table}"
        )


rule counters_report:
    input:
        summary=f"{RESULTS}/summary.csv",
        counters=f"{RESULTS}/counters.csv",
        bandwidth=BANDWIDTH,
        ceiling=CEILING,
        recorded=RECORDED,
    output:
        figure=report(
            f"{RESULTS}/figures/roofline_measured.png",
            caption="../report/roofline_measured.rst",
            category="Summary",
            labels={"table": "roofline at the measured bytes"},
        ),
        page=report(
            f"{RESULTS}/counters.html",
            caption="../report/counters.rst",
            category="Summary",
            labels={"table": "hardware counters and what they say"},
        ),
    log:
        f"{RESULTS}/logs/counters_report.log",
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
            "{params.runner} counters-report --summary {input.summary} --counters {input.counters} "
            "--bandwidth {input.bandwidth} --ceiling {input.ceiling} --figure {output.figure} "
            "--out {output.page}"
        )


# The report's job runs on the submitting host, as the report stage's do (report.smk); the
# counters themselves need the GPU's node.
localrules:
    counters_report,
