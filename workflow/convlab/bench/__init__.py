"""The benchmarks that print ratios: the floor (ours against cuDNN, the naive kernel and a copy) and
SGEMM against cuBLAS."""
