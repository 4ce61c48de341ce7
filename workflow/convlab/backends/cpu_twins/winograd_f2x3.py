"""Winograd F(2x2, 3x3) on HWC data, vectorised over 2x2 output tiles (cpu twin of winograd).

The same algorithm as kernels/winograd.cu: U = G g G^T for every (k, c) filter, V = B^T d B
for every 4x4 input tile (tiles overlap by 2; zero outside the image), M = sum_c U (.) V,
Y = A^T M A. The transforms are the same hand-expanded additions as the kernel, on strided
views of all tiles at once; the sum over C is one matmul per transformed position (16).
Tile rows are processed in bands so that large images do not need one huge tile array.
"""

from __future__ import annotations

import numpy as np

from convlab.problem.geometry import ConvProblem
from convlab.status import UnsupportedCell

IMPLEMENTATION = "numpy Winograd F(2x2,3x3), batched matmul over tiles (cpu twin of winograd)"

# The seed's filter transform; B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1] and
# A^T = [1 1 1 0; 0 1 -1 -1] are written out as additions in convolve().
G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], dtype=np.float32)

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
        n = (t1 - t0) * tw
        # d[i][j][y, x, c] = padded[2y + i, 2x + j, c] for the band's tiles (strided views)
        rows = padded[2 * t0 : 2 * t1 + 2]
        d = [[rows[i : i + 2 * (t1 - t0) : 2, j : j + 2 * tw : 2] for j in range(4)] for i in range(4)]
        t = [[d[0][j] - d[2][j], d[1][j] + d[2][j], d[2][j] - d[1][j], d[1][j] - d[3][j]] for j in range(4)]
        v = np.empty((16, t1 - t0, tw, c), dtype=np.float32)  # V = B^T d B, position 4i + j
        for i in range(4):
            v[4 * i + 0] = t[0][i] - t[2][i]
            v[4 * i + 1] = t[1][i] + t[2][i]
            v[4 * i + 2] = t[2][i] - t[1][i]
            v[4 * i + 3] = t[1][i] - t[3][i]
        m = np.matmul(v.reshape(16, n, c), u)  # M = sum_c U (.) V, per position: (16, n, K)
        a0 = [m[0 + j] + m[4 + j] + m[8 + j] for j in range(4)]  # A^T M
        a1 = [m[4 + j] - m[8 + j] - m[12 + j] for j in range(4)]
        y = np.empty((t1 - t0, 2, tw, 2, k), dtype=np.float32)  # Y = A^T M A
        y[:, 0, :, 0] = (a0[0] + a0[1] + a0[2]).reshape(t1 - t0, tw, k)
        y[:, 0, :, 1] = (a0[1] - a0[2] - a0[3]).reshape(t1 - t0, tw, k)
        y[:, 1, :, 0] = (a1[0] + a1[1] + a1[2]).reshape(t1 - t0, tw, k)
        y[:, 1, :, 1] = (a1[1] - a1[2] - a1[3]).reshape(t1 - t0, tw, k)
        y = y.reshape(2 * (t1 - t0), 2 * tw, k)
        r0, r1 = 2 * t0, min(oh, 2 * t1)
        out_hwc[r0:r1] = y[: r1 - r0, :ow]
