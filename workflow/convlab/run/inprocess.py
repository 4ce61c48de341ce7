"""A cell job measured in its own process (CONVLAB_SERVICE=off): the same measure_job as a
service worker's, after a cold start (the backend's context opened here). For debugging, and to
compare with the service."""

from __future__ import annotations

from collections.abc import Mapping

from convlab.backends import get_backend
from convlab.measure.phases import PhaseClock
from convlab.run.celljob import CellJob, JobContext, measure_job, status_line


def measure_here(spec: str, out: str, image: str | None, bandwidth: str | None, phases: Mapping[str, float],
                 started_at: float) -> str:
    """Measure the cell and write its row; its status line. ``phases``: this process's before it
    (its start-up and imports), ``started_at``: the epoch second it started."""
    clock = PhaseClock()
    job = CellJob(spec=spec, out=out, image=image, bandwidth=bandwidth)
    cell = job.cell
    backend = get_backend(cell.backend)
    backend.open_context()
    clock.lap("context")
    row = measure_job(job, backend, JobContext({**phases, **clock.laps}, started_at))
    return status_line(row, cell.path)
