"""The library convolution on a CPU: OpenCV filter2D once per (output, input) channel pair.

filter2D has no stride: it computes every position and the strided positions are kept
(the row's implementation label says so).
"""

from __future__ import annotations

import cv2
import numpy as np

from convlab.problem.geometry import ConvProblem

IMPLEMENTATION = "OpenCV filter2D per channel pair, full resolution then strided slice (cpu twin)"


def convolve(image: np.ndarray, weights: np.ndarray, problem: ConvProblem, out: np.ndarray) -> None:
    """image HWC, weights OIHW, out HWC."""
    p, s = problem.padding, problem.stride
    padded = cv2.copyMakeBorder(image, p, p, p, p, cv2.BORDER_CONSTANT, value=0)
    # With the anchor at (0, 0), result[y, x] = sum of padded[y + i, x + j] * w[i, j]: a valid
    # correlation; positions whose window leaves the padded image are cut off below.
    rows = slice(0, s * (problem.out_height - 1) + 1, s)
    cols = slice(0, s * (problem.out_width - 1) + 1, s)
    for k in range(problem.out_channels):
        acc = np.zeros((problem.out_height, problem.out_width), dtype=np.float32)
        for c in range(problem.in_channels):
            full = cv2.filter2D(np.ascontiguousarray(padded[:, :, c]), cv2.CV_32F, weights[k, c],
                                anchor=(0, 0), borderType=cv2.BORDER_CONSTANT)
            acc += full[rows, cols]
        out[:, :, k] = acc
