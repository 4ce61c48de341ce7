# Input images: the 4096^2 source (generated with ffmpeg, or the user's own) and one
# downscaled copy per size, as the seeds made with `ffmpeg -vf scale=N:N`.


rule source_image:
    input:
        user_image=[config["source_image"]] if config["source_image"] else [],
    output:
        temp(f"data/source_{config['source_size']}.png"),
    log:
        f"results/logs/data/source_{config['source_size']}.log",
    conda:
        "../../envs/convlab.yaml"
    params:
        runner=RUNNER,
        size=config["source_size"],
        user_image=(
            f"--user-image {shlex.quote(config['source_image'])}"
            if config["source_image"]
            else ""
        ),
    shell:
        "{params.runner} source --size {params.size} {params.user_image} --out {output} > {log} 2>&1"


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
        runner=RUNNER,
        size=lambda wildcards: int(wildcards.size),
    shell:
        "{params.runner} downscale --source {input.source} --size {params.size} --out {output.image} > {log} 2>&1"
