"""The job's side of a command that the measurement service runs: a cell goes to a device's worker
as a cell (the service writes its row), any other command as its command line and this
directory, to the pool of workers the table names. Standard library only: the job is a thin client.
"""

from __future__ import annotations

import argparse

from convlab.app.command import CELL, Command
from convlab.console import Console
from convlab.service.client import measure_through_service, run_through_service


def forward(command: Command, args: argparse.Namespace, argv: list[str], console: Console) -> int:
    """Have the service run ``command``: its exit status, its output relayed to ``console``."""
    if command.runs == CELL:
        return measure_through_service(args.spec, args.out, args.image, args.bandwidth, console)
    return run_through_service(argv, command.worker_pool(args), console)
