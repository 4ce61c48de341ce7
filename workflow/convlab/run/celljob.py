"""One cell job, wherever it runs: in a measurement-service worker, or in the job's own process
(CONVLAB_SERVICE=off). Load the operands, take the device, measure, and write the row, built
with the job's own timings, atomically. The measurement itself is convlab.run.runner's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from convlab.backends.base import Backend
from convlab.backends.devicelock import exclusive_device
from convlab.measure.phases import PhaseClock
from convlab.measure.row import JobFacts, write_row_atomically
from convlab.plan.cell import Cell
from convlab.run.runner import run_steps
from convlab.run.steps import load_inputs


@dataclass(frozen=True)
class CellJob:
    """What a cell rule asks for: the cell, its picture, the copy-bandwidth file and the row's path."""

    spec: str
    out: str
    image: str | None = None
    bandwidth: str | None = None

    @property
    def cell(self) -> Cell:
        return Cell.from_json(self.spec)


def status_line(row: dict[str, Any], path: str) -> str:
    """The one line a cell job prints: its path, status, time and reason."""
    return f"{path}: {row['status']} {row.get('kernel_ms') or ''} {row.get('reason') or ''}".rstrip()


def run_job(job: CellJob, backend: Backend, device_key: str, job_phases: dict[str, float],
            job_started: float, service_started: float | None = None,
            extra: dict[str, Any] | None = None, write_to: str | None = None,
            settle: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Measure ``job`` on ``backend`` and write its row (to ``write_to`` if given, else job.out).

    ``job_phases`` are the phases before this call (e.g. the client's start-up), ``job_started``
    the epoch second the job's process started, and ``service_started`` when a service worker
    took the cell (None in-process). ``extra`` columns (the commit) take the place of the measured
    ones. ``settle(status)`` runs after the measurement and before the job's times are taken: a
    worker checks the device and frees its memory there, so that the cell's time includes both.
    """
    cell = job.cell
    clock = PhaseClock()
    inputs = load_inputs(cell, job.image)
    clock.lap("load")
    with exclusive_device(device_key):
        clock.lap("lock_wait")
        measured = run_steps(inputs, job.bandwidth, backend)
        clock.lap("measure")  # itemised by the cell's own phases (place ... verify)
        if settle is not None:
            settle(measured.outcome.status)
        clock.lap("settle")
    phases = {**job_phases, **{name: ms for name, ms in clock.laps.items() if name != "measure"}}
    now = time.time()
    service_ms = None if service_started is None else (now - service_started) * 1e3
    row = measured.row(JobFacts(phases, (now - job_started) * 1e3, service_ms, extra or {}))
    write_row_atomically(row, write_to or job.out)
    return row
