"""The verdicts' numbers: the threshold is the config's (verdicts.threshold, read once into a
VerdictPolicy), the drift floor and the launch-bound floor are the rule's own."""

from __future__ import annotations

import pytest

from convlab.history.verdictpolicy import DRIFT_FLOOR, LAUNCH_BOUND_FLOOR, LAUNCH_BOUND_MS, VerdictPolicy, floor_for
from convlab.history.verdictrule import SAME, SLOWER, verdict, verdict_of_interval
from convlab.plan.config import load_schema, validate_config


def test_the_policy_is_the_validated_configs_verdicts_section():
    defaults = load_schema()["properties"]["verdicts"]["properties"]
    policy = VerdictPolicy.from_config(validate_config({"backend": "cpu"}))
    assert (policy.threshold, policy.paired, policy.pair_budget_s) == (
        defaults["threshold"]["default"], defaults["paired"]["default"], defaults["pair_budget_s"]["default"])
    chosen = VerdictPolicy.from_config(validate_config({"backend": "cpu", "verdicts": {"threshold": 0.05,
                                                                                        "paired": False}}))
    assert (chosen.threshold, chosen.paired, chosen.pair_precision) == (0.05, False, pytest.approx(0.0125))


def test_the_threshold_judges_a_pairs_interval_and_the_drift_floor_two_runs():
    """x1.031 [1.025, 1.037]: beyond a 2 % threshold, within a 4 % one; the same change between two
    runs is within the 8 % drift floor."""
    assert verdict_of_interval(1.025, 1.037, 0.02) == SLOWER
    assert verdict_of_interval(1.025, 1.037, 0.04) == SAME
    assert verdict(1.0, 0.001, 1.031, 0.001, DRIFT_FLOOR)[0] == SAME


def test_a_launch_bound_cell_gets_the_wider_floor_unless_a_wider_one_is_asked():
    assert floor_for(LAUNCH_BOUND_MS / 2, DRIFT_FLOOR) == LAUNCH_BOUND_FLOOR
    assert floor_for(LAUNCH_BOUND_MS, DRIFT_FLOOR) == DRIFT_FLOOR
    assert floor_for(LAUNCH_BOUND_MS / 2, 0.3) == 0.3
