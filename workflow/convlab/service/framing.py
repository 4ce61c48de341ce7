"""The protocol's framing, with no imports: a 4-byte big-endian length, then the body. Both the
protocol (convlab.service.protocol) and the cell job's lean path (convlab.app.cellentry, which
imports no more than it must) read messages with it."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's flag, without importing typing
if TYPE_CHECKING:
    import _socket
    import socket

HEADER_BYTES = 4
MAX_MESSAGE = 1 << 20  # a cell spec is about 1 KiB


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
