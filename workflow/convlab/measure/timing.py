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
# A kernel slower than this may stop at this many repeats once its budget is spent
# (seed 001's one-thread-per-row GEMM takes seconds per launch at 4096^2).
FLOOR_REPS = 3


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
    budget_ms = settings["budget_s"] * 1e3
    started = time.perf_counter()
    # untimed warm-up (caches, clocks, lazy loading); one run is enough for a slow kernel
    first_ms = time_batch(run, 1, cold)[0]
    if settings["warmup"] > 1 and first_ms < budget_ms / 10:
        time_batch(run, settings["warmup"] - 1, cold)
    # batches sized so that a slow kernel still checks the budget often
    batch = int(max(1, min(settings["batch"], budget_ms / 10 / max(first_ms, 1e-6))))
    samples: list[float] = []
    previous = None
    while True:
        samples += time_batch(run, batch, cold)
        median = float(np.median(samples))
        spent = time.perf_counter() - started > settings["budget_s"]
        enough = len(samples) >= settings["min_reps"] or (spent and len(samples) >= FLOOR_REPS)
        if enough and previous is not None and abs(median - previous) <= settings["stable_rel"] * previous:
            return summarise(samples, settings["mode"], "stable")
        if len(samples) >= settings["max_reps"]:
            return summarise(samples, settings["mode"], "max_reps")
        if enough and spent:
            return summarise(samples, settings["mode"], "budget")
        previous = median
