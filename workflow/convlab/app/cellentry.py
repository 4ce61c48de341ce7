"""The cell job's Python entry, and the one way in for a cell request in Python. The cell rule's
shell reads the cell client (convlab/service/cellclient.sh), which sends the cell to the door of the
service the run named, where there is one, and otherwise starts this entry with the same line:

  python -S -c 'from convlab.app.cellentry import run; run()' cell --spec … [--image …] --bandwidth … --out …

(`-c`, not `-m convlab`: runpy's own imports cost as much as the request), so its line is parsed
here, by the cell request's options (convlab.service.cellrequest), never by the command table. The
shell's request is the one build() makes here, field for field (a test holds them equal).

Every caller of a cell in Python (this entry, the whole command line, the `cell` handler) hands
send_cell() the line's options; it builds the request once and picks its route, here and nowhere
else: this process, where the command runs here (CONVLAB_SERVICE=off, or a command line told to run
every command here); the socket the run named for this process (convlab.service.runsocket), written
without the json module and answered as text, so that the job imports the socket's C module and
nothing else; else, and after whatever that socket or the door met, the retrying client
(convlab.service.client), which finds or starts the service, sends once more, or writes the
job's own error row.

`python -m convlab` starts here too (convlab.__main__): a tools worker's line (convlab.app.PLACES)
goes to the service the run named as its command line and directory. Any other line, any line the
service did not take, and CONVLAB_SERVICE=off go to the whole command line (convlab.app.cli).
"""

from __future__ import annotations

import os
import sys
import time

from convlab.app import CELL, TOOLS, place_of
from convlab.service import cellrequest
from convlab.service.cellrequest import exchange, json_text
from convlab.service.jobenv import RUN_ID_ENV, door_failure, service_on
from convlab.service.runsocket import run_socket

TYPE_CHECKING = False  # typing's flag, without importing typing
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from convlab.console import Console

HELP = frozenset({"-h", "--help"})


def parse(argv: list[str]) -> dict[str, str] | None:
    """``argv`` (what follows `python -m convlab`) as {option name: value} when it is a cell line as
    the rule writes it: the cell command, then options of the cell request, each once, as
    ``--flag value``, the required ones all there. None for any other line, which the command
    table's parser reads."""
    if not argv or place_of(argv[0]) != CELL or len(argv) % 2 == 0:
        return None
    options: dict[str, str] = {}
    for flag, value in zip(argv[1::2], argv[2::2]):
        name = flag[2:] if flag.startswith("--") else None
        # a value that starts with "-" is a flag to argparse: its parser says what it makes of it
        if name not in cellrequest.OPTIONS or name in options or value.startswith("-"):
            return None
        options[name] = value
    for name, (required, _, _) in cellrequest.OPTIONS.items():
        if required and name not in options:
            return None
    return options


def send_cell(options: Mapping[str, str | None], console: Console | None = None, in_this_process: bool = False) -> int:
    """The cell a cell line's ``options`` (by name) ask for, measured and its row written: the job's
    exit status, with its status line, or one error line (status 2) where the cell could not be
    asked for. ``console``: where the lines go (None: this process's own streams).
    ``in_this_process``: measure it here, not in the service."""
    request = cellrequest.build(options)
    # where the job's shell sent the cell to the door and met no answer, the retrying client goes on
    failed = door_failure()
    path = None if in_this_process or failed else run_socket(sys.executable)
    spec = request[cellrequest.SPEC]
    if path is not None and spec.startswith("{") and spec.endswith("}"):  # else the retrying client says what is wrong
        answer = through_run_socket(request, path)
        if isinstance(answer, tuple):
            status, line = answer
            if console is None:
                (sys.stderr if status else sys.stdout).write(f"{line}\n")
            else:
                (console.warn if status else console.say)(line)
            return status
        failed = answer
    # here, not at the top: the run's socket, which nearly every cell job takes, needs none of these
    # (a console; NumPy and the backends here, or JSON and the service's identity in the client)
    from convlab.console import Console

    console = console or Console()
    if in_this_process:
        return measure_here(request, console)
    from convlab.service.client import measure_through_service

    return measure_through_service(request, console, failed)


def through_run_socket(request: dict[str, Any], path: str) -> tuple[int, str] | OSError | None:
    """The cell sent to the socket the run named, its answer read as text: the job's exit status and
    its line. Otherwise what the sending met (None: nothing was sent), and the retrying client
    sends the cell itself."""
    try:
        body = json_text(cellrequest.message(request, reply=cellrequest.TEXT_REPLY)).encode()
    except (ValueError, UnicodeEncodeError):  # a path the full client's encoder escapes instead
        return None
    answer = exchange(path, body, cellrequest.answer_timeout_s(request))
    if answer is None or isinstance(answer, OSError):
        return answer
    if answer.startswith(b"{"):  # a refusal before the request was read: JSON, as to any client
        import json  # here, not at the top: a cell job reads a text answer

        return 2, f"error: {json.loads(answer).get('error')}"
    kind, _, text = answer.decode(errors="replace").partition("\n")
    return (0, text) if kind == "ok" else (2, f"error: {text}")


def measure_here(request: dict[str, Any], console: Console) -> int:
    """The cell measured in this process, with a cold start: its status line once its row is written."""
    startup_ms, started_at = cellrequest.job_start_of(request)
    importing = time.perf_counter()
    # here, not at the top: NumPy, the backends and the kernels' code, which a thin client never
    # imports; their time is the row's `imports` phase
    from convlab.run import inprocess

    phases = {"startup": startup_ms, "imports": (time.perf_counter() - importing) * 1e3}
    console.say(inprocess.measure_here(cellrequest.job_fields(request), phases, started_at,
                                       os.environ.get(RUN_ID_ENV)))
    return 0


def send_to_tools(argv: list[str]) -> int | None:
    """A tools worker's command line ``argv`` sent to the service the run named, for this directory,
    and what the worker said relayed: the job's exit status. None where the whole command line runs
    it instead (which finds the service, starts one, or sends the line once more): no service named
    for this process, none answering there, or the service going away before it answered."""
    path = run_socket(sys.executable)
    if path is None:
        return None
    try:
        words = ",".join(map(json_text, argv))
        body = (f'{{"op":"run","argv":[{words}],"cwd":{json_text(os.getcwd())},'
                f'"pool":{json_text(TOOLS)}}}').encode()
    except UnicodeEncodeError:  # a line the full client's encoder escapes instead
        return None
    answer = exchange(path, body, None)  # a command takes as long as it takes, as in the full client
    if answer is None or isinstance(answer, OSError):
        return None
    import json  # here, not at the top: a cell job reads a text answer

    try:
        reply = json.loads(answer)
    except ValueError:
        return None
    if not reply.get("ok"):
        sys.stderr.write(f"error: {reply.get('error')}\n")
        return 2
    sys.stdout.write(reply.get("stdout", ""))
    sys.stderr.write(reply.get("stderr", ""))
    return int(reply.get("exit_code", 1))


def main(argv: list[str]) -> int | None:
    """Send the cell line ``argv`` (or a tools worker's line) to the measurement service: the job's
    exit status. None where the whole command line runs ``argv`` instead: any other line, a tools
    line the service the run named did not answer, or CONVLAB_SERVICE=off."""
    if not service_on():
        return None
    options = parse(argv)
    if options is not None:
        return send_cell(options)
    if argv and place_of(argv[0]) == TOOLS and not HELP.intersection(argv):
        return send_to_tools(argv)
    return None


def run() -> None:
    """The cell rule's start: its line follows `-c`."""
    status = main(sys.argv[1:])
    if status is None:
        # the whole command line, started afresh as `python -m convlab` with site-packages, which a
        # cell measured in this process needs (the command line would start again for them itself).
        # This entry never imports the command line: the command line sends its cells by send_cell.
        os.execv(sys.executable, [sys.executable, "-m", "convlab", *sys.argv[1:]])
    # the job has said all it says: leave without the interpreter's teardown, which Snakemake's
    # next job would wait for
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
