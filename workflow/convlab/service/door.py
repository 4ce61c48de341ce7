"""The service's door for cell jobs that start no Python: a TCP port on the loopback address and a
secret, written beside the socket in the user's own runtime folder (standard library only).

A cell job's shell sends its cell itself (convlab/service/cellclient.sh): bash can open a TCP
connection (/dev/tcp) but not a Unix socket, so the door is a loopback port. What the socket's
peer check (the peer's uid) does there, the secret does here: only a process that can read the door
file, which only the user can (a 0600 file in a 0700 folder), can say it, and each service makes
its own. The exchange is lines, which bash reads and writes with its builtins:

  job:     <secret>\\n<the cell request as JSON on one line>\\n
  service: ok\\n<status line>\\n   or   error\\n<one line>\\n   or   refused\\n<why>\\n

"refused" says the request was not taken (a wrong secret, a malformed line): the job then sends
it by the Python client, which says what is wrong. A connection closed without a word is a
service gone mid-cell.
"""

from __future__ import annotations

import hmac
import os
import secrets
import socket
from typing import Any

from convlab.service.cellrequest import MAX_MESSAGE

# the script a cell job's shell reads, relative to the package's parent (workflow/)
CELL_CLIENT = "convlab/service/cellclient.sh"
DOOR_SUFFIX = ".door"
LOOPBACK = "127.0.0.1"
REFUSED = "refused"


class DoorRefused(ValueError):
    """A door request that is not taken: the text says why, and the job sends it another way."""


def door_path(socket_path: str) -> str:
    """The door file of the service whose socket is ``socket_path``."""
    stem = socket_path[: -len(".sock")] if socket_path.endswith(".sock") else socket_path
    return stem + DOOR_SUFFIX


def open_door(socket_path: str) -> tuple[socket.socket, str]:
    """A listening loopback port and its new secret, written to the door file ("port secret")."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.bind((LOOPBACK, 0))
        listener.listen(128)
        secret = secrets.token_hex(16)
        path = door_path(socket_path)
        temporary = f"{path}.{os.getpid()}.tmp"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(f"{listener.getsockname()[1]} {secret}\n")
        os.replace(temporary, path)
    except BaseException:
        listener.close()
        raise
    return listener, secret


def remove_door_file(socket_path: str, port: int) -> None:
    """The door file removed where it still names ``port`` (a newer service may have written its own)."""
    path = door_path(socket_path)
    try:
        with open(path) as handle:
            named = handle.read().split(" ", 1)[0]
        if named == str(port):
            os.unlink(path)
    except OSError:
        pass


def read_door_request(connection: socket.socket, secret: str) -> bytes:
    """The request's JSON text, once the secret is right; DoorRefused otherwise, ConnectionError at
    an early end. The job sends nothing after its two lines, so they are read in chunks."""
    received = bytearray()
    while received.count(b"\n") < 2:
        if len(received) > MAX_MESSAGE + 256:
            raise DoorRefused(f"a request longer than {MAX_MESSAGE} bytes")
        chunk = connection.recv(1 << 16)
        if not chunk:
            raise ConnectionError("connection closed mid-request")
        received += chunk
    said, request, rest = bytes(received).split(b"\n", 2)
    if not hmac.compare_digest(said, secret.encode()):
        raise DoorRefused("not this service's secret")
    if rest:
        raise DoorRefused("bytes after the request")
    return request


def door_reply(response: dict[str, Any]) -> bytes:
    """A cell's response as the job's shell reads it: two lines."""
    if response.get("ok"):
        return _lines("ok", str(response["line"]))
    return _lines("error", str(response.get("error")))


def door_refusal(why: str) -> bytes:
    """A request not taken, as the job's shell reads it: it then sends the cell another way."""
    return _lines(REFUSED, why)


def _lines(kind: str, line: str) -> bytes:
    return f"{kind}\n{' '.join(line.split())}\n".encode()
