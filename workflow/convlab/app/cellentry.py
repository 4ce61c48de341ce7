"""The cell job's own entry. The cell rule starts it hundreds of times a run, as

  python -S -c 'from convlab.app.cellentry import run; run()' cell --spec … [--image …] --bandwidth … --out …

(`-c`, not `-m convlab`: runpy's own imports cost as much as the request), and the job only sends
that cell to the measurement service. So its line is parsed here, never by the command table,
which imports argparse and every command's choices.

Its first path is lean. Where the run named its service for this process
(convlab.service.runsocket), the request is written here and goes straight to that socket,
and the service answers in text: the job imports only the interpreter's own modules and the
socket's C module. Everything else goes to the full client (convlab.service.client), which
finds the service by its identity, starts one, sends a cell the service dropped once more, or
writes the error row, as it always has: no socket named for this process, none answering there,
the service going away or not answering, a refusal in JSON.

`python -m convlab` starts here too (convlab.__main__): a report or data job's line (a command that
a tools worker runs) goes straight to the service the run named as well, as its command line and
directory, and what the worker said comes back. Any other line (another command, --help), any such
line where no service was named for this process or it did not answer, and CONVLAB_SERVICE=off go
to the whole command line (convlab.app.cli), which parses them with the command table as always.
"""

from __future__ import annotations

import _socket
import os
import sys
import time

from convlab.service.framing import HEADER_BYTES, MAX_MESSAGE, read_exactly
from convlab.service.jobenv import (
    ANSWER_GRACE_S,
    cell_timeout_s,
    job_start,
    run_fields,
    service_on,
)
from convlab.service.runsocket import run_socket

# The command this entry sends, and its options as the command table's entry of that name gives
# them (a test holds both): each flag, and whether a cell line must give it.
COMMAND = "cell"
OPTIONS = {"--spec": True, "--image": False, "--bandwidth": False, "--out": True}
# The commands the service's tools workers run, as the command table marks them (a test holds both):
# a run's report and data jobs, sent as their line, without the command table, argparse and the full
# client, whose imports took a small report job longer than its own work.
TOOLS_POOL = "tools"
TOOLS_COMMANDS = frozenset({"aggregate", "counters-report", "downscale", "figures", "findings", "gpus", "history-page",
                            "record", "roofline", "seed-compare", "seed-figure", "seed-table", "source"})
HELP = frozenset({"-h", "--help"})
# JSON's escapes for a string: the quote, the backslash and the control characters
JSON_ESCAPES = {**{code: f"\\u{code:04x}" for code in range(0x20)}, ord('"'): '\\"', ord("\\"): "\\\\"}


def parse(argv: list[str]) -> dict[str, str] | None:
    """``argv`` (what follows `python -m convlab`) as {flag: value} when it is a cell line as the
    rule writes it: `cell`, then options of OPTIONS, each once, as ``--flag value``, the required
    ones all there. None for any other line, which the command table's parser reads."""
    if argv[:1] != [COMMAND] or len(argv) % 2 == 0:
        return None
    options: dict[str, str] = {}
    for flag, value in zip(argv[1::2], argv[2::2]):
        # a value that starts with "-" is a flag to argparse: its parser says what it makes of it
        if flag not in OPTIONS or flag in options or value.startswith("-"):
            return None
        options[flag] = value
    if not all(flag in options for flag, required in OPTIONS.items() if required):
        return None
    return options


def json_text(value: object) -> str:
    """``value`` (None, a string, a finite number, or a dict of them) as JSON text; ValueError for
    anything else."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return '"' + value.translate(JSON_ESCAPES) + '"'
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        text = repr(value)  # a finite number's repr is a JSON number
        if text in ("inf", "-inf", "nan"):
            raise ValueError(f"{text} is not a JSON number")
        return text
    if isinstance(value, dict):
        return "{" + ",".join(f"{json_text(str(key))}:{json_text(item)}" for key, item in value.items()) + "}"
    raise ValueError(f"{type(value).__name__} is not written here")


def _exchange(path: str, body: bytes, timeout_s: float | None) -> bytes | OSError | None:
    """The service's answer to ``body``; None where no service answers at ``path`` (nothing was
    sent); the error met once the request was on its way."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        try:
            sock.connect(path)
        except OSError:
            return None
        sock.settimeout(timeout_s)
        try:
            sock.sendall(len(body).to_bytes(HEADER_BYTES, "big") + body)
            length = int.from_bytes(read_exactly(sock, HEADER_BYTES), "big")
            if length > MAX_MESSAGE:
                return ConnectionError(f"message of {length} bytes exceeds the limit of {MAX_MESSAGE}")
            return read_exactly(sock, length)
        except OSError as error:  # TimeoutError and ConnectionError among them
            return error
    finally:
        sock.close()


def send_to_run_service(options: dict[str, str]) -> int:
    """The cell job's lean path: its exit status, from the service the run named or else from the
    full client."""
    startup_ms, started_at = job_start()
    path, spec = run_socket(sys.executable), options["--spec"]
    if path is None or not (spec.startswith("{") and spec.endswith("}")):
        return full_client(options)
    timeout_s = cell_timeout_s()
    request = {"op": "cell", "spec": spec, "timeout_s": timeout_s, "reply": "text"}
    for name in ("image", "bandwidth", "out"):
        value = options.get(f"--{name}")
        request[name] = os.path.abspath(value) if value else None
    request.update(run_fields())
    request["client"] = {"pid": os.getpid(), "started_at": started_at, "startup_ms": startup_ms,
                         "sent_at": time.time()}
    try:
        body = json_text(request).encode()
    except (ValueError, UnicodeEncodeError):  # a path the full client's encoder escapes instead
        return full_client(options)
    answer = _exchange(path, body, timeout_s + ANSWER_GRACE_S)
    if answer is None or isinstance(answer, OSError):
        return full_client(options, answer)
    if answer.startswith(b"{"):  # a refusal before the request was read
        return full_client(options, ConnectionError("the service refused the request"), refusal=answer)
    kind, _, text = answer.decode(errors="replace").partition("\n")
    if kind != "ok":
        sys.stderr.write(f"error: {text}\n")
        return 2
    sys.stdout.write(f"{text}\n")
    return 0


def full_client(options: dict[str, str], failed: OSError | None = None, refusal: bytes | None = None) -> int:
    """The cell sent by the full client, after what the lean path met (``failed``), or the JSON
    ``refusal`` the service answered with, said as the full client says it."""
    # here, not at the top: the lean path is what nearly every cell job takes
    from convlab.console import Console
    from convlab.service.client import measure_through_service

    if refusal is not None:
        import json

        sys.stderr.write(f"error: {json.loads(refusal).get('error')}\n")
        return 2
    return measure_through_service(options["--spec"], options["--out"], options.get("--image"),
                                   options.get("--bandwidth"), Console(), failed)


def send_to_tools(argv: list[str]) -> int | None:
    """A tools worker's command line ``argv`` sent to the service the run named, for this directory,
    and what the worker said relayed: the job's exit status. None where the whole command line runs
    it instead (which finds the service, starts one, or sends the line once more): no service named
    for this process, none answering there, or the service going away before it answered."""
    path = run_socket(sys.executable)
    if path is None:
        return None
    try:
        words = ",".join(json_text(word) for word in argv)
        body = (f'{{"op":"run","argv":[{words}],"cwd":{json_text(os.getcwd())},'
                f'"pool":{json_text(TOOLS_POOL)}}}').encode()
    except UnicodeEncodeError:  # a line the full client's encoder escapes instead
        return None
    answer = _exchange(path, body, None)  # a command takes as long as it takes, as in the full client
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
        return send_to_run_service(options)
    if argv[:1] and argv[0] in TOOLS_COMMANDS and not HELP.intersection(argv):
        return send_to_tools(argv)
    return None


def run() -> None:
    """The cell rule's start: its line follows `-c`."""
    status = main(sys.argv[1:])
    if status is None:
        from convlab.app.cli import main as whole_command_line

        sys.exit(whole_command_line(sys.argv[1:]))
    # the job has said all it says: leave without the interpreter's teardown, which Snakemake's
    # next job would wait for
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
