"""The benchmarks that print ratios: the floor (ours against cuDNN, the naive kernel and a copy),
SGEMM against cuBLAS, and the pipeline (a full Snakemake run against a bare Snakemake of as many
jobs)."""
