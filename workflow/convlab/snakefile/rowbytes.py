"""Cell row files read once while a run starts: its checks each read every row (damaged rows, the
rows' settings and code, the pictures and kernel files they were measured with, the slices made
from them), so that each row after its first read is only a stat. Outside `reading_once()` every
read goes to the file.

A row is kept by its path with its inode, size and time: a row moved, removed, dated now or written
again since its first read is read again. Its columns, where a check reads them by name, are split
once too.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_Identity = tuple[int, int, int]


def _columns(data: bytes) -> dict[str, str] | None:
    """The one row of a row file's bytes by column name, or None where they are not text of a
    header and one row."""
    try:
        records = list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))
    except (UnicodeDecodeError, csv.Error):
        return None
    return dict(zip(records[0], records[1])) if len(records) == 2 else None


class RowBytes:
    def __init__(self) -> None:
        self._kept: dict[str, tuple[_Identity, bytes]] | None = None
        self._columns: dict[str, tuple[_Identity, dict[str, str] | None]] = {}

    @contextmanager
    def reading_once(self) -> Iterator[None]:
        """Within it, each row file is read once (while it stays the same); what was kept is
        dropped at its end."""
        self._kept, self._columns = {}, {}
        try:
            yield
        finally:
            self._kept, self._columns = None, {}

    def read(self, path: str | Path) -> bytes:
        """The file's bytes; OSError as reading it raises (FileNotFoundError, IsADirectoryError)."""
        return self._read(os.fspath(path))[1]

    def columns(self, path: str | Path) -> dict[str, str] | None:
        """The row file's one row by column name; None where it is not a header and one row of
        text. OSError as reading it raises."""
        name = os.fspath(path)
        identity, data = self._read(name)
        if self._kept is None:
            return _columns(data)
        split = self._columns.get(name)
        if split is None or split[0] != identity:
            split = self._columns[name] = (identity, _columns(data))
        return split[1]

    def _read(self, name: str) -> tuple[_Identity | None, bytes]:
        if self._kept is None:
            return None, Path(name).read_bytes()
        status = os.stat(name)
        identity = (status.st_ino, status.st_size, status.st_mtime_ns)
        kept = self._kept.get(name)
        if kept is not None and kept[0] == identity:
            return kept
        data = Path(name).read_bytes()
        self._kept[name] = (identity, data)
        return identity, data


ROW_BYTES = RowBytes()
