"""The job's side of a command that the measurement service runs: a cell goes by the one way in for
a cell request (convlab.app.cellentry.send_cell), any other command as its command line and this
directory, to the pool of workers the table names. Standard library only: the job is a thin client.
"""

from __future__ import annotations

import argparse

from convlab.app import CELL
from convlab.app.cellentry import send_cell
from convlab.app.command import Command
from convlab.app.commandtable import cell_options
from convlab.console import Console
from convlab.service.client import run_through_service


def forward(command: Command, args: argparse.Namespace, argv: list[str], console: Console) -> int:
    """Have the service run ``command``: its exit status, its output relayed to ``console``."""
    if command.runs == CELL:
        return send_cell(cell_options(args), console)
    return run_through_service(argv, command.worker_pool(args), console)
