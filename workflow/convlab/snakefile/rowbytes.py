"""Cell row files read once while a run starts: its checks each read every row (damaged rows, the
rows' settings and code, the pictures and kernel files they were measured with, the slices made
from them), so that each row after its first read is only a stat. Outside `reading_once()` every
read goes to the file.

A row is kept by its path with its inode, size and time: a row moved, removed, dated now or written
again since its first read is read again.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_Identity = tuple[int, int, int]


class RowBytes:
    def __init__(self) -> None:
        self._kept: dict[str, tuple[_Identity, bytes]] | None = None

    @contextmanager
    def reading_once(self) -> Iterator[None]:
        """Within it, each row file is read once (while it stays the same); what was kept is
        dropped at its end."""
        self._kept = {}
        try:
            yield
        finally:
            self._kept = None

    def read(self, path: str | Path) -> bytes:
        """The file's bytes; OSError as reading it raises (FileNotFoundError, IsADirectoryError)."""
        if self._kept is None:
            return Path(path).read_bytes()
        name = os.fspath(path)
        status = os.stat(name)
        identity = (status.st_ino, status.st_size, status.st_mtime_ns)
        kept = self._kept.get(name)
        if kept is not None and kept[0] == identity:
            return kept[1]
        data = Path(name).read_bytes()
        self._kept[name] = (identity, data)
        return data


ROW_BYTES = RowBytes()
