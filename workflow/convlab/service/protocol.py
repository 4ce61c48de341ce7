"""The client/service protocol: one JSON object each way, framed by a 4-byte length (standard library only).

Requests:
  {"op": "cell", ...}  -> one cell measured by a device's worker, its row written; its fields are
                          convlab.service.cellrequest's, the one module that names them
  {"op": "run", "argv": [...], "cwd": path, "pool": "tools"|"cuda"|"cpu", "timeout_s": number}
      -> any other command a rule runs (python -m convlab <argv>), in a warm worker:
         {"ok": true, "exit_code": int, "stdout": str, "stderr": str}
  {"op": "ping"}  -> who the service is, its workers
  {"op": "start", "pool": "cuda"|"cpu"|"tools"}  -> the pool's workers start (and warm up) now, as a
                     run that will measure begins; the answer does not wait for them
  {"op": "rest"}  -> the end of a run: its workers let go of what they keep for the next cell
                     (operands, pictures, pooled memory) and stay warm for the next run
  {"op": "stop"}  -> the service finishes the cells in flight and exits

Responses: {"ok": true, ...} or {"ok": false, "error": "<one line>"}. A cell request that asks for
a text reply is answered with the text "ok\n<status line>" or "error\n<one line>" instead (a
refusal before the request is read is JSON still): the cell job then needs no JSON decoder, whose
import is a good part of its start.
"""

from __future__ import annotations

import json
import socket
import struct

from convlab.service import cellrequest
from convlab.service.cellrequest import HEADER_BYTES, MAX_MESSAGE, read_exactly

TYPE_CHECKING = False  # typing's flag, without importing typing: a job's client imports this module
if TYPE_CHECKING:
    from typing import Any

HEADER = struct.Struct(">I")
# A cell request's fields (convlab.service.cellrequest names them) and the types taken for each
CELL_FIELDS = {"op": str, **{name: str if required else (str, type(None))
                             for name, (required, _, _) in cellrequest.OPTIONS.items()},
               cellrequest.TIMEOUT_S: (int, float), cellrequest.CLIENT: dict,
               **dict.fromkeys(cellrequest.RUN_FIELDS, str), cellrequest.REPLY: str}
REQUEST_FIELDS = {
    cellrequest.OP: CELL_FIELDS,
    "run": {"op": str, "argv": list, "cwd": str, "pool": str, "timeout_s": (int, float)},
    "ping": {"op": str},
    "start": {"op": str, "pool": str},
    "rest": {"op": str},
    "stop": {"op": str},
}
CELL_REQUIRED = {"op", cellrequest.CLIENT, *(name for name, (required, _, _) in cellrequest.OPTIONS.items() if required)}
REQUIRED = {cellrequest.OP: CELL_REQUIRED, "run": {"op", "argv", "cwd", "pool"}, "ping": {"op"},
            "start": {"op", "pool"}, "rest": {"op"}, "stop": {"op"}}
POOLS = ("cuda", "cpu", "tools")


class ProtocolError(ValueError):
    """A message that is not a valid request or response: answered with one line, never a crash."""


def send_message(sock: socket.socket, message: dict[str, Any]) -> None:
    send_frame(sock, json.dumps(message, separators=(",", ":")).encode())


def send_frame(sock: socket.socket, body: bytes) -> None:
    """One message's bytes, framed."""
    if len(body) > MAX_MESSAGE:
        raise ProtocolError(f"message of {len(body)} bytes exceeds the limit of {MAX_MESSAGE}")
    sock.sendall(HEADER.pack(len(body)) + body)


def text_reply(response: dict[str, Any]) -> bytes:
    """A cell's response as the text a "reply": "text" request gets."""
    if response.get("ok"):
        return f"ok\n{response['line']}".encode()
    return f"error\n{response.get('error')}".encode()


def receive_message(sock: socket.socket) -> dict[str, Any]:
    """One framed JSON object. ProtocolError for an oversize, undecodable or non-object message;
    ConnectionError when the peer goes away."""
    (length,) = HEADER.unpack(read_exactly(sock, HEADER_BYTES))
    if length > MAX_MESSAGE:
        raise ProtocolError(f"message of {length} bytes exceeds the limit of {MAX_MESSAGE}")
    try:
        message = json.loads(read_exactly(sock, length))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ProtocolError(f"not JSON: {error}") from error
    if not isinstance(message, dict):
        raise ProtocolError("a message must be a JSON object")
    return message


def check_request(message: dict[str, Any]) -> dict[str, Any]:
    """The request itself, or ProtocolError naming what is wrong with it."""
    op = message.get("op")
    if op not in REQUEST_FIELDS:
        raise ProtocolError(f"unknown op {op!r} (known: {', '.join(sorted(REQUEST_FIELDS))})")
    fields = REQUEST_FIELDS[op]
    unknown = sorted(set(message) - set(fields))
    if unknown:
        raise ProtocolError(f"unknown field(s) for {op}: {', '.join(unknown)}")
    missing = sorted(REQUIRED[op] - set(message))
    if missing:
        raise ProtocolError(f"missing field(s) for {op}: {', '.join(missing)}")
    for name, kinds in fields.items():
        if name in message and not isinstance(message[name], kinds):
            raise ProtocolError(f"field {name} has the wrong type ({type(message[name]).__name__})")
    if op == "run" and not all(isinstance(arg, str) for arg in message["argv"]):
        raise ProtocolError("argv holds strings only")
    if op in ("run", "start") and message["pool"] not in POOLS:
        raise ProtocolError(f"unknown pool {message['pool']!r} (known: {', '.join(POOLS)})")
    if op == cellrequest.OP:
        client = message[cellrequest.CLIENT]
        unknown = sorted(set(client) - set(cellrequest.CLIENT_FIELDS))
        if unknown:
            raise ProtocolError(f"unknown client field(s): {', '.join(unknown)}")
        if not all(isinstance(value, (int, float)) for value in client.values()):
            raise ProtocolError("client fields are numbers")
        if message.get(cellrequest.TIMEOUT_S, 1) <= 0:
            raise ProtocolError(f"{cellrequest.TIMEOUT_S} must be positive")
        reply = message.get(cellrequest.REPLY, cellrequest.JSON_REPLY)
        if reply not in cellrequest.REPLIES:
            raise ProtocolError(f"unknown reply {reply!r} (known: {', '.join(cellrequest.REPLIES)})")
    return message


def error_response(text: str) -> dict[str, Any]:
    return {"ok": False, "error": " ".join(text.split())}
