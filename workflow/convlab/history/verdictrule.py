"""The verdict rule: when a change of a cell's time is SAME, FASTER, SLOWER or UNCLEAR. Both
the comparison of two result sets (convlab.history.compare) and a run's own verdicts
(convlab.history.verdicts, with a pair's interval: verdict_of_interval) judge by it. What they judge, the
ratio with its interval and its paired rounds, is one record (Ratio) wherever it is kept: the pair file, the
verdicts and latest.csv's reader.

Each row records the median of its timed repeats and their interquartile range (IQR). Per cell:

    spread   = kernel_ms_iqr / kernel_ms             of A and of B (relative IQR)
    noise    = sqrt(spread_A**2 + spread_B**2)      the spread of a difference of the two
    change   = max(r, 1/r) - 1,  r = B/A             symmetric: 2x slower and 2x faster are both 1.0
    floor    = the drift floor (8 %; compare --floor), at least 15 % where either median is under 0.02 ms

    SAME     change <= floor                         too small to tell from run-to-run drift
             or change <= noise <= 20 %              within the measurements' own spread
    UNCLEAR  otherwise, where change <= 2 * noise    beyond the floor, but not clear of the spread
    FASTER   B's median is lower  } beyond the floor and beyond twice the noise
    SLOWER   B's median is higher }

This follows nvbench's ``nvbench_compare`` (a difference within the measurements' noise is SAME)
and asv's change detection (a change must exceed a relative floor and the noise). Two runs of
the same code on one GPU differ by a few percent (clocks, temperature, the other tenants of the
host) while each run's own spread can be far smaller, so the floor, not the spread, keeps a rerun
SAME; kernels that take a few microseconds are dominated by the launch and move by up to about
13 % between runs, hence their wider floor (convlab.history.verdictpolicy names both floors). A
wide spread (over 20 % combined) never makes a change SAME beyond the floor: such a cell is
UNCLEAR unless the change is clear of twice the noise.

The min and max of the repeats are not used: one repeat preempted by the host sets the max
(summaries show maxima 30 times the median), so overlapping ranges would call almost any
change UNCLEAR.

A FASTER or SLOWER where either side's row cannot be vouched for (convlab.history.vouching: the cpu
backend's shared host, a GPU that throttled or that another process's work shared while it was
timed) is UNCLEAR ("unconfirmed" in its note), so that ``--fail-on slower`` fails only on a change
the host cannot have made.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from convlab.history.verdictpolicy import floor_for

# A combined spread wider than this cannot show that a change beyond the floor is noise.
WIDE_NOISE = 0.20
# A change must clear the noise by this factor to be called FASTER or SLOWER.
CLEAR_FACTOR = 2.0

SAME, FASTER, SLOWER, UNCLEAR, MISSING = "SAME", "FASTER", "SLOWER", "UNCLEAR", "MISSING"
TIMED_VERDICTS = (FASTER, SLOWER, SAME, UNCLEAR)


def number(value: object) -> float:
    """``value`` as a float, nan where it is none."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan
    return number


def verdict(a_ms: float, a_iqr: float, b_ms: float, b_iqr: float,
            floor: float, own_floor: bool = False) -> tuple[str, float, float, float]:
    """The verdict on one cell timed in both sets (see this module's docstring), with the ratio B/A,
    the floor applied and the combined noise (inf where a spread is unknown). ``floor``: the drift
    floor, widened here for a launch-bound cell; ``own_floor``: it is the cell's own, learned from
    its history (convlab.history.noise), and applies whatever the cell's time."""
    ratio = b_ms / a_ms
    floor = floor if own_floor else floor_for(min(a_ms, b_ms), floor)
    spreads = [iqr / ms for iqr, ms in ((a_iqr, a_ms), (b_iqr, b_ms))]
    noise = math.hypot(*spreads) if all(math.isfinite(s) and s >= 0 for s in spreads) else math.inf
    change = max(ratio, 1 / ratio) - 1
    # a hair of slack, so that a change of exactly the floor (1.08 against 1.00) is not lost to rounding
    if change <= floor + 1e-9 or (change <= noise and noise <= WIDE_NOISE):
        return SAME, ratio, floor, noise
    if change <= CLEAR_FACTOR * noise:
        return UNCLEAR, ratio, floor, noise
    return (FASTER if ratio < 1 else SLOWER), ratio, floor, noise


@dataclass(frozen=True)
class Ratio:
    """A cell's new / previous time as it is judged: the ratio, its interval where a pair's rounds or the cell's own
    floor gave one, and the rounds where it was measured side by side with its previous version (0: the same machine
    code, launched alike, so not timed; None: not measured side by side). None where there is no such number."""

    value: float | None = None
    low: float | None = None
    high: float | None = None
    rounds: int | None = None

    @property
    def bounded(self) -> bool:
        """The ratio and both ends of its interval are known (verdict_of_interval can judge it)."""
        return self.value is not None and self.low is not None and self.high is not None

    @property
    def half_width(self) -> float | None:
        """The log half-width of the interval, where it has one."""
        if self.value and self.low and self.high:
            return (math.log(self.high) - math.log(self.low)) / 2
        return None


def geomean(values: Iterable[float]) -> float:
    """The geometric mean of the positive values (nan where there is none)."""
    logs = [math.log(v) for v in values if v is not None and v == v and v > 0]
    return math.exp(sum(logs) / len(logs)) if logs else math.nan


def verdict_of_interval(low: float, high: float, threshold: float) -> str:
    """SLOWER or FASTER when the whole interval lies beyond ± the threshold (config
    verdicts.threshold), SAME when it lies within it, UNCLEAR when it straddles an edge."""
    if low > 1 + threshold:
        return SLOWER
    if high < 1 - threshold:
        return FASTER
    if low >= 1 - threshold and high <= 1 + threshold:
        return SAME
    return UNCLEAR
