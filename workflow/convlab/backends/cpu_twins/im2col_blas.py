"""im2col + BLAS matmul on HWC data (cpu twin of the im2col/GEMM kernels).

Each output pixel's R x S x C window becomes one row of the column matrix (C*R*S wide, in
OIHW order), and one float32 matmul with the (C*R*S, K) weight matrix gives every output
channel. Output rows are processed in bands so the column matrix stays bounded.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from convlab.problem.geometry import ConvProblem

IMPLEMENTATION = "numpy im2col + float32 BLAS matmul (cpu twin)"

BAND_ELEMENTS = 1 << 24  # column-matrix floats per band (64 MiB)


def convolve(image_hwc: np.ndarray, weights_oihw: np.ndarray, problem: ConvProblem,
             out_hwc: np.ndarray) -> None:
    p, s, r = problem.padding, problem.stride, problem.filter_size
    oh, ow, k, c = problem.out_height, problem.out_width, problem.out_channels, problem.in_channels
    padded = np.pad(np.asarray(image_hwc, dtype=np.float32), ((p, p), (p, p), (0, 0)))
    # windows[y, x, c, i, j] = padded[s*y + i, s*x + j, c]: the (C, R, S) order of OIHW weights
    windows = sliding_window_view(padded, (r, r), axis=(0, 1))[::s, ::s][:oh, :ow]
    depth = c * r * r
    w = np.ascontiguousarray(np.asarray(weights_oihw, dtype=np.float32).reshape(k, depth).T)
    band = max(1, BAND_ELEMENTS // max(1, ow * depth))
    for y0 in range(0, oh, band):
        y1 = min(oh, y0 + band)
        col = np.ascontiguousarray(windows[y0:y1]).reshape((y1 - y0) * ow, depth)
        out_hwc[y0:y1] = (col @ w).reshape(y1 - y0, ow, k)
