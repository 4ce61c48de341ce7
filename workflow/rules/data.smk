# Input images: the 4096^2 source (generated with ffmpeg, or the user's own) and one
# downscaled copy per size, as the seeds made with `ffmpeg -vf scale=N:N`. A refused picture
# stops the run before the DAG is built (below), and would fail the source job with the same
# one-line `error:` on stderr. The source job runs first (priority), so the run stops before any
# cell, also before the cells on random data (CNN layers, GEMM) that need no picture.

SOURCE_LOG = f"results/logs/data/source_{config['source_size']}.log"
SOURCE_IMAGE = f"data/source_{config['source_size']}.png"

# The source picture knows what it was made from (its record, data/source_<size>.json): one the
# config no longer asks for is removed with the pictures downscaled from it, which are targets
# (final_outputs), so that this run makes them again and measures again every cell that reads one.
# Snakemake's own record of the config can be lost with .snakemake/.
if workflow.is_main_process:
    source_differs = source_disagrees(config["source_image"], SOURCE_IMAGE)
    if source_differs:
        if not DRY_RUN:
            for made in [Path(SOURCE_IMAGE), *Path("data").glob("input_*.png")]:
                made.unlink(missing_ok=True)
        what = (
            "a real run makes it again"
            if DRY_RUN
            else "removed with its downscaled copies, and made again"
        )
        print(f"{SOURCE_IMAGE}: {source_differs}; {what}", file=sys.stderr)

# An unusable picture is refused here, before the DAG is built, with its one `error:` line and
# nothing else: a failed source job would be followed by Snakemake's own report of the failed
# shell command. The source job still checks (the file may change in between). The refusal is
# kept in the source rule's log as if its job had run, except by a dry run, which writes nothing.
if config["source_image"] and workflow.is_main_process:
    from convlab.snakefile.api import check_source_image

    try:
        check_source_image(
            config["source_image"], f"data/source_{config['source_size']}.json"
        )
    except UserError as error:
        if not workflow.output_settings.dryrun:
            Path(SOURCE_LOG).parent.mkdir(parents=True, exist_ok=True)
            Path(SOURCE_LOG).write_text(f"error: {error}\n")
        sys.exit(f"error: {error}")


rule source_image:
    input:
        # Declared only when it is a file: a missing picture then reaches `convlab source`, which
        # refuses it naming config source_image (Snakemake's own error names only the path).
        user_image=(
            [config["source_image"]]
            if config["source_image"] and os.path.isfile(config["source_image"])
            else []
        ),
    output:
        # kept, not temporary: a size added later is downscaled from it without re-making it,
        # which would make every other size's picture (and every image cell) look out of date
        image=f"data/source_{config['source_size']}.png",
        # what was done to the user's picture (or how the source was generated): kept
        record=f"data/source_{config['source_size']}.json",
    log:
        SOURCE_LOG,
    priority: 100
    conda:
        "../../envs/convlab.yaml"
    params:
        code=CODE["data"],
        runner=RUNNER,
        size=config["source_size"],
        user_image=(
            f"--user-image {shlex.quote(config['source_image'])}"
            if config["source_image"]
            else ""
        ),
    shell:
        logged(
            "{params.runner} source --size {params.size} {params.user_image} --out {output.image}"
        )


rule downscale:
    input:
        source=f"data/source_{config['source_size']}.png",
    output:
        image="data/input_{size}.png",
    log:
        "results/logs/data/input_{size}.log",
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
