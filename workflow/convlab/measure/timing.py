"""The timing loop: warm up, then batches of repeats until the median is stable or the budget ends.

The backend supplies ``time_batch(run, n, cold)`` which returns the device time
of each of ``n`` repeats in milliseconds (CUDA events on the GPU).

Mode ``graph`` (after nvbench's batch mode) is for launch-bound kernels, whose one-launch event
pair measures the event floor (~2-3 us), not the kernel: the backend's ``capture(run, n)``
records n back-to-back runs once (a CUDA graph on the GPU) and returns a sampler, each of whose
samples is one replay of all n, reported per run. A run that cannot be captured (cuBLAS
refuses stream capture) is timed per launch, as ``warm``, and the result says why.

A kernel of several stages (im2col, then GEMM) has each stage's time too. A run of STAGES_IN_RUN_MS
or more is timed with a clock read between its stages (the backend's ``time_stages``), so that its
own repeats give its stages' times; a shorter run's stages are each timed alone afterwards, where
the reads between them would be a share of the run.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

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
# A run at least this long has its stages timed within its own repeats: an event between two
# stages costs about a microsecond of the device, under 0.1 % of such a run.
STAGES_IN_RUN_MS = 1.0


class StagedSample(NamedTuple):
    """One run of a kernel's stages in order: the run's ms (first stage's start to last one's end)
    and each stage's."""

    run_ms: float
    stage_ms: tuple[float, ...]


# time_stages(runs, n, cold): n back-to-back runs of ``runs`` in order, a clock read between them
TimeStages = Callable[[Sequence[Callable[[], None]], int, bool], list[StagedSample]]


@dataclass(frozen=True)
class Stages:
    """A kernel's stages, by name, and how its backend times them within one run."""

    named: tuple[tuple[str, Callable[[], None]], ...]
    time_stages: TimeStages


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
    stage_ms: tuple[tuple[str, float], ...] = ()  # each stage's median, where the kernel has several
    stages_in_run: bool = False  # whether they come from the kernel's own repeats (else each timed alone)


def summarise(samples_ms: list[float], mode: str, stop: str, applied: str = "", launches: int | None = None,
              fallback: str = "") -> TimingResult:
    values = np.asarray(samples_ms, dtype=np.float64)
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return TimingResult(float(median), float(values.min()), float(values.max()),
                        float(q3 - q1), int(values.size), mode, stop, applied or mode, launches, fallback)


class _StageRecorder:
    """Runs timed with a clock read between their stages: each run's time for the timing loop, and
    the stages' times kept for their medians."""

    def __init__(self, stages: Stages, cold: bool) -> None:
        self.stages, self.cold = stages, cold
        self.samples: list[tuple[float, ...]] = []

    def sample(self, n: int) -> list[float]:
        staged = self.stages.time_stages([run for _, run in self.stages.named], n, self.cold)
        self.samples += [sample.stage_ms for sample in staged]
        return [sample.run_ms for sample in staged]

    def medians(self) -> tuple[tuple[str, float], ...]:
        return tuple((name, float(np.median([sample[index] for sample in self.samples])))
                     for index, (name, _) in enumerate(self.stages.named))


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


def measure(run: Callable[[], None], time_batch: TimeBatch, settings: dict, capture: Capture | None = None,
            stages: Stages | None = None) -> TimingResult:
    """``capture`` is the backend's graph capture, used in mode ``graph`` only; ``stages``, where
    given, are ``run``'s, and a long enough run times them within its repeats (the result's
    ``stage_ms``). The caller has run ``run`` once already (the runner's launch step)."""
    cold = settings["mode"] == "cold"
    budget_ms = settings["budget_s"] * 1e3
    started = time.perf_counter()
    staged = _StageRecorder(stages, cold) if stages and len(stages.named) > 1 else None
    # untimed warm-up (caches, clocks, lazy loading); one run is enough for a slow kernel
    warm_ms = staged.sample(1) if staged else time_batch(run, 1, cold)
    slow = warm_ms[0] >= budget_ms / 10
    if settings["warmup"] > 1 and not slow:
        warm_ms = [*warm_ms, *time_batch(run, settings["warmup"] - 1, cold)]
    sampling = _sampling(run, time_batch, settings, capture, warm_ms)
    if staged and (sampling.applied == "graph" or float(np.median(warm_ms[1:] or warm_ms)) < STAGES_IN_RUN_MS):
        staged = None
    if staged:
        sampling = replace(sampling, sample=staged.sample)
    # batches sized so that a slow kernel still checks the budget often
    batch = int(max(1, min(settings["batch"], budget_ms / 10 / max(sampling.sample_ms, 1e-6))))
    # A slow kernel was warmed by the launch step's run before this one (the caller's, always):
    # lazy loading is done, and a run of a tenth of the budget or more brings the clocks up within
    # its first milliseconds. Its one warm-up run is then timed as warm as any repeat: it counts.
    samples: list[float] = list(warm_ms) if slow and sampling.applied == "warm" else []
    if staged and not samples:
        staged.samples.clear()
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
            result = summarise(samples, settings["mode"], stop, sampling.applied, sampling.launches, sampling.fallback)
            return replace(result, stage_ms=staged.medians(), stages_in_run=True) if staged else result
        previous = median


def time_stages_alone(named: Sequence[tuple[str, Callable[[], None]]], time_batch: TimeBatch, settings: dict,
                      capture: Capture | None = None) -> tuple[tuple[str, float], ...]:
    """Each stage timed on its own with the cell's settings, the stages sharing one budget: together
    they are one run of the kernel, and with a budget each a slow kernel's stages would take as
    long again as its own repeats for every stage."""
    shared = {**settings, "budget_s": settings["budget_s"] / max(1, len(named))}
    return tuple((name, measure(run, time_batch, shared, capture).median_ms) for name, run in named)
