"""Direct convolution on HWC data: each output pixel's window times the filter, vectorised."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from convlab.problem.geometry import ConvProblem

IMPLEMENTATION = "numpy sliding-window (cpu twin of direct)"


def convolve(image: np.ndarray, weights: np.ndarray, problem: ConvProblem, out: np.ndarray) -> None:
    """image HWC, weights OIHW, out HWC."""
    p, s = problem.padding, problem.stride
    r = problem.filter_size
    padded = np.pad(image, ((p, p), (p, p), (0, 0)))
    # windows[y, x, c, i, j] is input (y + i, x + j, c); keep every stride-th window only.
    windows = sliding_window_view(padded, (r, r), axis=(0, 1))[::s, ::s]
    windows = windows[: problem.out_height, : problem.out_width]
    np.einsum("yxcij,kcij->yxk", windows, weights, out=out, optimize=True)
