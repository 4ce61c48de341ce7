"""How far the output is from the float64 reference."""

from __future__ import annotations

from typing import Any

from convlab.measure.observers.base import Observer, ResultView


class VerificationObserver(Observer):
    """How far the output is from the float64 reference (the verdict itself is the row's status)."""

    def columns(self, result: ResultView) -> dict[str, Any]:
        if result.verified is None:
            return {}
        verdict = result.verified.verdict
        return {"max_rel_err": verdict.max_rel_err, "rel_l2_err": verdict.rel_l2_err,
                "tolerance": verdict.tolerance, "nonfinite": verdict.nonfinite}
