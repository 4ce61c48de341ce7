# The benchmark (not part of `all`): `snakemake --cores 1 benchmark`. One process runs our floor
# kernels, cuDNN's best plan, the naive kernels and a device copy of the same bytes side by side,
# then our SGEMM against cuBLAS, and prints the ratios and targets (also in the .txt files).


rule benchmark:
    input:
        images=[f"data/input_{size}.png" for size in config["conv2d"]["sizes"]],
        kernels=files_of("conv_floor_hwc", "cuda") + files_of("conv_floor_nchw", "cuda"),
        sgemm=files_of("sgemm_vectorized", "cuda") + files_of("sgemm_register", "cuda"),
    output:
        table=f"{RESULTS}/benchmark/floor_cuda.csv",
        text=f"{RESULTS}/benchmark/floor_cuda.txt",
        sgemm=f"{RESULTS}/benchmark/sgemm_cuda.csv",
        sgemm_text=f"{RESULTS}/benchmark/sgemm_cuda.txt",
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
            "--out {output.table} --gemm-out {output.sgemm}",
            then="cat {output.text} {output.sgemm_text}",
        )
