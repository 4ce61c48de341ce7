# The floor benchmark of the floor kernels (not part of `all`): `snakemake --cores 1 benchmark`.
# One process runs our floor kernels, cuDNN's best plan, the naive kernels and a device copy
# of the same bytes side by side, and prints the ratios (also in the .txt beside the CSV).


rule benchmark:
    input:
        images=[f"data/input_{size}.png" for size in config["conv2d"]["sizes"]],
        kernels=files_of("conv_floor_hwc", "cuda") + files_of("conv_floor_nchw", "cuda"),
    output:
        table=f"{RESULTS}/benchmark/floor_cuda.csv",
        text=f"{RESULTS}/benchmark/floor_cuda.txt",
    log:
        f"{RESULTS}/logs/benchmark/floor_cuda.log",
    conda:
        "../../envs/convlab.yaml"
    resources:
        gpu=1,
    params:
        runner=RUNNER,
        sizes=" ".join(str(size) for size in config["conv2d"]["sizes"]),
        strides=" ".join(str(stride) for stride in config["conv2d"]["strides"]),
    shell:
        logged(
            "{params.runner} bench --sizes {params.sizes} --strides {params.strides} "
            "--out {output.table}",
            then="cat {output.text}",
        )
