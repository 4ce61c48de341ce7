"""The repeats' statistics, the stages' times and the round trip's time: a row's timing columns."""

from __future__ import annotations

from typing import Any

from convlab.measure.observers.base import Observer, ResultView


class TimingObserver(Observer):
    """The repeats' statistics, the timing mode that took them, each stage's time where the kernel has
    several (e.g. im2col=0.12;gemm=0.31), and the round trip's time."""

    def columns(self, result: ResultView) -> dict[str, Any]:
        if result.timed is None:
            return {}
        timing = result.timed.timing
        return {"kernel_ms": timing.median_ms, "kernel_ms_min": timing.min_ms, "kernel_ms_max": timing.max_ms,
                "kernel_ms_iqr": timing.iqr_ms, "reps": timing.reps, "timing_stop": timing.stop,
                "timing_applied": timing.applied, "graph_launches": timing.launches,
                "timing_fallback": timing.fallback or None, "e2e_ms": result.timed.e2e_ms,
                "stage_ms": ";".join(f"{name}={ms:.6g}" for name, ms in timing.stage_ms) or None}
