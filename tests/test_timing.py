"""The timing loop's stopping rules, with a synthetic clock (tests check behaviour, not speed)."""

import itertools

import pytest

from convlab.measure.timing import measure

SETTINGS = {"mode": "warm", "warmup": 2, "min_reps": 10, "max_reps": 200, "batch": 5,
            "stable_rel": 0.01, "budget_s": 60.0}


def fake_batches(values):
    source = itertools.cycle(values)
    calls = []

    def time_batch(run, n, cold):
        calls.append((n, cold))
        return [next(source) for _ in range(n)]

    return time_batch, calls


def test_stops_when_the_median_is_stable():
    time_batch, calls = fake_batches([1.0, 1.02, 0.98])
    result = measure(lambda: None, time_batch, SETTINGS)
    assert result.stop == "stable"
    assert result.reps >= SETTINGS["min_reps"]
    assert result.median_ms == pytest.approx(1.0, rel=0.03)
    assert calls[0] == (2, False)  # warm-up first, untimed


def test_stops_at_max_reps_when_never_stable():
    drifting = (float(i) for i in itertools.count(1))
    result = measure(lambda: None, lambda run, n, cold: [next(drifting) for _ in range(n)],
                     dict(SETTINGS, stable_rel=1e-9))
    assert result.stop == "max_reps" and result.reps == 200


def test_stops_at_the_budget():
    drifting = (float(i) for i in itertools.count(1))
    result = measure(lambda: None, lambda run, n, cold: [next(drifting) for _ in range(n)],
                     dict(SETTINGS, stable_rel=1e-9, max_reps=10**9, budget_s=0.0))
    assert result.stop == "budget" and result.reps == SETTINGS["min_reps"]


def test_cold_mode_is_passed_to_the_backend_and_recorded():
    time_batch, calls = fake_batches([2.0])
    result = measure(lambda: None, time_batch, dict(SETTINGS, mode="cold"))
    assert all(cold for _, cold in calls) and result.mode == "cold"
    assert result.min_ms == result.max_ms == 2.0 and result.iqr_ms == 0.0
