"""The results database read from a copy of its files: a reader in place would still write
beside it (SQLite's reader of a WAL database touches its -shm file), and a preview (convlab watch)
writes nothing under results/."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from convlab.history import store

SIDE_FILES = ("-wal",)  # what a WAL database holds beside its file until a checkpoint


def open_copy(results_dir: str | Path, into: str | Path) -> sqlite3.Connection:
    """results/<device>/history.sqlite (and its write-ahead log) copied into the folder ``into``,
    opened there for reading. HistoryUnavailable where there is none, or it is not one."""
    source = store.database_path(results_dir)
    if not source.is_file():
        raise store.HistoryUnavailable(f"{source} does not exist yet: a run that measures cells makes it")
    target = Path(into) / source.name
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        shutil.copyfile(source, target)
        for suffix in SIDE_FILES:
            side = source.with_name(source.name + suffix)
            if side.is_file():
                shutil.copyfile(side, target.with_name(target.name + suffix))
    except OSError as error:
        raise store.HistoryUnavailable(f"{source} cannot be read ({error.strerror or error})") from None
    return store.open_for_reading(target)
