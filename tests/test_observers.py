"""Observers with a lifecycle (cpu backend): each step of a cell runs between its observers'
before() and after() hooks, a failing step calls abandon() instead, and the telemetry watches the
timed work alone."""

from __future__ import annotations

from contextlib import nullcontext
from types import SimpleNamespace

import pytest
from cpu_helpers import cell_for

from convlab.backends.cpu import CpuBackend
from convlab.measure.observers.base import Observer
from convlab.measure.telemetry import TimedWorkTelemetry
from convlab.run.runner import observed, run_cell
from convlab.status import CellFailure


class Recorder(Observer):
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def before(self, step, run):
        self.log.append(f"before {step}")

    def after(self, step, run):
        self.log.append(f"after {step}")

    def abandon(self):
        self.log.append("abandon")


RUN = SimpleNamespace(backend=SimpleNamespace(guard=lambda step: nullcontext()))


def test_a_step_runs_between_before_and_after():
    log: list[str] = []
    assert observed("timing", RUN, [Recorder(log)], lambda: log.append("work") or 7) == 7
    assert log == ["before timing", "work", "after timing"]


def test_a_failing_step_abandons_every_observer_and_the_failure_goes_on():
    log: list[str] = []

    def fail():
        raise CellFailure("timing: the kernel fell over", "timing")

    with pytest.raises(CellFailure):
        observed("timing", RUN, [Recorder(log), Recorder(log)], fail)
    assert log == ["before timing", "before timing", "abandon", "abandon"]


def test_a_failing_after_hook_fails_the_step():
    log: list[str] = []

    class Breaks(Observer):
        def after(self, step, run):
            raise CellFailure("timing: a stage fell over", "timing")

    with pytest.raises(CellFailure):
        observed("timing", RUN, [Breaks(), Recorder(log)], lambda: None)
    assert log == ["before timing", "abandon"]


class Watch:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, *exc):
        self.log.append("exit")

    def columns(self, result):
        return {"telemetry_samples": 3}


def test_the_telemetry_watches_from_the_timing_to_the_end_of_the_round_trip():
    log: list[str] = []
    run = SimpleNamespace(backend=SimpleNamespace(telemetry=lambda: Watch(log)))
    telemetry = TimedWorkTelemetry()
    for step in ("place", "setup", "launch", "timing", "e2e", "verify"):
        telemetry.before(step, run)
        log.append(step)
        telemetry.after(step, run)
    assert log == ["place", "setup", "launch", "enter", "timing", "e2e", "exit", "verify"]
    assert telemetry.columns(None) == {"telemetry_samples": 3}
    # a cell that fails afterwards reports none of it, and one failing inside lets go of the watch
    telemetry.abandon()
    assert telemetry.columns(None) == {}
    log.clear()
    telemetry.before("timing", run)
    telemetry.abandon()
    assert log == ["enter", "exit"] and telemetry.columns(None) == {}


def test_a_cells_phases_are_its_steps_in_order(image_path):
    row = run_cell(cell_for("direct"), image_path, backend=CpuBackend())
    assert row["status"] == "ok"
    assert [part.split("=")[0] for part in row["phase_ms"].split(";")] == [
        "place", "setup", "launch", "timing", "e2e", "verify"]
