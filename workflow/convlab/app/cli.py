"""Command line: the entry points Snakemake calls, and running one cell by hand.

  python -m convlab run --kernel direct --size 1024 --stride 2 --block 16

The commands, their arguments and where each runs are the command table's
(convlab.app.commandtable); this module parses, hands a command to the measurement service where the
table says a worker runs it, and otherwise calls its handler here.
"""

from __future__ import annotations

import os
import sys

from convlab.app import JOB
from convlab.app.command import call
from convlab.app.commandtable import parse
from convlab.app.forward import forward as forward_to_service
from convlab.console import Console
from convlab.service.jobenv import service_on


def main(argv: list[str] | None = None, forward: bool = True) -> int:
    """Run one command. ``forward``: hand the commands a worker runs to the measurement service
    (unless CONVLAB_SERVICE=off); with forward=False every command runs in this process.

    Rules start ``python -S``: a thin client needs only the standard library, and skipping
    site-packages saves most of the interpreter's start on environments with many packages.
    A command that runs here instead starts again with them."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command, args = parse(argv)
    forwarded = forward and command.runs != JOB and service_on()
    if sys.flags.no_site and not (forwarded or command.standard_library):
        os.execv(sys.executable, [sys.executable, "-m", "convlab", *argv])
    console = Console()
    if forwarded:
        return forward_to_service(command, args, argv, console)
    return call(command, args, console)
