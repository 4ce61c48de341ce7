"""BLAS matmul (cpu twin of the shared, register, vectorized and pipelined SGEMM kernels).

One float32 ``np.matmul`` (the BLAS sgemm that NumPy links) written straight into ``out``.
"""

from __future__ import annotations

import numpy as np

IMPLEMENTATION = "numpy float32 BLAS matmul (cpu twin of the tiled SGEMM kernels)"


def multiply(a: np.ndarray, b: np.ndarray, problem, out: np.ndarray) -> None:
    """a (M, K), b (K, N), out (M, N), all row-major float32; writes every element of out."""
    np.matmul(np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32), out=out)
