# Figures, the failed-cell table and the edge-map gallery, each captioned for
# `snakemake --report results/report.html`.


rule figures:
    input:
        summary="results/summary.csv",
    output:
        time=figure("time_vs_size", "time vs size"),
        gflops=figure("gflops_vs_size", "GFLOPS vs size"),
        floor=figure("pct_of_floor_vs_size", "% of floor vs size"),
        variants=figure("variants", "variants"),
        status=figure("status", "cells by status"),
        status_table=report(
            "results/figures/status_table.html",
            caption="../report/status_table.rst",
            category="Summary",
            labels={"table": "failed cells"},
        ),
    log:
        "results/logs/figures.log",
    conda:
        "../../envs/convlab.yaml"
    params:
        runner=RUNNER,
        outdir=lambda wildcards, output: os.path.dirname(output.time),
    shell:
        "{params.runner} figures --summary {input.summary} --outdir {params.outdir} > {log} 2>&1"


rule gallery_input:
    input:
        image="data/input_{size}.png",
    output:
        image=report(
            "results/gallery/input_{size}.png",
            caption="../report/input.rst",
            category="conv2d",
            subcategory="Gallery",
            labels={"kernel": "input image", "size": "{size}"},
        ),
    log:
        "results/logs/gallery/input_{size}.log",
    conda:
        "../../envs/convlab.yaml"
    shell:
        "cp {input.image} {output.image} 2> {log}"


rule gallery:
    input:
        image="data/input_{size}.png",
        kernel=gallery_kernel_files,
        original="results/gallery/input_{size}.png",
    output:
        edges=report(
            "results/gallery/{kernel}_{size}.png",
            caption="../report/gallery.rst",
            category="conv2d",
            subcategory="Gallery",
            labels={"kernel": "{kernel}", "size": "{size}"},
        ),
    log:
        "results/logs/gallery/{kernel}_{size}.log",
    conda:
        "../../envs/convlab.yaml"
    resources:
        gpu=GPU_JOB,
    params:
        runner=RUNNER,
        spec=lambda wildcards: gallery_cells()[wildcards.kernel].to_json(),
    shell:
        "{params.runner} gallery --spec {params.spec:q} --image {input.image} --out {output.edges} > {log} 2>&1"
