"""Two versions of a kernel timed side by side, and how sure the ratio of their times is.

Two runs of a cell drift apart by more than either's own spread (clocks, temperature, what else
the host does), so a verdict between runs needs a floor of a few percent. Both versions measured
in one process, on the same operands, in interleaved rounds share every drift slower than a
round: the log of each round's time ratio is a paired difference, and the interval of their mean
is the change, to a fraction of a percent.

Which version goes first is balanced and random: the rounds come in blocks of two, one of each
order, the block's order drawn from a seeded generator (round_orders). A strict alternation
(previous then new, new then previous, ...) puts each version on fixed places in a cycle of four
batches, and whatever in the process or the GPU repeats with that cycle becomes a difference
between the versions: on an H200, one winograd_batched kernel against itself (one module, one
placement) came out x0.962 or x1.040 in half of its pairs that way, each with a narrow interval,
and SAME in all 16 with the order drawn at random.

Each round takes a batch of runs of each version (the median run of each batch is its time) and,
where the device reports it, the SM clock during each batch: a round whose clocks differ is
compared in cycles (time x clock), as a change of clock is not the kernel's doing. The rounds go
on until the interval is as narrow as asked, or the budget is spent (never fewer than
MIN_ROUNDS, or FEW_ROUNDS for a kernel slow enough to spend the budget on them). The interval is
a percentile bootstrap of the mean log ratio, with a fixed seed (the same rounds give the same
interval), widened by a systematic term no number of rounds removes (SYSTEMATIC); the rounds stop
on the normal approximation of the bootstrap's part.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

# side(n): n samples of one version, each in ms per run (a sample is one run, or one replay of a
# graph of runs), and the SM clock (MHz) while they ran, or None
Sampler = Callable[[int], tuple[list[float], float | None]]


@dataclass(frozen=True)
class Side:
    """One version as the rounds take it: its sampler and the runs in one of its samples."""

    sample: Sampler
    runs_per_sample: int = 1

MIN_ROUNDS = 8
FEW_ROUNDS = 3
MAX_ROUNDS = 400
# Student's t at 0.995 (two-sided 99 %) by degrees of freedom, for fewer rounds than the bootstrap
# needs (it is too narrow on a handful of values)
FEW_ROUNDS_T = {1: 63.66, 2: 9.925, 3: 5.841, 4: 4.604, 5: 4.032, 6: 3.707, 7: 3.499}
# One batch of one version lasts about this long: long enough that a round's ratio is not one
# launch's jitter, short enough that many rounds fit in a cell's budget.
BATCH_MS = 1.0
MAX_BATCH = 200
CONFIDENCE = 0.99
# The part of a pair's error its rounds cannot see: two modules of identical code, side by side in
# one process, differed by up to 1.7 % on an H200 (p99 1.2 %, p90 0.3 %, 546 pairs), beyond their
# rounds' interval at tiny (µs) kernels. Added in quadrature to each side of the interval.
SYSTEMATIC = 0.005
NORMAL_QUANTILE = 2.576  # two-sided 99 %
RESAMPLES = 4000
SEED = 0


@dataclass(frozen=True)
class PairedResult:
    """new / previous: the ratio (the geometric mean of the rounds'), its interval at CONFIDENCE,
    and how it was measured."""

    ratio: float
    low: float
    high: float
    rounds: int
    previous_ms: float  # the median run of each version over all rounds
    new_ms: float
    stop: str  # precise | budget | max_rounds
    clock_normalised: bool  # some round's two clocks differed, and it was compared in cycles
    batch: int  # samples of each version per round
    neighbours: int | None = None  # other processes that used the GPU during the rounds (None: not known)
    neighbour_names: str = ""
    sampling: str = ""  # how both versions were sampled, alike: "graph of N launches", "per launch"
    unproved: str = ""  # why the pair's times were not checked against the rows' ('' where they were)


def bootstrap_interval(logs: Sequence[float], confidence: float = CONFIDENCE, resamples: int = RESAMPLES,
                       seed: int = SEED) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of ``logs``; Student's t interval for fewer
    than MIN_ROUNDS values (at CONFIDENCE 0.99)."""
    values = np.asarray(logs, dtype=np.float64)
    if values.size < 2:
        return -math.inf, math.inf
    if values.size < MIN_ROUNDS:
        half = FEW_ROUNDS_T[values.size - 1] * float(values.std(ddof=1)) / math.sqrt(values.size)
        return float(values.mean()) - half, float(values.mean()) + half
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, values.size, size=(resamples, values.size))].mean(axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


def normal_half_width(logs: Sequence[float]) -> float:
    """The normal approximation of the interval's half-width (the stopping rule's: a bootstrap
    after every round would cost more than the rounds)."""
    return NORMAL_QUANTILE * statistics.stdev(logs) / math.sqrt(len(logs))


def round_log_ratio(previous_ms: list[float], new_ms: list[float], previous_clock: float | None,
                    new_clock: float | None) -> tuple[float, bool]:
    """One round's log(new / previous), in cycles where both clocks are known and differ; and
    whether it was."""
    log_ratio = math.log(statistics.median(new_ms) / statistics.median(previous_ms))
    if previous_clock and new_clock and previous_clock != new_clock:
        return log_ratio + math.log(new_clock / previous_clock), True
    return log_ratio, False


def batch_size(previous: Side, new: Side) -> int:
    """Samples per batch so that a batch of the slower version lasts about BATCH_MS (one sample
    of each to tell; these are warm-up, not samples)."""
    slower = max(max(side.sample(1)[0]) * side.runs_per_sample for side in (previous, new))
    return int(min(MAX_BATCH, max(1, math.ceil(BATCH_MS / max(slower, 1e-6)))))


def round_orders(seed: int = SEED) -> Iterator[bool]:
    """Whether the previous version goes first, round by round: in blocks of two rounds, one of each
    order, the block's order drawn at random (the same every time for one seed)."""
    draw = random.Random(seed)
    while True:
        first = draw.random() < 0.5
        yield first
        yield not first


def interleave(previous: Side, new: Side, precision: float, budget_s: float) -> PairedResult:
    """Rounds of both versions, in a balanced random order (round_orders), until the interval of
    the log ratio is within ± ``precision`` (a relative half-width: 0.005 is ±0.5 %), or
    ``budget_s`` is spent."""
    started = time.perf_counter()
    batch = batch_size(previous, new)
    logs: list[float] = []
    previous_all: list[float] = []
    new_all: list[float] = []
    normalised = False
    half_width = math.log1p(precision)
    stop = ""
    orders = round_orders()
    while not stop:
        if next(orders):
            previous_ms, previous_clock = previous.sample(batch)
            new_ms, new_clock = new.sample(batch)
        else:
            new_ms, new_clock = new.sample(batch)
            previous_ms, previous_clock = previous.sample(batch)
        log_ratio, cycles = round_log_ratio(previous_ms, new_ms, previous_clock, new_clock)
        logs.append(log_ratio)
        normalised = normalised or cycles
        previous_all += previous_ms
        new_all += new_ms
        spent = time.perf_counter() - started > budget_s
        if len(logs) >= MIN_ROUNDS and normal_half_width(logs) <= half_width:
            stop = "precise"
        if not stop and len(logs) >= MAX_ROUNDS:
            stop = "max_rounds"
        if not stop and spent and len(logs) >= FEW_ROUNDS:
            stop = "budget"
    mean = sum(logs) / len(logs)
    low, high = with_systematic(mean, *bootstrap_interval(logs))
    return PairedResult(math.exp(mean), math.exp(low), math.exp(high), len(logs), statistics.median(previous_all),
                        statistics.median(new_all), stop, normalised, batch)


def with_systematic(mean: float, low: float, high: float) -> tuple[float, float]:
    """The rounds' interval of the mean log ratio widened by SYSTEMATIC, in quadrature."""
    return (mean - math.hypot(mean - low, math.log1p(SYSTEMATIC)),
            mean + math.hypot(high - mean, math.log1p(SYSTEMATIC)))
