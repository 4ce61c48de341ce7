"""The float64 reference convolution every cell is checked against.

Written for clarity, not speed: one shifted, strided view of the padded input per
filter tap, contracted over input channels in float64. ``xp`` is numpy or cupy, so
large references can run on the GPU in float64.
"""

from __future__ import annotations

from convlab.problem.geometry import ConvProblem


def conv2d_reference(image_hwc, weights_oihw, problem: ConvProblem, xp):
    """The output in HWC (NHWC when the input has a leading batch axis), float64."""
    x = xp.asarray(image_hwc, dtype=xp.float64)
    w = xp.asarray(weights_oihw, dtype=xp.float64)
    p, s, k = problem.padding, problem.stride, problem.filter_size
    oh, ow = problem.out_height, problem.out_width
    lead = x.shape[:-3]  # (N,) for a batch, () for one image
    padded = xp.pad(x, ((0, 0),) * len(lead) + ((p, p), (p, p), (0, 0)))
    out = xp.zeros((*lead, oh, ow, problem.out_channels), dtype=xp.float64)
    for r in range(k):
        for c in range(k):
            window = padded[..., r : r + s * (oh - 1) + 1 : s, c : c + s * (ow - 1) + 1 : s, :]
            # (..., oh, ow, C_in) x (C_in, C_out) for this tap
            out += window @ w[:, :, r, c].T
    return out


def gemm_reference(a, b, xp):
    """A @ B in float64."""
    return xp.asarray(a, dtype=xp.float64) @ xp.asarray(b, dtype=xp.float64)
