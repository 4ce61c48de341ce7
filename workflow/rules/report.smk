# Figures, the failed-cell table and the edge-map gallery, each captioned for
# `snakemake --report results/report.html`.


rule figures:
    input:
        summary=f"{RESULTS}/summary.csv",
    output:
        time=figure("time_vs_size", "time vs size"),
        gflops=figure("gflops_vs_size", "GFLOPS vs size"),
        floor=figure("pct_of_floor_vs_size", "% of floor vs size"),
        variants=figure("variants", "variants"),
        status=figure("status", "cells by status"),
        status_table=report(
            update(f"{RESULTS}/figures/status_table.html"),
            caption="../report/status_table.rst",
            category="Summary",
            labels={"table": "failed cells"},
        ),
    log:
        f"{RESULTS}/logs/figures.log",
    conda:
        "../../envs/convlab.yaml"
    params:
        code=CODE["report"],
        runner=RUNNER,
        outdir=lambda wildcards, output: os.path.dirname(output.time),
    shell:
        logged(
            "{params.runner} figures --summary {input.summary} --outdir {params.outdir}"
        )


rule gallery_input:
    input:
        image="data/input_{size}.png",
    output:
        image=report(
            update(f"{RESULTS}/gallery/input_{{size}}.png"),
            caption="../report/input.rst",
            category="conv2d",
            subcategory="Gallery",
            labels={"kernel": "input image", "size": "{size}"},
        ),
    log:
        f"{RESULTS}/logs/gallery/input_{{size}}.log",
    conda:
        "../../envs/convlab.yaml"
    shell:
        logged("cp {input.image} {output.image}")


rule gallery:
    input:
        image="data/input_{size}.png",
        kernel=gallery_kernel_files,
        original=f"{RESULTS}/gallery/input_{{size}}.png",
    output:
        edges=report(
            update(f"{RESULTS}/gallery/{{kernel}}_{{size}}.png"),
            caption="../report/gallery.rst",
            category="conv2d",
            subcategory="Gallery",
            labels={"kernel": "{kernel}", "size": "{size}"},
        ),
    log:
        f"{RESULTS}/logs/gallery/{{kernel}}_{{size}}.log",
    conda:
        "../../envs/convlab.yaml"
    resources:
        gpu=GPU_JOB,
    params:
        code=CODE["gallery"],
        runner=RUNNER,
        spec=lambda wildcards: gallery_cells()[wildcards.kernel].to_json(),
    shell:
        logged(
            "{params.runner} gallery --spec {params.spec:q} --image {input.image} --out {output.edges}"
        )


# ---- The seeds side by side with this run, the roofline and the findings.


include: "report_common.smk"


rule seed_comparison:
    input:
        summary=f"{RESULTS}/summary.csv",
        seeds=SEED_TABLES,
        method_map=METHOD_MAP,
    output:
        table=report(
            update(f"{SEED_DIR}/comparison.csv"),
            caption="../report/seed_comparison.rst",
            category="Summary",
            labels={"table": "seed numbers vs this run"},
        ),
    log:
        f"{RESULTS}/logs/seeds/comparison.log",
    conda:
        "../../envs/convlab.yaml"
    params:
        code=CODE["report"],
        runner=RUNNER,
    shell:
        logged(
            "{params.runner} seed-compare --seeds {input.seeds} --map {input.method_map} "
            "--summary {input.summary} --out {output.table}"
        )


rule seed000:
    input:
        comparison=f"{SEED_DIR}/comparison.csv",
        summary=f"{RESULTS}/summary.csv",
    output:
        gflops=seed_item(
            "seed000_gflops",
            "000",
            "GFLOPS by size x stride x method",
            "direct, im2col_gemm_shared, cudnn",
            "1, 2, 3",
            "128-2048",
        ),
        table=seed_table(
            "000", "direct, im2col_gemm_shared, cudnn", "1, 2, 3", "128-2048"
        ),
    log:
        f"{RESULTS}/logs/seeds/seed000.log",
    conda:
        "../../envs/convlab.yaml"
    params:
        code=CODE["report"],
        runner=RUNNER,
        seed="000",
        outdir=lambda wildcards, output: os.path.dirname(output.table),
    shell:
        logged(
            "{params.runner} seed-report --seed {params.seed} --comparison {input.comparison} "
            "--summary {input.summary} --outdir {params.outdir}"
        )


rule seed001:
    input:
        comparison=f"{SEED_DIR}/comparison.csv",
        summary=f"{RESULTS}/summary.csv",
    output:
        methods=seed_item(
            "seed001_methods",
            "001",
            "tables 1, 2, 5: direct, im2col, cuDNN by size x stride",
            "direct, im2col_gemm_shared, cudnn_nchw",
            "1, 2, 3",
            "256-4096",
        ),
        memory=seed_item(
            "seed001_memory",
            "001",
            "table 3: memory mode x block",
            "im2col_gemm_basic, im2col_gemm_shared, im2col_gemm_register",
            "1",
            "256-4096",
        ),
        partition=seed_item(
            "seed001_partition",
            "001",
            "table 4: partition x block",
            "im2col_gemm_row, im2col_gemm_col, im2col_gemm_block",
            "1",
            "256-4096",
        ),
        table=seed_table(
            "001", "direct, im2col_gemm_*, cudnn_nchw", "1, 2, 3", "256-4096"
        ),
    log:
        f"{RESULTS}/logs/seeds/seed001.log",
    conda:
        "../../envs/convlab.yaml"
    params:
        code=CODE["report"],
        runner=RUNNER,
        seed="001",
        outdir=lambda wildcards, output: os.path.dirname(output.table),
    shell:
        logged(
            "{params.runner} seed-report --seed {params.seed} --comparison {input.comparison} "
            "--summary {input.summary} --outdir {params.outdir}"
        )


rule seed002:
    input:
        comparison=f"{SEED_DIR}/comparison.csv",
        summary=f"{RESULTS}/summary.csv",
    output:
        tiling=seed_item(
            "seed002_tiling",
            "002",
            "four tiling strategies",
            "direct, direct_const, tiled_input, tiled_cached",
            "1",
            "16384",
        ),
        table=seed_table(
            "002", "direct, direct_const, tiled_input, tiled_cached", "1", "16384"
        ),
    log:
        f"{RESULTS}/logs/seeds/seed002.log",
    conda:
        "../../envs/convlab.yaml"
    params:
        code=CODE["report"],
        runner=RUNNER,
        seed="002",
        outdir=lambda wildcards, output: os.path.dirname(output.table),
    shell:
        logged(
            "{params.runner} seed-report --seed {params.seed} --comparison {input.comparison} "
            "--summary {input.summary} --outdir {params.outdir}"
        )


rule seed003:
    input:
        comparison=f"{SEED_DIR}/comparison.csv",
        summary=f"{RESULTS}/summary.csv",
    output:
        gemm=seed_item(
            "seed003_gemm",
            "003",
            "GEMM vs cuBLAS",
            "sgemm_naive, cublas",
            "-",
            "512-8192",
        ),
        table=seed_table("003", "sgemm_naive, cublas", "-", "512-8192"),
    log:
        f"{RESULTS}/logs/seeds/seed003.log",
    conda:
        "../../envs/convlab.yaml"
    params:
        code=CODE["report"],
        runner=RUNNER,
        seed="003",
        outdir=lambda wildcards, output: os.path.dirname(output.table),
    shell:
        logged(
            "{params.runner} seed-report --seed {params.seed} --comparison {input.comparison} "
            "--summary {input.summary} --outdir {params.outdir}"
        )


rule seed004:
    input:
        comparison=f"{SEED_DIR}/comparison.csv",
        summary=f"{RESULTS}/summary.csv",
    output:
        winograd=seed_item(
            "seed004_winograd",
            "004",
            "Winograd speed-up per layer",
            "winograd_batched, conv_naive_batched",
            "1",
            "CNN layers",
        ),
        table=seed_table(
            "004", "winograd_batched, conv_naive_batched", "1", "CNN layers"
        ),
    log:
        f"{RESULTS}/logs/seeds/seed004.log",
    conda:
        "../../envs/convlab.yaml"
    params:
        code=CODE["report"],
        runner=RUNNER,
        seed="004",
        outdir=lambda wildcards, output: os.path.dirname(output.table),
    shell:
        logged(
            "{params.runner} seed-report --seed {params.seed} --comparison {input.comparison} "
            "--summary {input.summary} --outdir {params.outdir}"
        )


rule roofline:
    input:
        summary=f"{RESULTS}/summary.csv",
        bandwidth=BANDWIDTH,
        ceiling=CEILING,
    output:
        figure=report(
            update(f"{RESULTS}/figures/roofline.png"),
            caption="../report/roofline.rst",
            category="Summary",
            labels={"table": "roofline (every experiment)"},
        ),
    log:
        f"{RESULTS}/logs/roofline.log",
    conda:
        "../../envs/convlab.yaml"
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
    output:
        page=report(
            update(f"{RESULTS}/findings.html"),
            caption="../report/findings.rst",
            category="Summary",
            labels={"table": "findings"},
        ),
    log:
        f"{RESULTS}/logs/findings.log",
    conda:
        "../../envs/convlab.yaml"
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
        summaries=device_summaries(),
        # this device's seed comparison, for the page's table of the seeds' GPUs
        comparison=f"{SEED_DIR}/comparison.csv",
    output:
        page=report(
            update("results/gpus.html"),
            caption="../report/gpus.rst",
            category="Summary",
            labels={"table": "devices compared"},
        ),
    log:
        "results/logs/gpus.log",
    conda:
        "../../envs/convlab.yaml"
    params:
        code=CODE["report"],
        runner=RUNNER,
    shell:
        logged("{params.runner} gpus --results results --out {output.page}")


# Quick and GPU-free: they run on the submitting host.
localrules:
    gpus,
    seed_comparison,
    seed000,
    seed001,
    seed002,
    seed003,
    seed004,
    roofline,
    findings,


# The final files of the report stage; common.smk's final_outputs() adds them to `rule all`.
REPORT_OUTPUTS = [
    "results/gpus.html",
    f"{SEED_DIR}/comparison.csv",
    *[
        f"{SEED_DIR}/{name}.png"
        for name in (
            "seed000_gflops",
            "seed001_methods",
            "seed001_memory",
            "seed001_partition",
            "seed002_tiling",
            "seed003_gemm",
            "seed004_winograd",
        )
    ],
    *[f"{SEED_DIR}/seed{seed}_table.html" for seed in SEED_EXPERIMENT],
    f"{RESULTS}/figures/roofline.png",
    f"{RESULTS}/findings.html",
    f"{RESULTS}/figures/gflops_vs_size.png",
    f"{RESULTS}/figures/pct_of_floor_vs_size.png",
    f"{RESULTS}/figures/variants.png",
    f"{RESULTS}/figures/status.png",
    f"{RESULTS}/figures/status_table.html",
]
