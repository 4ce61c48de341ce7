# Input images: the 4096^2 source (generated with ffmpeg, or the user's own) and one
# downscaled copy per size, as the seeds made with `ffmpeg -vf scale=N:N`. A refused picture
# stops the run before the DAG is built (the prologue: convlab.snakefile.prologue), and would fail
# the source job with the same one-line `error:` on stderr. The source job runs first (priority), so
# the run stops before any cell, also before the cells on random data (CNN layers, GEMM) that need
# no picture. A source that the config no longer asks for is removed by the prologue with the
# pictures downscaled from it; the prologue makes a picture that rows were measured on again itself
# (convlab.snakefile.picturecontent), and these rules make the others.


rule source_image:
    input:
        # Declared only when it is a file: a missing picture then reaches `convlab source`, which
        # refuses it naming config source_image (Snakemake's own error names only the path).
        user_image=PLAN.user_image_input,
    output:
        # kept, not temporary: a size added later is downscaled from it without re-making it,
        # which would make every other size's picture (and every image cell) look out of date
        image=PLAN.source_image,
        # what was done to the user's picture (or how the source was generated): kept
        record=PLAN.source_record,
    log:
        PLAN.source_log,
    priority: 100
    conda:
        "../../envs/convlab.yaml"
    params:
        code=CODE["data"],
        runner=RUNNER,
        size=PLAN.source_size,
        user_image=PLAN.user_image_option,
    shell:
        logged(
            "{params.runner} source --size {params.size} {params.user_image} --out {output.image}"
        )


rule downscale:
    input:
        source=PLAN.source_image,
    output:
        image="data/input_{size}.png",
    log:
        "results/logs/data/input_{size}.log",
    priority: PLAN.picture_priority
    conda:
        "../../envs/convlab.yaml"
    params:
        code=CODE["data"],
        runner=RUNNER,
        size=lambda wildcards: int(wildcards.size),
    shell:
        logged(
            "{params.runner} downscale --source {input.source} --size {params.size} --out {output.image}"
        )
