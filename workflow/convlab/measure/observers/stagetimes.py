"""Each stage of a multi-stage kernel timed alone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from convlab.measure.observers.base import Observer, ResultView, RunView
from convlab.measure.timing import Capture, TimeBatch, measure


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
