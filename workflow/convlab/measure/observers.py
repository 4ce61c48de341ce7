"""What a cell's measurement reports, as observers (after Kernel Tuner's): each one reads or
watches one part of the measurement and gives its row columns through one method.

Every observer has a lifecycle around each step of the cell (place, setup, launch, timing, e2e,
verify): ``before(step, run)`` as the step begins, ``after(step, run)`` once it succeeded (under
the step's guard: a kernel failure there fails the step), ``abandon()`` when a step failed and
the cell ends there. What happens during the timed work is watched between ``before("timing")``
and ``after("e2e")``: the GPU telemetry (convlab.measure.telemetry) samples on a thread then.
Last, the runner asks each observer for its columns, with what the steps produced
(convlab.run.steps.Result); an observer whose part did not happen (a failed cell has no time) gives
no columns. Besides those below, the phase clock (convlab.measure.phases) and the GPU telemetry
are observers too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from convlab.measure.observer import Observer, ResultView, RunView
from convlab.measure.timing import Capture, TimeBatch, measure
from convlab.problem import metrics

INFO_COLUMNS = ("implementation", "engine", "engine_heuristic", "launch", "smem_limit_bytes", "module_hash")


class SetupObserver(Observer):
    """What setup chose (implementation, cuDNN engines, launch geometry) and how long it took."""

    def columns(self, result: ResultView) -> dict[str, Any]:
        if result.prepared is None:
            return {}
        info = result.prepared.kernel.info
        return {"setup_ms": result.prepared.setup_ms, **{key: info.get(key) for key in INFO_COLUMNS}}


class TimingObserver(Observer):
    """The repeats' statistics, the timing mode that took them, and the round trip's time."""

    def columns(self, result: ResultView) -> dict[str, Any]:
        if result.timed is None:
            return {}
        timing = result.timed.timing
        return {"kernel_ms": timing.median_ms, "kernel_ms_min": timing.min_ms, "kernel_ms_max": timing.max_ms,
                "kernel_ms_iqr": timing.iqr_ms, "reps": timing.reps, "timing_stop": timing.stop,
                "timing_applied": timing.applied, "graph_launches": timing.launches,
                "timing_fallback": timing.fallback or None, "e2e_ms": result.timed.e2e_ms}


class ThroughputObserver(Observer):
    """GFLOPS, GB/s and the distance from the copy-bandwidth floor (convlab.problem.metrics)."""

    def columns(self, result: ResultView) -> dict[str, Any]:
        if result.kernel_ms is None or result.copy_gbps is None:
            return {}
        return {"copy_gbps": result.copy_gbps,
                **metrics.throughput(result.problem, result.kernel_ms, result.copy_gbps)}


class VerificationObserver(Observer):
    """How far the output is from the float64 reference (the verdict itself is the row's status)."""

    def columns(self, result: ResultView) -> dict[str, Any]:
        if result.verified is None:
            return {}
        verdict = result.verified.verdict
        return {"max_rel_err": verdict.max_rel_err, "rel_l2_err": verdict.rel_l2_err,
                "tolerance": verdict.tolerance, "nonfinite": verdict.nonfinite}


class StageTimes(Observer):
    """Each stage of a multi-stage kernel timed alone (e.g. im2col=0.12;gemm=0.31), with the cell's
    timing settings and one budget for all of them. Kept apart from the cell's time: a cell that
    fails after its stages were timed still reports them."""

    def __init__(self) -> None:
        self.text = ""

    def after(self, step: str, run: RunView) -> None:
        # right after the kernel's own repeats, with the same settings: its stages alone
        if step == "timing" and run.prepared is not None:
            backend = run.backend
            self.time(run.prepared.kernel.stages, backend.time_batch, run.inputs.cell.timing, backend.capture_graph)

    def time(self, stages: list[tuple[str, Callable[[], None]]], time_batch: TimeBatch, settings: dict,
             capture: Capture | None = None) -> None:
        # The stages share one budget: together they are one run of the kernel, and with a budget
        # each, a slow kernel's stages took as long again as its own repeats for every stage.
        shared = {**settings, "budget_s": settings["budget_s"] / max(1, len(stages))}
        self.text = ";".join(f"{name}={measure(run, time_batch, shared, capture).median_ms:.6g}"
                             for name, run in stages)

    def columns(self, result: ResultView) -> dict[str, Any]:
        return {"stage_ms": self.text} if self.text else {}


# Every cell's, without state; the runner adds the cell's own stage times, phase clock and telemetry.
OBSERVERS: tuple[Observer, ...] = (SetupObserver(), TimingObserver(), ThroughputObserver(), VerificationObserver())
