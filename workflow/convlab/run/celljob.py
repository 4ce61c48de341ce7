"""One cell job, wherever it runs: in a measurement-service worker, or in the job's own process
(CONVLAB_SERVICE=off). Both call measure_job: load the operands, take the device, measure, and
write the row, built with the job's own timings, atomically. What differs between the two (the
phases before the cell, the worker's settling and pending file, the commit) is the JobContext
they pass. The measurement itself is convlab.run.runner's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from convlab.backends.base import Backend
from convlab.backends.devicelock import exclusive_device
from convlab.measure.phases import PhaseClock
from convlab.measure.row import JobFacts, write_row_atomically
from convlab.plan.cell import Cell
from convlab.run.runner import run_steps
from convlab.run.steps import load_inputs
from convlab.status import UserError


class InvalidCell(UserError):
    """The job's spec is not a cell (not JSON, a missing or unknown field): one line, no row."""


@dataclass(frozen=True)
class CellJob:
    """What a cell rule asks for: the cell, its picture, the copy-bandwidth file and the row's path."""

    spec: str
    out: str
    image: str | None = None
    bandwidth: str | None = None

    @property
    def cell(self) -> Cell:
        try:
            return Cell.from_json(self.spec)
        except (TypeError, ValueError, KeyError) as error:
            raise InvalidCell(f"not a valid cell: {type(error).__name__}: {error}") from None


@dataclass(frozen=True)
class JobContext:
    """Where the job runs, as its row needs it.

    ``phases``: the job's phases before measure_job (ms; the client's start-up, connection and
    queue, or this process's imports and device context). ``started_at``: the epoch second the job's
    process started. ``service_started``: when a service worker took the cell (None in the job's own
    process). ``extra``: columns that take the place of measured ones (the commit the service read).
    ``write_to``: where the row goes instead of the job's own path (a worker's pending file).
    ``settle(status)``: runs after the measurement, before the job's times are taken: a worker
    checks the device and frees its memory there, so that the cell's time includes both.
    """

    phases: Mapping[str, float]
    started_at: float
    service_started: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    write_to: str | None = None
    settle: Callable[[str], None] | None = None


def status_line(row: dict[str, Any], path: str) -> str:
    """The one line a cell job prints: its path, status, time and reason."""
    return f"{path}: {row['status']} {row.get('kernel_ms') or ''} {row.get('reason') or ''}".rstrip()


def measure_job(job: CellJob, backend: Backend, context: JobContext) -> dict[str, Any]:
    """Measure ``job``'s cell on ``backend`` (its context open) and write its row; the row.

    InvalidCell for a spec that is not a cell, another UserError for input the cell cannot use (a
    missing picture): no row is written. Any other exception is a bug of the pipeline.
    """
    clock = PhaseClock()
    inputs = load_inputs(job.cell, job.image)
    clock.lap("load")
    with exclusive_device(backend.device_key()):
        clock.lap("lock_wait")
        measured = run_steps(inputs, job.bandwidth, backend)
        clock.lap("measure")  # itemised by the cell's own phases (place ... verify)
        if context.settle is not None:
            context.settle(measured.outcome.status)
        clock.lap("settle")
    phases = {**context.phases, **{name: ms for name, ms in clock.laps.items() if name != "measure"}}
    now = time.time()
    service_ms = None if context.service_started is None else (now - context.service_started) * 1e3
    row = measured.row(JobFacts(phases, (now - context.started_at) * 1e3, service_ms, context.extra))
    write_row_atomically(row, context.write_to or job.out)
    return row
