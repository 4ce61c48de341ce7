"""The numbers the verdicts are judged by, each named once here (standard library only: the command
table reads `compare`'s default floor from it).

    threshold            config verdicts.threshold (its default: workflow/schemas/config.schema.yaml).
                         The smallest change the lab calls FASTER or SLOWER where it can measure that
                         finely: a pair's interval is judged against ± it, a cell's own floor (its
                         learned run-to-run noise, convlab.history.noise) is never under it, and a
                         pair's rounds aim for an interval of a quarter of it each side.
    drift floor          DRIFT_FLOOR. How far two runs of the same code on one GPU drift apart: the
                         floor of a cell that has no own floor (`compare`, and a run's verdict on a
                         cell with few reruns); `compare --floor` moves it.
    launch-bound floor   LAUNCH_BOUND_FLOOR. The drift floor of a cell whose faster side runs under
                         LAUNCH_BOUND_MS.

The threshold is the config's, read once where a command starts (VerdictPolicy.from_config) and
handed down; the floors are the rule's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Run-to-run drift of one kernel on one GPU is a few percent; 8 % sits above it with margin and
# below asv's default 10 %, so a steady kernel's 10 % regression is still reported.
DRIFT_FLOOR = 0.08
# Kernels this short are dominated by the launch and by the timer's resolution...
LAUNCH_BOUND_MS = 0.02
# ...and move by up to about 13 % between runs of the same code.
LAUNCH_BOUND_FLOOR = 0.15
# A pair aims for an interval this share of the threshold each side, so that a change just past
# the threshold is told apart from it.
PRECISION_SHARE = 0.25


def floor_for(fastest_ms: float, floor: float) -> float:
    """``floor`` for a cell whose faster side takes ``fastest_ms``: at least LAUNCH_BOUND_FLOOR
    where that is launch-bound."""
    return max(floor, LAUNCH_BOUND_FLOOR) if fastest_ms < LAUNCH_BOUND_MS else floor


@dataclass(frozen=True)
class VerdictPolicy:
    """The config's `verdicts` section: the threshold, whether re-measured cells with changed
    kernel files are paired, the seconds a pair may take per cell, and whether a pair's FASTER or
    SLOWER comes with why."""

    threshold: float
    paired: bool
    pair_budget_s: float
    why: bool = False  # each FASTER or SLOWER pair explained by both versions' hardware counts

    @property
    def pair_precision(self) -> float:
        """The half-width (relative) a pair's interval aims for."""
        return self.threshold * PRECISION_SHARE

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> VerdictPolicy:
        """The policy of a validated config (its schema has filled every default)."""
        section = config["verdicts"]
        return cls(float(section["threshold"]), bool(section["paired"]), float(section["pair_budget_s"]),
                   bool(section.get("why", False)))
