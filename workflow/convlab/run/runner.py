"""Run one cell: load -> place on device -> set up -> launch -> time -> verify -> one row.

The time step ends with the round trip (copy in, compute, copy out), whose runs start from a
NaN-filled output; the verify step compares the output its last run left with the float64 reference.

Every experiment family goes through the same steps (convlab.run.steps); its operands
(convlab.plan.operands) know how to place themselves, their float64 reference and the output layout
to compare in. Observers (convlab.measure.observers.standard) take part in each step through their
hooks (before it, after it, or abandon() where it fails) and report what the steps produced as
columns; convlab.measure.row builds the row from them.

A failure of the kernel under test (refused launch, out of memory, unsupported problem,
compile or runtime fault) is recorded in the row with its reason and no time. A wrong
result keeps its time but is flagged ``wrong``. Anything else is a pipeline bug and raises.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from convlab.backends import get_backend
from convlab.backends.base import Backend
from convlab.measure import provenance
from convlab.measure.observers.base import Observer
from convlab.measure.observers.standard import OBSERVERS
from convlab.measure.phases import PhaseClock
from convlab.measure.row import JobFacts, build_row
from convlab.measure.telemetry import TimedWorkTelemetry
from convlab.plan.cell import Cell
from convlab.plan.launch import problem_names
from convlab.run.steps import (
    CellInputs,
    Result,
    Run,
    Timed,
    launch,
    load_inputs,
    place,
    precision,
    round_trip,
    set_up,
    time_kernel,
    verify_output,
)
from convlab.status import ERROR, INVALID_CONFIG, UNSUPPORTED, CellFailure

Produced = TypeVar("Produced")

DEVICE_COLUMNS = ("device", "gpu_index", "gpu_uuid", "compute_capability", "host_threads", "driver_version",
                  "runtime_version", "cupy_version", "cudnn_version", "cublas_version", "cufft_version", "compiler")


class Outcome(NamedTuple):
    """A cell's status and why."""

    status: str
    reason: str


@dataclass(frozen=True)
class Measured:
    """A cell's measurement before its row: its outcome and the columns of its steps and observers."""

    outcome: Outcome
    parts: tuple[dict[str, Any], ...]

    def row(self, job: JobFacts | None = None) -> dict[str, Any]:
        """The row, with the facts of the job that measured the cell where there is one."""
        return build_row(self.parts, job)


def foreign_device(device: str, label: str, bandwidth_path: str | Path | None) -> str | None:
    """Why this device may not measure a cell of ``label``, or None. A label's device is the one
    its copy bandwidth was measured on: a cell that lands on another model (a Slurm group on
    another node type, say) must not mix into that label's summary."""
    if not bandwidth_path or not Path(bandwidth_path).is_file():
        return None
    recorded = json.loads(Path(bandwidth_path).read_text()).get("device")
    if recorded and recorded != device:
        return (f"measured on {device}, but results/{label}/ holds results of {recorded} (its copy bandwidth "
                f"was measured there); run this device under its own config device label")
    return None


def refusal(inputs: CellInputs, device: str, bandwidth_path: str | Path | None) -> Outcome | None:
    """Why the cell is not measured at all (another device's label, a problem the kernel has no
    code for, an unmet ``requires``), or None."""
    cell, spec = inputs.cell, inputs.spec
    foreign = foreign_device(device, cell.device, bandwidth_path)
    if foreign:
        return Outcome(ERROR, foreign)
    unsupported = spec.unsupported_reason(cell.stride, cell.filter_size)
    if unsupported:
        return Outcome(UNSUPPORTED, unsupported)
    names = problem_names(inputs.problem, cell.tunables)
    unmet = spec.unmet(names)
    if unmet:
        return Outcome(INVALID_CONFIG, f"{spec.name} requires {' and '.join(unmet)} "
                       f"({', '.join(f'{k}={v}' for k, v in sorted(names.items()))})")
    return None


def copy_bandwidth(backend: Backend, device: str, bandwidth_path: str | Path | None) -> float:
    """The measured copy bandwidth for this device: from the bandwidth rule's file when it
    was measured on the same device, else measured now."""
    if bandwidth_path and Path(bandwidth_path).is_file():
        recorded = json.loads(Path(bandwidth_path).read_text())
        if recorded.get("device") == device and recorded.get("backend") == backend.name:
            return float(recorded["copy_gbps"])
    return backend.copy_bandwidth_gbps()


def describe(inputs: CellInputs, layout: dict[str, str]) -> dict[str, Any]:
    cell, problem = inputs.cell, inputs.problem
    return {
        "experiment": cell.experiment, "kernel": cell.kernel, "variant": cell.variant, "spec_hash": cell.spec_hash,
        "backend": cell.backend, "layout": layout["input"], "precision": precision(inputs), "size": cell.size,
        **inputs.operands.describe(),
        "block": cell.tunables.get("block"),
        "flops": problem.flops, "bytes": problem.bytes_moved,
        "timing_mode": cell.timing["mode"],
    }


def finish(started: dict[str, Any], outcome: Outcome, result: Result | None = None,
           observers: Iterable[Observer] = ()) -> Measured:
    """What each observer saw, after the outcome; then the time the cell finished."""
    seen = [observer.columns(result) for observer in observers] if result else []
    parts = (started, {"status": outcome.status, "reason": outcome.reason}, *seen)
    return Measured(outcome, (*parts, {"finished_at": provenance.now_utc()}))


def run_steps(inputs: CellInputs, bandwidth_path: str | Path | None = None,
              backend: Backend | None = None) -> Measured:
    """Place -> set up -> launch -> time -> verify (the inputs are loaded), each a function of
    convlab.run.steps, unless the cell is refused before it touches the device; and what the observers
    saw of them."""
    cell = inputs.cell
    backend = backend or get_backend(cell.backend)
    layout = backend.layout_for(inputs.spec)
    started = describe(inputs, layout)
    started.update(started_at=provenance.now_utc(), **provenance.host_provenance(cell.backend))
    device = backend.device_info()
    started.update({k: v for k, v in device.items() if k in DEVICE_COLUMNS})
    refused = refusal(inputs, device["device"], bandwidth_path)
    if refused:
        return finish(started, refused)
    # The cell's own observers, after the stateless ones: in this order the telemetry stops after
    # the round trip's lap ends.
    observers = (*OBSERVERS, PhaseClock(), TimedWorkTelemetry())
    run = Run(backend, inputs)
    try:
        run.placed = observed("place", run, observers, lambda: place(backend, inputs, layout))
        run.prepared = observed("setup", run, observers, lambda: set_up(backend, inputs, run.placed))
        observed("launch", run, observers, lambda: launch(backend, run.prepared))
        timing = observed("timing", run, observers, lambda: time_kernel(backend, inputs, run.prepared))
        e2e_ms = observed("e2e", run, observers, lambda: round_trip(backend, inputs, run.placed, run.prepared, timing))
        # the round trip's last run started from a NaN-filled output: what it left is a fresh run's
        verified = observed("verify", run, observers, lambda: verify_output(backend, inputs, run.placed))
        copy_gbps = copy_bandwidth(backend, device["device"], bandwidth_path)
    except CellFailure as failure:
        # its setup's findings and stage times stay; a time or a verdict would be of a cell not run through
        failed = Outcome(failure.status, failure.reason[:2000])
        return finish({**started, **failure.columns}, failed, Result(inputs.problem, run.prepared), observers)
    result = Result(inputs.problem, run.prepared, Timed(timing, e2e_ms), verified, copy_gbps)
    return finish(started, Outcome(verified.status, verified.verdict.reason), result, observers)


def observed(step: str, run: Run, observers: Iterable[Observer], work: Callable[[], Produced]) -> Produced:
    """One step of the cell with its observers' hooks around it: before it, after it (under the
    step's guard), or, where it fails, each observer's abandon()."""
    try:
        for observer in observers:
            observer.before(step, run)
        produced = work()
        with run.backend.guard(step):
            for observer in observers:
                observer.after(step, run)
    except CellFailure:
        for observer in observers:
            observer.abandon()
        raise
    return produced


def measure_cell(inputs: CellInputs, bandwidth_path: str | Path | None = None,
                 backend: Backend | None = None) -> dict[str, Any]:
    """The cell's row, outside any cell job."""
    return run_steps(inputs, bandwidth_path, backend).row()


def run_cell(cell: Cell, image_path: str | Path | None = None, bandwidth_path: str | Path | None = None,
             backend: Backend | None = None) -> dict[str, Any]:
    """Load, then measure: the whole cell in one call."""
    return measure_cell(load_inputs(cell, image_path), bandwidth_path, backend)
