"""The timing loop: warm up, then batches of repeats until the median is stable or the budget ends.

The backend supplies ``time_batch(run, n, cold)`` which returns the device time
of each of ``n`` repeats in milliseconds (CUDA events on the GPU).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

TimeBatch = Callable[[Callable[[], None], int, bool], list[float]]


@dataclass(frozen=True)
class TimingResult:
    median_ms: float
    min_ms: float
    max_ms: float
    iqr_ms: float
    reps: int
    mode: str
    stop: str  # stable | budget | max_reps


def summarise(samples_ms: list[float], mode: str, stop: str) -> TimingResult:
    values = np.asarray(samples_ms, dtype=np.float64)
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return TimingResult(float(median), float(values.min()), float(values.max()),
                        float(q3 - q1), int(values.size), mode, stop)


def measure(run: Callable[[], None], time_batch: TimeBatch, settings: dict) -> TimingResult:
    cold = settings["mode"] == "cold"
    time_batch(run, settings["warmup"], cold)  # untimed: caches, clocks, lazy loading
    samples: list[float] = []
    previous = None
    deadline = time.perf_counter() + settings["budget_s"]
    while True:
        samples += time_batch(run, settings["batch"], cold)
        median = float(np.median(samples))
        enough = len(samples) >= settings["min_reps"]
        if enough and previous is not None and abs(median - previous) <= settings["stable_rel"] * previous:
            return summarise(samples, settings["mode"], "stable")
        if len(samples) >= settings["max_reps"]:
            return summarise(samples, settings["mode"], "max_reps")
        if enough and time.perf_counter() > deadline:
            return summarise(samples, settings["mode"], "budget")
        previous = median
