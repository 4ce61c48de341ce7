"""A measurement service's worker process, as the command line starts it: the service's worker
(convlab.service.worker) with the command table's runner for the commands its jobs name, so that
the service itself imports nothing of the command line.

  python -m convlab.app.workerentry --backend cuda --index 0
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any

from convlab.app import TOOLS
from convlab.app.command import call, handler_of, in_directory
from convlab.app.commandtable import COMMANDS, parse
from convlab.console import Console
from convlab.service import worker


def run_command(argv: list[str], cwd: str) -> dict[str, Any]:
    """`python -m convlab <argv>` for a job in ``cwd``, in this process: its exit code and what it
    said, tracebacks included, as a fresh process would have shown them."""
    console = Console.collecting()
    try:
        command, args = parse(argv)
    except SystemExit as leaving:  # the job parsed this very line already: not expected
        code = leaving.code if isinstance(leaving.code, int) else 2
        console.warn(f"error: python -m convlab {' '.join(argv)}: not a command line this worker reads "
                     "(argparse's message is in the service log)")
    else:
        code = call(command, in_directory(command, args, cwd), console)
    out, err = console.said()
    return {"ok": True, "exit_code": int(code or 0), "stdout": out, "stderr": err}


def import_tools_handlers() -> None:
    """The handlers of every command a tools worker runs (pandas, seaborn, pyplot among their
    imports), imported while it waits for its first job: a worker started as the report stage
    begins then draws its first figure as fast as its next."""
    for command in COMMANDS.values():
        if command.runs == TOOLS:
            try:
                handler_of(command)
            except Exception as error:  # the job that runs it says what is wrong
                print(f"tools worker: {command.name}'s handler did not import ahead: {error}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    backend = argparse.ArgumentParser(add_help=False)
    backend.add_argument("--backend")
    if backend.parse_known_args(argv)[0].backend == TOOLS:
        threading.Thread(target=import_tools_handlers, name="imports", daemon=True).start()
    return worker.main(argv, run_command, prog="python -m convlab.app.workerentry")


if __name__ == "__main__":
    sys.exit(main())
