"""A cell job measured in its own process (CONVLAB_SERVICE=off): the same steps as a service
worker, with a cold start. For debugging, and to compare with the service."""

from __future__ import annotations

import sys

from convlab.measure.phases import PhaseClock


def measure_in_process(spec: str, out: str, image: str | None, bandwidth: str | None, started_at: float,
                       startup_ms: float) -> int:
    clock = PhaseClock()
    from convlab.backends import get_backend
    from convlab.run.celljob import CellJob, run_job, status_line

    clock.lap("imports")
    job = CellJob(spec=spec, out=out, image=image, bandwidth=bandwidth)
    try:
        cell = job.cell
    except (TypeError, ValueError) as error:
        print(f"error: not a valid cell: {type(error).__name__}: {error}", file=sys.stderr)
        return 2
    backend = get_backend(cell.backend)
    backend.open_context()
    clock.lap("context")
    row = run_job(job, backend, backend.device_key(), {"startup": startup_ms, **clock.laps}, started_at)
    print(status_line(row, cell.path))
    return 0
