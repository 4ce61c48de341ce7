# The benchmark (not part of `all`): `snakemake --cores 1 benchmark`, once per device label.
# One process runs our floor kernels, cuDNN's best plan, the naive kernels and a device copy of
# the same bytes side by side, then our SGEMM against cuBLAS, and prints the ratios and targets (also in the .txt files).
# Its inputs are the files of every kernel it runs, and its params the hash of its code: an edit
# to any of them re-runs it.


rule benchmark:
    input:
        expand(f"{RESULTS}/benchmark/floor_cuda.txt", device=DEVICES),


rule benchmark_device:
    input:
        images=[f"data/input_{size}.png" for size in PLAN.bench_sizes],
        kernels=PLAN.bench_kernel_files(),
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
        **PLACEMENT,
        gpu=1,
    params:
        code=CODE["benchmark"],
        runner=RUNNER,
        sizes=" ".join(str(size) for size in PLAN.bench_sizes),
        strides=" ".join(str(stride) for stride in PLAN.bench_strides),
    shell:
        logged(
            "{params.runner} bench --sizes {params.sizes} --strides {params.strides} "
            "--out {output.table} --gemm-out {output.sgemm}",
            then="cat {output.text} {output.sgemm_text}",
        )


localrules:
    benchmark,
