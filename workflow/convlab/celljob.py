"""One cell job, wherever it runs: in a measurement-service worker, or in the job's own process
(CONVLAB_SERVICE=off). Load the operands, take the device, measure, add the job's own timings
and write the row atomically. The measurement itself is convlab.runner's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from convlab.backends.base import Backend
from convlab.cell import Cell
from convlab.devicelock import exclusive_device
from convlab.measure.phases import PhaseClock
from convlab.row import write_row_atomically
from convlab.runner import load_inputs, measure_cell


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


def format_phases(phases: dict[str, float]) -> str:
    return ";".join(f"{name}={ms:.4g}" for name, ms in phases.items())


def status_line(row: dict[str, Any], path: str) -> str:
    """The one line a cell job prints: its path, status, time and reason."""
    return f"{path}: {row['status']} {row.get('kernel_ms') or ''} {row.get('reason') or ''}".rstrip()


def run_job(job: CellJob, backend: Backend, device_key: str, job_phases: dict[str, float],
            job_started: float, service_started: float | None = None,
            extra: dict[str, Any] | None = None, write_to: str | None = None,
            settle: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Measure ``job`` on ``backend`` and write its row (to ``write_to`` if given, else job.out).

    ``job_phases`` are the phases before this call (e.g. the client's start-up), ``job_started``
    the epoch second the job's process started, and ``service_started`` when a service worker
    took the cell (None in-process). ``extra`` columns (the commit, the GPU index) are set last.
    ``settle(row)`` runs after the measurement and before the row's times are taken: a worker
    checks the device and frees its memory there, so that the cell's time includes both.
    """
    cell = job.cell
    clock = PhaseClock()
    inputs = load_inputs(cell, job.image)
    clock.lap("load")
    with exclusive_device(device_key):
        clock.lap("lock_wait")
        row = measure_cell(inputs, job.bandwidth, backend)
        clock.lap("measure")  # itemised by measure_cell's own phases (place ... verify)
        if settle is not None:
            settle(row)
        clock.lap("settle")
    measured = row.pop("phase_ms", None) or ""
    row.update(extra or {})
    phases = {**job_phases, **{name: ms for name, ms in clock.laps.items() if name != "measure"}}
    row["phase_ms"] = format_phases(phases) + (";" + measured if measured else "")
    now = time.time()
    row["job_ms"] = (now - job_started) * 1e3
    if service_started is not None:
        row["service_ms"] = (now - service_started) * 1e3
    write_row_atomically(row, write_to or job.out)
    return row
