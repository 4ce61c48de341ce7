"""Each cell's own run-to-run noise, learned from its history.

Two runs of a cell drift more than each run's own spread (clocks, temperature, the host's other
work), so a verdict against the previous run needs a floor. One floor for every cell (the drift
floor, convlab.history.verdictpolicy) is too wide for a quiet cell and too narrow for a noisy one.
So each cell's floor is its own where its history can say: from the consecutive ``ok``
measurements of the cell between which nothing it records changed (kernel files, measurement code,
config, GPU board, picture), the log ratios of their times are the cell's run-to-run drift, and
their root mean square its spread. A rerun's log ratio is then within ± t × spread but for 0.5 %
of reruns, t being Student's quantile for as many pairs (the spread of a few pairs is itself
uncertain, so t is wider for them); that is the cell's floor, never under the threshold (config
verdicts.threshold), and the interval a verdict line gives is the ratio × exp(± t × spread). A cell
with fewer than MIN_PAIRS such pairs keeps the drift floor. One disturbed run in a cell's history
widens its floor: it costs detections, never false calls.

A row the lab cannot vouch for (convlab.history.vouching: measured beside another process, while
the GPU throttled, or on the cpu backend) moves by more than any history shows: its FASTER or
SLOWER is UNCLEAR, whichever side of the change it is.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from convlab.history.store import Measurement

MIN_PAIRS = 5
# Student's t at 0.9975 (two-sided 0.5 %) by degrees of freedom: a pair count takes the entry at
# or below it (the normal quantile, for ever more pairs, is 2.81)
T_QUANTILES = ((5, 4.77), (6, 4.32), (7, 4.03), (8, 3.83), (9, 3.69), (10, 3.58), (12, 3.43), (15, 3.29),
               (20, 3.15), (30, 3.03), (60, 2.91), (120, 2.86))
# what a measurement records of what shaped it: a change in any of them is not drift
SHAPING = ("kernel_hash", "code_version", "spec_hash", "gpu_uuid", "input_hash")


def t_quantile(pairs: int) -> float:
    """Student's t at 0.9975 for ``pairs`` degrees of freedom (the table's entry at or below it)."""
    chosen = T_QUANTILES[0][1]
    for degrees, value in T_QUANTILES:
        if pairs >= degrees:
            chosen = value
    return chosen


@dataclass(frozen=True)
class CellNoise:
    """A cell's run-to-run spread (of the log of its time), the pairs it was learned from, and the
    threshold its floor is never under."""

    sigma: float
    pairs: int
    threshold: float

    @property
    def floor(self) -> float:
        """The relative change a rerun with nothing changed stays within, at least the threshold."""
        return max(self.threshold, math.expm1(t_quantile(self.pairs) * self.sigma))

    def interval(self, ratio: float) -> tuple[float, float]:
        """The ratio's interval: where a rerun with nothing changed would put it."""
        half = math.log1p(self.floor)
        return ratio * math.exp(-half), ratio * math.exp(half)


def quiet_log_ratios(history: Iterable[Measurement]) -> list[float]:
    """The log ratios of consecutive ``ok`` measurements (oldest first) between which nothing that
    shapes a measurement changed."""
    timed = [m for m in history if m.status == "ok" and m.kernel_ms and m.kernel_ms > 0]
    return [math.log(later.kernel_ms / earlier.kernel_ms) for earlier, later in zip(timed, timed[1:])
            if all(getattr(earlier, name) == getattr(later, name) for name in SHAPING)]


def cell_noise(history: Iterable[Measurement], threshold: float) -> CellNoise | None:
    """The cell's learned noise, its floor at least ``threshold``; None where its history holds
    fewer than MIN_PAIRS quiet pairs."""
    ratios = quiet_log_ratios(history)
    if len(ratios) < MIN_PAIRS:
        return None
    return CellNoise(math.sqrt(sum(r * r for r in ratios) / len(ratios)), len(ratios), threshold)
