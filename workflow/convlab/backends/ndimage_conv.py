"""cupyx.scipy.ndimage.correlate once per (output, input) channel pair.

ndimage has no stride, and its origin convention centres the filter, so the input is padded
explicitly by ``pad`` with zeros, correlated with mode="constant", cval=0, and only the
'valid' region is kept: with the filter centred at (R // 2, S // 2) (R, S odd), position
(y + R // 2, x + S // 2) of the result is sum padded[y + i, x + j] * g[i, j]. Every position
is computed (full resolution) and the strided ones are sliced out.

The ndimage module follows ``backend.xp``: cupyx.scipy.ndimage for cupy, scipy.ndimage for
numpy (for tests without a GPU).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from convlab.backends.base import KernelBuffers, PreparedKernel
from convlab.backends.librarykernel import ArrayKernel
from convlab.problem.geometry import ConvProblem

LAYOUT = {"input": "chw", "weights": "oihw", "output": "chw"}


def ndimage_module(xp: Any) -> ModuleType:
    """cupyx.scipy.ndimage when xp is cupy, else scipy.ndimage."""
    if getattr(xp, "__name__", "") == "cupy":
        import cupyx.scipy.ndimage as ndimage
    else:
        import scipy.ndimage as ndimage
    return ndimage


class NdimageConv(ArrayKernel):
    library = "ndimage"
    layout = LAYOUT

    def build(self, xp: Any, problem: ConvProblem, buffers: KernelBuffers) -> PreparedKernel:
        ndimage = ndimage_module(xp)
        p, s, r = problem.padding, problem.stride, problem.filter_size
        k, c, h, w = problem.out_channels, problem.in_channels, problem.height, problem.width
        oh, ow = problem.out_height, problem.out_width

        # Setup: the zero-bordered input (its interior is overwritten by run()), one scratch
        # plane for the correlation result, and the filters as contiguous float32 planes.
        weights = xp.ascontiguousarray(xp.asarray(buffers.weights, dtype=xp.float32))
        padded = xp.zeros((c, h + 2 * p, w + 2 * p), dtype=xp.float32)
        interior = padded[:, p : p + h, p : p + w]
        full = xp.empty((h + 2 * p, w + 2 * p), dtype=xp.float32)
        half = r // 2  # the filter's centre: valid outputs start here
        rows = slice(half, half + s * (oh - 1) + 1, s)
        cols = slice(half, half + s * (ow - 1) + 1, s)

        def run() -> None:
            interior[...] = buffers.image
            for ko in range(k):
                target = buffers.output[ko]
                for ci in range(c):
                    ndimage.correlate(padded[ci], weights[ko, ci], output=full, mode="constant", cval=0.0)
                    if ci == 0:
                        target[...] = full[rows, cols]
                    else:
                        target += full[rows, cols]

        return PreparedKernel(run, {
            "implementation": "cupyx.scipy.ndimage.correlate per channel pair; no stride argument: "
                              "computed at full resolution, then sliced",
            "engine": f"{ndimage.__name__}.correlate x {k * c}",
            "correlate_calls": k * c,
        })
