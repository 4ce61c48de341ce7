"""Which of some files were saved since the last look, told by their contents (never by their
times: an editor that restores a file's time, or two saves within one tick of the clock, still
count). Standard library only."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


def read_all(paths: Iterable[Path]) -> dict[Path, bytes | None]:
    """Each file's bytes (None for one that is missing or cannot be read: a save in progress)."""
    contents: dict[Path, bytes | None] = {}
    for path in paths:
        try:
            contents[path] = path.read_bytes()
        except OSError:
            contents[path] = None
    return contents


class SavedFiles:
    """Files watched by content: ``saved()`` names those whose bytes changed since it last looked."""

    def __init__(self, paths: Iterable[Path]) -> None:
        self.seen = read_all(paths)

    def saved(self) -> list[Path]:
        now = read_all(self.seen)
        changed = [path for path in self.seen if now[path] != self.seen[path]]
        self.seen = now
        return changed
