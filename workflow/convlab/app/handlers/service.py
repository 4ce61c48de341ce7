"""`cell` where it runs in the job's own process (CONVLAB_SERVICE=off; with the service on the job is
its thin client), and `serve`, the measurement service itself.

Standard library only at import: `serve` runs under ``python -S``.
"""

from __future__ import annotations

import argparse
import sys

from convlab.app.cellentry import send_cell
from convlab.app.commandtable import cell_options
from convlab.console import Console
from convlab.service import control

# What the service runs to start a worker (it appends --backend and --index): the service's worker
# with the command table's runner, which the service itself does not import.
WORKER_COMMAND = (sys.executable, "-m", "convlab.app.workerentry")


def cell(args: argparse.Namespace, console: Console) -> int:
    """One cell measured in this process, with a cold start: its status line once its row is written."""
    return send_cell(cell_options(args), console, in_this_process=True)


def serve(args: argparse.Namespace, console: Console) -> int:
    """The measurement service in the foreground (cell jobs start it by themselves), or --status / --stop."""
    if args.stop:
        return control.stop(console, quiet=args.quiet)
    if args.status:
        return control.status(console)
    return control.run(console, args.idle_timeout, WORKER_COMMAND, spawned=args.spawned)
