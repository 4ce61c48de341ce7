"""Operands and outputs in the memory layouts kernels declare (HWC or CHW images, OIHW or OHWI
weights), and back into the reference's layout."""

from __future__ import annotations

import numpy as np

from convlab.problem.geometry import ConvProblem


def to_layout(weights_oihw: np.ndarray, layout: str) -> np.ndarray:
    """Reorder OIHW weights into the layout a kernel declares."""
    if layout == "oihw":
        return np.ascontiguousarray(weights_oihw)
    if layout == "ohwi":
        return np.ascontiguousarray(weights_oihw.transpose(0, 2, 3, 1))
    raise ValueError(f"unknown weight layout {layout!r}")


def image_to_layout(image_hwc: np.ndarray, layout: str) -> np.ndarray:
    """The input image (HWC, or NHWC for a batch) in a kernel's input layout (hwc as loaded, or chw)."""
    if layout == "hwc":
        return np.ascontiguousarray(image_hwc)
    if layout == "chw":
        lead = image_hwc.ndim - 3  # 1 for a batch
        return np.ascontiguousarray(image_hwc.transpose(*range(lead), lead + 2, lead, lead + 1))
    raise ValueError(f"unknown image layout {layout!r}")


def output_shape(problem: ConvProblem, layout: str) -> tuple[int, ...]:
    oh, ow, k = problem.out_height, problem.out_width, problem.out_channels
    lead = (problem.batch,) if problem.batched else ()
    if layout == "hwc":
        return (*lead, oh, ow, k)
    if layout == "chw":
        return (*lead, k, oh, ow)
    raise ValueError(f"unknown output layout {layout!r}")


def output_to_hwc(output, layout: str):
    """A kernel's output viewed as HWC (NHWC for a batch) for comparison with the reference
    (any array module)."""
    if layout == "hwc":
        return output
    lead = output.ndim - 3
    return output.transpose(*range(lead), lead + 1, lead + 2, lead)
