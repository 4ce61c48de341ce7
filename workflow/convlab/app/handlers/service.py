"""`cell` measured in the job's own process (CONVLAB_SERVICE=off; with the service on the job is its
thin client: convlab.app.cellentry), and `serve`, the measurement service itself.

Standard library only at import: `serve` runs under ``python -S``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from convlab.console import Console
from convlab.measure.phases import PhaseClock
from convlab.measure.rowjournal import keep_unrecorded
from convlab.service import control
from convlab.service.jobenv import RUN_ID_ENV, job_start

# Measuring here needs NumPy, the backends and the kernels' code, which the thin client never
# imports: they are imported when this path is taken, and their time is the row's `imports` phase.
IN_PROCESS = "convlab.run.inprocess"
# What the service runs to start a worker (it appends --backend and --index): the service's worker
# with the command table's runner, which the service itself does not import.
WORKER_COMMAND = (sys.executable, "-m", "convlab.app.workerentry")


def cell(args: argparse.Namespace, console: Console) -> int:
    """One cell measured in this process, with a cold start: its status line once its row is written."""
    startup_ms, started_at = job_start()
    clock = PhaseClock()
    in_process = importlib.import_module(IN_PROCESS)
    clock.lap("imports")
    console.say(in_process.measure_here(args.spec, args.out, args.image, args.bandwidth,
                                        {"startup": startup_ms, **clock.laps}, started_at))
    keep_unrecorded(args.out, os.environ.get(RUN_ID_ENV))
    return 0


def serve(args: argparse.Namespace, console: Console) -> int:
    """The measurement service in the foreground (cell jobs start it by themselves), or --status / --stop."""
    if args.stop:
        return control.stop(console, quiet=args.quiet)
    if args.status:
        return control.status(console)
    return control.run(console, args.idle_timeout, WORKER_COMMAND, spawned=args.spawned)
