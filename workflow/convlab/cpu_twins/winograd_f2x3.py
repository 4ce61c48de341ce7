"""Winograd F(2x2, 3x3) on HWC data, vectorised over 2x2 output tiles (cpu twin of winograd).

The same algorithm as kernels/winograd.cu: U = G g G^T for every (k, c) filter, V = B^T d B
for every 4x4 input tile (tiles overlap by 2; zero outside the image), M = sum_c U (.) V,
Y = A^T M A. The sum over C is one batched matmul per transformed position (16 of them).
Tile rows are processed in bands so that large images do not need one huge tile array.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from convlab.measure.problem import ConvProblem
from convlab.status import UnsupportedCell

IMPLEMENTATION = "numpy Winograd F(2x2,3x3), batched matmul over tiles (cpu twin of winograd)"

BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], dtype=np.float32)
G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], dtype=np.float32)
AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], dtype=np.float32)

BAND_ELEMENTS = 1 << 22  # transformed-tile floats per band (16 MiB)


def _check(problem: ConvProblem) -> None:
    if problem.stride != 1:
        raise UnsupportedCell(f"Winograd F(2x2,3x3) is a stride-1 algorithm (stride {problem.stride})", "setup")
    if problem.filter_size != 3:
        raise UnsupportedCell(
            f"Winograd F(2x2,3x3) needs a 3x3 filter ({problem.filter_size}x{problem.filter_size})", "setup")


def transform_filters(weights_oihw: np.ndarray) -> np.ndarray:
    """U = G g G^T for each (k, c): (K, C, 4, 4) float32."""
    g = np.asarray(weights_oihw, dtype=np.float32)
    return np.einsum("ir,kcrs,js->kcij", G, g, G, optimize=True).astype(np.float32)


def convolve(image_hwc: np.ndarray, weights_oihw: np.ndarray, problem: ConvProblem,
             out_hwc: np.ndarray) -> None:
    _check(problem)
    p = problem.padding
    oh, ow, k = problem.out_height, problem.out_width, problem.out_channels
    c = problem.in_channels
    th, tw = -(-oh // 2), -(-ow // 2)  # tiles; the last row/column may be half outside
    # Padded so that every tile's 4x4 window exists: rows -p .. 2*th+1-p of the image.
    hp, wp = 2 * th + 2, 2 * tw + 2
    padded = np.zeros((hp, wp, c), dtype=np.float32)
    rows = min(problem.height, hp - p)
    cols = min(problem.width, wp - p)
    padded[p : p + rows, p : p + cols] = image_hwc[:rows, :cols]
    u = transform_filters(weights_oihw).transpose(2, 3, 1, 0).reshape(16, c, k)  # (16, C, K)

    band = max(1, BAND_ELEMENTS // max(1, 16 * tw * max(c, k)))
    for t0 in range(0, th, band):
        t1 = min(th, t0 + band)
        # d[y, x, c, i, j] = padded[2y + i, 2x + j, c] for the band's tiles
        d = sliding_window_view(padded[2 * t0 : 2 * t1 + 2], (4, 4), axis=(0, 1))[::2, ::2]
        v = np.einsum("ai,yxcij,bj->abyxc", BT, d, BT, optimize=True)  # B^T d B
        v = v.reshape(16, (t1 - t0) * tw, c)
        m = np.matmul(v, u).reshape(4, 4, t1 - t0, tw, k)  # sum over C, per position
        y = np.einsum("ia,abyxk,jb->yixjk", AT, m, AT, optimize=True)  # A^T M A
        y = y.reshape(2 * (t1 - t0), 2 * tw, k)
        r0, r1 = 2 * t0, min(oh, 2 * t1)
        out_hwc[r0:r1] = y[: r1 - r0, :ow]
