"""A cell job measured in its own process (CONVLAB_SERVICE=off): the same measure_job as a
service worker's, after a cold start (the backend's context opened here). For debugging, and to
compare with the service."""

from __future__ import annotations

from collections.abc import Mapping

from convlab.backends import get_backend
from convlab.measure.phases import PhaseClock
from convlab.measure.rowjournal import keep_unrecorded
from convlab.run.celljob import CellJob, JobContext, measure_job, status_line


def measure_here(job_fields: Mapping[str, str | None], phases: Mapping[str, float], started_at: float,
                 run_id: str | None) -> str:
    """Measure the cell ``job_fields`` name (CellJob's) and write its row, kept under the run
    ``run_id`` until it is recorded; its status line. ``phases``: this process's before it (its
    start-up and imports), ``started_at``: the epoch second it started."""
    clock = PhaseClock()
    job = CellJob(**job_fields)
    cell = job.cell
    backend = get_backend(cell.backend)
    backend.open_context()
    clock.lap("context")
    row = measure_job(job, backend, JobContext({**phases, **clock.laps}, started_at))
    keep_unrecorded(job.out, run_id)
    return status_line(row, cell.path)
