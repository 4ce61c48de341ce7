"""Replace a file in one step, with the permissions any other file of the user would get."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def current_umask() -> int:
    """The process's umask (reading it means setting it; it is set straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text_atomically(path: str | Path, text: str, durable: bool = True) -> None:
    """write_bytes_atomically() of the UTF-8 text."""
    write_bytes_atomically(path, text.encode("utf-8"), durable)


def write_bytes_atomically(path: str | Path, data: bytes, durable: bool = True) -> None:
    """Write beside ``path``, fsync (unless not ``durable``), then rename over it: a reader sees the
    old file or the new one, never half of one. mkstemp makes its file 0600; the result gets 0666
    less the umask, like a file opened with open(), so that colleagues on a shared file system can
    read it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), 0o666 & ~current_umask())
            if durable:
                os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
