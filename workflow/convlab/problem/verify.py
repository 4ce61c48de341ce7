"""Compare a kernel's output with the float64 reference."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Verdict:
    passed: bool
    max_rel_err: float  # max|out - ref| / max|ref|
    rel_l2_err: float  # ||out - ref|| / ||ref||
    nonfinite: int  # NaN/inf elements: unwritten (the output was NaN-filled) or overflowed
    tolerance: float
    reason: str


def compare(output, reference, tolerance: float, xp=np) -> Verdict:
    """Check ``output`` (any float dtype, HWC) against ``reference`` (float64, HWC)."""
    if tuple(output.shape) != tuple(reference.shape):
        return Verdict(False, float("inf"), float("inf"), -1, tolerance,
                       f"output shape {tuple(output.shape)} != reference shape {tuple(reference.shape)}")
    out = output.astype(xp.float64)
    nonfinite = int((~xp.isfinite(out)).sum())
    diff = xp.abs(xp.where(xp.isfinite(out), out, 0.0) - reference)
    scale = float(xp.abs(reference).max())
    norm = float(xp.linalg.norm(reference))
    if scale == 0.0:
        # A zero reference would make any output look right; the runner never feeds zeros.
        return Verdict(False, float("inf"), float("inf"), nonfinite, tolerance,
                       "the reference is all zeros: the check would be meaningless")
    max_rel = float(diff.max()) / scale
    rel_l2 = float(xp.linalg.norm(diff)) / norm
    if nonfinite:
        reason = f"{nonfinite} of {out.size} output values are NaN/inf (not written, or overflow)"
        return Verdict(False, max_rel, rel_l2, nonfinite, tolerance, reason)
    if max_rel > tolerance:
        reason = f"max relative error {max_rel:.3g} exceeds tolerance {tolerance:.1g}"
        return Verdict(False, max_rel, rel_l2, nonfinite, tolerance, reason)
    return Verdict(True, max_rel, rel_l2, 0, tolerance, "")
