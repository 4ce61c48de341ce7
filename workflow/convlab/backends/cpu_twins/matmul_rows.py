"""Row-by-row matmul (cpu twin of sgemm_naive).

The CPU analogue of one thread per output element: each output row C[i, :] is one
float32 ``np.dot`` of row i of A with B, so the work is split into M independent pieces as the
naive kernel splits it into M * N threads.
"""

from __future__ import annotations

import numpy as np

IMPLEMENTATION = "numpy np.dot per output row, float32 (cpu twin of sgemm_naive)"


def multiply(a: np.ndarray, b: np.ndarray, problem, out: np.ndarray) -> None:
    """a (M, K), b (K, N), out (M, N), all row-major float32; writes every element of out."""
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    for i in range(problem.m):
        np.dot(a[i], b, out=out[i])
