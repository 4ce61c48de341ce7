"""The timing loop: warm up, then batches of repeats until the median is stable or the budget ends.

The backend supplies ``time_batch(run, n, cold)`` which returns the device time
of each of ``n`` repeats in milliseconds (CUDA events on the GPU).

Mode ``graph`` (after nvbench's batch mode) is for launch-bound kernels, whose one-launch event
pair measures the event floor (~2-3 us), not the kernel: the backend's ``capture(run, n)``
records n back-to-back runs once (a CUDA graph on the GPU) and returns a sampler, each of whose
samples is one replay of all n, reported per run. A run that cannot be captured (cuBLAS
refuses stream capture) is timed per launch, as ``warm``, and the result says why.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

TimeBatch = Callable[[Callable[[], None], int, bool], list[float]]
# samples(k): k samples, each the ms per run of one replay of the captured runs
Sampler = Callable[[int], list[float]]
Capture = Callable[[Callable[[], None], int], Sampler]
# A kernel slower than this may stop at this many repeats once its budget is spent
# (seed 001's one-thread-per-row GEMM takes seconds per launch at 4096^2).
FLOOR_REPS = 3
# One graph replay lasts at least this long, so that its launch and the event pair around it
# (a few us) are under 1 % of the sample.
GRAPH_MS = 1.0
MAX_GRAPH_LAUNCHES = 10_000  # a graph of ~1 us kernels; more nodes only slow the capture


class GraphRefused(Exception):
    """The run cannot be captured into a graph (the reason is the message)."""


@dataclass(frozen=True)
class TimingResult:
    median_ms: float
    min_ms: float
    max_ms: float
    iqr_ms: float
    reps: int
    mode: str  # as configured
    stop: str  # stable | budget | max_reps
    applied: str = ""  # the mode that measured the samples: the configured one, or warm where a graph was refused
    launches: int | None = None  # runs per sample in a graph (None: one run per sample)
    fallback: str = ""  # why the configured mode did not apply


def summarise(samples_ms: list[float], mode: str, stop: str, applied: str = "", launches: int | None = None,
              fallback: str = "") -> TimingResult:
    values = np.asarray(samples_ms, dtype=np.float64)
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return TimingResult(float(median), float(values.min()), float(values.max()),
                        float(q3 - q1), int(values.size), mode, stop, applied or mode, launches, fallback)


def graph_launches(per_run_ms: float) -> int:
    """Runs per graph so that one replay lasts about GRAPH_MS."""
    return int(min(MAX_GRAPH_LAUNCHES, max(1, math.ceil(GRAPH_MS / max(per_run_ms, 1e-6)))))


def capture_graph(run: Callable[[], None], capture: Capture, per_run_ms: float) -> tuple[Sampler, int, float]:
    """The sampler of a graph of about GRAPH_MS, its runs per replay, and one replay's ms.

    The first size comes from the per-launch time, which for a launch-bound kernel is the event
    floor, above its real time: a replay well short of GRAPH_MS is captured again, larger. A run
    of GRAPH_MS or more is timed well by its events already: it is not replayed an extra time."""
    launches = graph_launches(per_run_ms)
    sample = capture(run, launches)
    if per_run_ms >= GRAPH_MS:
        return sample, launches, per_run_ms
    replay_ms = sample(1)[0] * launches  # also the graph's own warm-up
    if replay_ms < 0.9 * GRAPH_MS and launches < MAX_GRAPH_LAUNCHES:
        launches = graph_launches(replay_ms / launches)
        sample = capture(run, launches)
        replay_ms = sample(1)[0] * launches
    return sample, launches, replay_ms


@dataclass(frozen=True)
class _Sampling:
    """How the repeats are taken: the sampler, one sample's ms, and what the row says of it."""

    sample: Sampler
    sample_ms: float
    applied: str
    launches: int | None = None
    fallback: str = ""


def _sampling(run: Callable[[], None], time_batch: TimeBatch, settings: dict, capture: Capture | None,
              warm_ms: list[float]) -> _Sampling:
    mode = settings["mode"]

    def per_launch(n: int) -> list[float]:
        return time_batch(run, n, mode == "cold")

    if mode != "graph":
        return _Sampling(per_launch, warm_ms[0], mode)
    try:
        if capture is None:
            raise GraphRefused("no graph capture on this path")
        sample, launches, replay_ms = capture_graph(run, capture, float(np.median(warm_ms[1:] or warm_ms)))
    except GraphRefused as refused:
        return _Sampling(per_launch, warm_ms[0], "warm", fallback=f"graph capture refused, timed per launch: {refused}")
    return _Sampling(sample, replay_ms, "graph", launches)


def measure(run: Callable[[], None], time_batch: TimeBatch, settings: dict, capture: Capture | None = None) -> TimingResult:
    """``capture`` is the backend's graph capture, used in mode ``graph`` only. The caller has run
    ``run`` once already (the runner's launch step)."""
    cold = settings["mode"] == "cold"
    budget_ms = settings["budget_s"] * 1e3
    started = time.perf_counter()
    # untimed warm-up (caches, clocks, lazy loading); one run is enough for a slow kernel
    warm_ms = time_batch(run, 1, cold)
    slow = warm_ms[0] >= budget_ms / 10
    if settings["warmup"] > 1 and not slow:
        warm_ms = [*warm_ms, *time_batch(run, settings["warmup"] - 1, cold)]
    sampling = _sampling(run, time_batch, settings, capture, warm_ms)
    # batches sized so that a slow kernel still checks the budget often
    batch = int(max(1, min(settings["batch"], budget_ms / 10 / max(sampling.sample_ms, 1e-6))))
    # A slow kernel was warmed by the launch step's run before this one (the caller's, always):
    # lazy loading is done, and a run of a tenth of the budget or more brings the clocks up within
    # its first milliseconds. Its one warm-up run is then timed as warm as any repeat: it counts.
    samples: list[float] = list(warm_ms) if slow and sampling.applied == "warm" else []
    previous = None
    while True:
        samples += sampling.sample(batch)
        median = float(np.median(samples))
        spent = time.perf_counter() - started > settings["budget_s"]
        enough = len(samples) >= settings["min_reps"] or (spent and len(samples) >= FLOOR_REPS)
        stop = ""
        if enough and previous is not None and abs(median - previous) <= settings["stable_rel"] * previous:
            stop = "stable"
        elif len(samples) >= settings["max_reps"]:
            stop = "max_reps"
        elif enough and spent:
            stop = "budget"
        if stop:
            return summarise(samples, settings["mode"], stop, sampling.applied, sampling.launches, sampling.fallback)
        previous = median
