"""A cell request, as a job writes and sends it: its fields are named in this module and nowhere
else, and build() makes it once, whichever route then carries it (convlab.app.cellentry.send_cell).

The cell line (`cell --spec … [--image …] [--bandwidth …] --out …`, as the cell rule writes it)
gives the request's first fields: OPTIONS names them, the command table builds the `cell`
command's arguments from them and the job's thin entry parses its line by them. The protocol
(convlab.service.protocol) checks a request by these names; a worker, or a job measuring in its
own process, reads the cell back with job_fields().

Every message between a job and the service travels in one frame, a 4-byte big-endian length then
the body, read here (read_exactly) for the protocol as well. A job that imports no more than it
must writes its request without the json module (json_text) and sends it over the socket's C
module alone (exchange): every cell job imports this module, which imports nothing else but the
job's environment (convlab.service.jobenv).
"""

from __future__ import annotations

import _socket
import os
import time

from convlab.service.jobenv import ANSWER_GRACE_S, cell_timeout_s, job_start, run_fields

TYPE_CHECKING = False  # typing's flag, without importing typing
if TYPE_CHECKING:
    import socket
    from collections.abc import Mapping
    from typing import Any

HEADER_BYTES = 4
MAX_MESSAGE = 1 << 20  # a cell spec is about 1 KiB
# JSON's escapes for a string: the control characters, the quote and the backslash
JSON_ESCAPES = {**dict(zip(range(0x20), map("\\u{:04x}".format, range(0x20)))), ord('"'): '\\"', ord("\\"): "\\\\"}

OP = "cell"
SPEC, IMAGE, BANDWIDTH, OUT = "spec", "image", "bandwidth", "out"
TIMEOUT_S, CLIENT, REPLY = "timeout_s", "client", "reply"
# what convlab.service.jobenv.run_fields() adds: the commit the run read, and the run's id
RUN_FIELDS = ("git_commit", "run_id")
# the job's process: its id, the epoch second it started, its start-up (ms), the epoch second it sent
CLIENT_FIELDS = ("pid", "started_at", "startup_ms", "sent_at")
# How the service answers: JSON, or the text "ok"/"error", then one line, which a job reads without
# a JSON decoder (a refusal before the request is read is JSON still).
JSON_REPLY, TEXT_REPLY = "json", "text"
REPLIES = (JSON_REPLY, TEXT_REPLY)


# The cell line's options, each a field of the request (its flag is --name): whether a line must
# give it, whether it names a file (the request carries it absolute, so that the service finds it
# from its own directory), and its help. Plain data, since every cell job imports it: a class or a
# comprehension here would add to each job's start.
OPTIONS = {
    SPEC: (True, False, "the cell as JSON"),
    IMAGE: (False, True, "the picture the cell reads (families on random data have none)"),
    BANDWIDTH: (False, True, None),
    OUT: (True, True, None),
}


def build(options: Mapping[str, str | None]) -> dict[str, Any]:
    """The request for a cell line's ``options`` (by name; one not given may be absent or None), as
    this job asks for it: files made absolute, the cell's timeout, the run's fields, and when this
    process started."""
    startup_ms, started_at = job_start()
    request: dict[str, Any] = {"op": OP}
    for name, (_, path, _) in OPTIONS.items():
        value = options.get(name)
        request[name] = (os.path.abspath(value) if value else None) if path else value
    request[TIMEOUT_S] = cell_timeout_s()
    request.update(run_fields())
    request[CLIENT] = {"pid": os.getpid(), "started_at": started_at, "startup_ms": startup_ms}
    return request


def message(request: Mapping[str, Any], reply: str = JSON_REPLY) -> dict[str, Any]:
    """``request`` as it is sent now: the moment it leaves among its client's fields, and the answer
    asked for as ``reply`` (JSON, the protocol's default, unless said)."""
    sent = {**request, CLIENT: {**request[CLIENT], "sent_at": time.time()}}
    if reply != JSON_REPLY:
        sent[REPLY] = reply
    return sent


def answer_timeout_s(request: Mapping[str, Any]) -> float:
    """How long the job waits for its answer: the cell's timeout, and the moment the service needs
    to kill a hung worker and write its row."""
    return request[TIMEOUT_S] + ANSWER_GRACE_S


def job_start_of(request: Mapping[str, Any]) -> tuple[float, float]:
    """(its start-up in ms, the epoch second it started) of the job that asks."""
    client = request[CLIENT]
    return client["startup_ms"], client["started_at"]


def job_fields(request: Mapping[str, Any]) -> dict[str, str | None]:
    """The cell line's options as ``request`` carries them, by name: a cell job's fields
    (convlab.run.celljob.CellJob)."""
    return dict(zip(OPTIONS, map(request.get, OPTIONS)))


def read_exactly(sock: socket.socket | _socket.socket, count: int) -> bytes:
    """``count`` bytes from ``sock``; ConnectionError when the peer goes away first."""
    chunks, remaining = [], count
    while remaining:
        chunk = sock.recv(min(remaining, 1 << 16))
        if not chunk:
            raise ConnectionError("connection closed mid-message")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


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
        members = []  # a loop, not a generator: one code object fewer for every cell job to load
        for key, item in value.items():
            members.append(f"{json_text(str(key))}:{json_text(item)}")
        return "{" + ",".join(members) + "}"
    raise ValueError(f"{type(value).__name__} is not written here")


def exchange(path: str, body: bytes, timeout_s: float | None) -> bytes | OSError | None:
    """The answer to ``body`` from the service at ``path``; None where none answers there (nothing
    was sent); the error met once the request was on its way."""
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
