"""Wall-clock phases of a cell job, so per-cell overhead can be read off every row."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from convlab.measure.observers.base import Observer, ResultView, RunView


def format_phases(laps: Mapping[str, float]) -> str:
    """e.g. 'place=1.2;setup=40.1;timing=310' (ms): the text of the row's phase_ms."""
    return ";".join(f"{name}={ms:.4g}" for name, ms in laps.items())


class PhaseClock(Observer):
    """Laps of wall-clock time: lap('place') records the time since the previous lap. An observer
    of a cell's measurement (convlab.measure.observers.standard): each step that succeeds ends a lap of its
    name, and its column is the cell's phases."""

    def __init__(self) -> None:
        self._last = time.perf_counter()
        self.laps: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = self.laps.get(name, 0.0) + (now - self._last) * 1e3
        self._last = now

    def after(self, step: str, run: RunView) -> None:
        self.lap(step)

    def text(self) -> str:
        return format_phases(self.laps)

    def columns(self, result: ResultView) -> dict[str, Any]:
        return {"phase_ms": self.text()}
