"""Compare a kernel's output with the float64 reference."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Verdict:
    passed: bool
    max_rel_err: float  # max|out - ref| / max|ref|
    rel_l2_err: float  # ||out - ref|| / ||ref||
    nonfinite: int  # NaN/inf elements: unwritten (the output was NaN-filled) or overflowed
    tolerance: float
    reason: str


@dataclass(frozen=True)
class ReferenceScale:
    """What the errors are relative to: the same for every cell of a problem, so made once with its
    reference where the reference is kept."""
    max_abs: float  # max|ref|
    norm: float  # ||ref||


def reference_scale(reference: Any, xp: Any = np) -> ReferenceScale:
    if xp is np:
        return ReferenceScale(float(np.abs(reference).max()), float(np.linalg.norm(reference)))
    both = xp.stack([xp.abs(reference).max(), xp.linalg.norm(reference)]).get()  # one transfer
    return ReferenceScale(float(both[0]), float(both[1]))


# An unwritten or overflowed value counts as 0 in the difference (|ref| at its place), as on the host.
_DIFFERENCE = "__device__ double difference(double o, double r) { return isfinite(o) ? o - r : -r; }"
_DEVICE_REDUCTIONS: dict[int, tuple[Any, Any, Any]] = {}


def _device_reductions(xp: Any) -> tuple[Any, Any, Any]:
    """The device's three reductions of (output, reference), built once from the array module that
    compares: max|out - ref|, the sum of its squares and the count of non-finite values. Each reads
    strided views (a layout's transpose) in one pass, where the array expressions would make
    float64 copies."""
    kernels = _DEVICE_REDUCTIONS.get(id(xp))
    if kernels is None:
        def reduction(map_expr: str, reduce_expr: str, name: str) -> Any:
            return xp.ReductionKernel("T o, float64 r", "float64 y", map_expr, reduce_expr, "y = a", "0", name,
                                      preamble=_DIFFERENCE)
        kernels = (reduction("fabs(difference((double)o, r))", "max(a, b)", "convlab_max_abs_difference"),
                   reduction("difference((double)o, r) * difference((double)o, r)", "a + b",
                             "convlab_squared_difference"),
                   reduction("isfinite((double)o) ? 0.0 : 1.0", "a + b", "convlab_nonfinite"))
        _DEVICE_REDUCTIONS[id(xp)] = kernels
    return kernels


# A reduction kernel gives each output value one thread block: the device's reductions keep enough
# leading axes for this many blocks, and the array module's own (CUB) reductions finish them.
PARTIAL_BLOCKS = 1024


def _kept_axes(shape: tuple[int, ...]) -> int:
    """How many leading axes the partial reductions keep (at least one, all but the last at most)."""
    kept, blocks = 1, shape[0] if shape else 1
    while blocks < PARTIAL_BLOCKS and kept < len(shape) - 1:
        blocks *= shape[kept]
        kept += 1
    return kept


def _errors(output: Any, reference: Any, xp: Any) -> tuple[int, float, float]:
    """(non-finite values, max|out - ref|, ||out - ref||) with unwritten values counted as 0."""
    if xp is np:
        out = output.astype(np.float64)
        finite = np.isfinite(out)
        diff = np.abs(np.where(finite, out, 0.0) - reference)
        return int((~finite).sum()), float(diff.max()), float(np.linalg.norm(diff))
    largest, squares, nonfinite = _device_reductions(xp)
    if output.ndim < 2:
        output, reference = output.reshape(1, -1), reference.reshape(1, -1)
    axes = tuple(range(_kept_axes(tuple(output.shape)), output.ndim))
    sums = xp.stack([nonfinite(output, reference, axis=axes).sum(), largest(output, reference, axis=axes).max(),
                     squares(output, reference, axis=axes).sum()]).get()  # one transfer
    return int(sums[0]), float(sums[1]), float(np.sqrt(sums[2]))


def compare(output: Any, reference: Any, tolerance: float, xp: Any = np,
            scale: ReferenceScale | None = None) -> Verdict:
    """Check ``output`` (any float dtype, HWC) against ``reference`` (float64, HWC); ``scale``: the
    reference's, where it was kept with it."""
    if tuple(output.shape) != tuple(reference.shape):
        return Verdict(False, float("inf"), float("inf"), -1, tolerance,
                       f"output shape {tuple(output.shape)} != reference shape {tuple(reference.shape)}")
    if scale is None:
        scale = reference_scale(reference, xp)
    nonfinite, max_diff, diff_norm = _errors(output, reference, xp)
    if scale.max_abs == 0.0:
        # A zero reference would make any output look right; the runner never feeds zeros.
        return Verdict(False, float("inf"), float("inf"), nonfinite, tolerance,
                       "the reference is all zeros: the check would be meaningless")
    max_rel = max_diff / scale.max_abs
    rel_l2 = diff_norm / scale.norm
    if nonfinite:
        reason = f"{nonfinite} of {output.size} output values are NaN/inf (not written, or overflow)"
        return Verdict(False, max_rel, rel_l2, nonfinite, tolerance, reason)
    if max_rel > tolerance:
        reason = f"max relative error {max_rel:.3g} exceeds tolerance {tolerance:.1g}"
        return Verdict(False, max_rel, rel_l2, nonfinite, tolerance, reason)
    return Verdict(True, max_rel, rel_l2, 0, tolerance, "")
