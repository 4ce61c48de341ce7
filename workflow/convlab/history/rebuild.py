"""Whether a device's results database is whole, and the rebuild of a damaged one from what can
still be read (standard library only: the check runs while Snakemake builds the DAG).

The check is cheap: SQLite's header (a file overwritten with anything else fails it), the size the
header gives against the file's (a cut file fails it), then SQLite's own structural check
(``PRAGMA quick_check``) within a time budget. A damaged database is never deleted: it is moved
aside, and a new one is started with every run, measurement and kernel version that can still be
read from it; the record step then adds the rows on disk that the new one lacks.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from convlab.history import rowpack, store

HEADER = b"SQLite format 3\x00"
HEADER_BYTES = 100
# SQLite's words for a file that is not a whole database; any other error (a file that cannot be
# opened, a lock) says nothing about the file's contents.
DAMAGE_WORDS = ("not a database", "malformed", "corrupt")
# Unreadable rowids tried one by one past a hole before the rest of a table is given up.
MAX_HOLE = 10_000


@dataclass(frozen=True)
class Salvage:
    """What could be read from a damaged database: its runs, measurements and kernel files (each a
    mapping of column to value), and whether every table was read to its end."""

    runs: list[dict[str, Any]] = field(default_factory=list)
    measurements: list[dict[str, Any]] = field(default_factory=list)
    kernel_files: list[dict[str, Any]] = field(default_factory=list)
    whole: bool = False


@dataclass(frozen=True)
class Rebuilt:
    """A damaged database moved aside and started again: why, where it went, and what was read
    back from it into the new one."""

    path: Path
    moved_to: Path
    why: str
    rows: int
    runs: int
    whole: bool

    def line(self, from_files: int, earlier_runs: int) -> str:
        """The one line a rebuild costs: where the damaged file went, and what the new one keeps:
        the rows read back from it, and the rows added after (``from_files``: rows on disk that it
        no longer gave back, read again from their cells' files; ``earlier_runs``: rows that earlier
        runs measured and could not record, from unrecorded/)."""
        if self.rows:
            kept = [f"{self.rows} rows of {self.runs} runs read back from it"
                    + ("" if self.whole else " (the rest could not be read)")]
        else:
            kept = ["nothing it held could be read back"]
        if from_files:
            kept.append(f"{from_files} rows measured before that it no longer gave back, read again from their "
                        "cells' files")
        if earlier_runs:
            kept.append(f"{earlier_runs} rows that earlier runs measured and could not record")
        return (f"{self.path} was damaged ({self.why}); moved it to {self.moved_to} and started a new one with "
                + "; ".join(kept))


def is_damage(error: BaseException) -> bool:
    """Whether SQLite's error says the file's contents are damaged."""
    return any(word in str(error) for word in DAMAGE_WORDS)


def header_damage(path: Path) -> str | None:
    """What the file's size and SQLite header say against it, or None. A cut file is told from
    its header's page count only where no write-ahead log holds later pages (SQLite's own rule)."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        head = handle.read(HEADER_BYTES)
    if size == 0:
        return "empty (0 bytes)"
    if len(head) < HEADER_BYTES or not head.startswith(HEADER):
        return "not a SQLite database: its first bytes are not SQLite's header"
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        return f"its header gives an impossible page size ({page_size})"
    pages = int.from_bytes(head[28:32], "big")
    header_current = head[24:28] == head[92:96]
    if _log_empty(path) and header_current and size < pages * page_size:
        return f"cut short: {size} bytes of the {pages * page_size} its header gives"
    return None


def _log_empty(path: Path) -> bool:
    wal = path.with_name(path.name + "-wal")
    return not wal.exists() or wal.stat().st_size == 0


def _reader(path: Path) -> sqlite3.Connection:
    """A read-only connection. Where no write-ahead log holds pages, as immutable: SQLite then
    takes no lock and touches no file beside it (a dry run changes nothing on disk)."""
    if _log_empty(path):
        return sqlite3.connect(f"{path.resolve().as_uri()}?immutable=1", uri=True)
    return store.connect(path, timeout_s=1.0, read_only=True)


def database_damage(path: str | Path, budget_s: float | None = None) -> str | None:
    """Why the database at ``path`` is damaged, or None: whole, absent, or not checkable here (it
    cannot be opened, or is locked: the record step says so). ``budget_s``: the most time SQLite's
    structural check may take (None: all it needs); a check cut short by it found nothing."""
    path = Path(path)
    try:
        damage = header_damage(path)
    except FileNotFoundError:
        return None
    except OSError as error:
        return None if not path.is_dir() else f"a directory, not a database ({error.strerror})"
    if damage:
        return damage
    try:
        connection = _reader(path)
    except sqlite3.Error:
        return None
    # a timer rather than a progress handler: SQLite calls none while it reads a table's pages
    alarm = threading.Timer(budget_s, connection.interrupt) if budget_s is not None else None
    try:
        if alarm is not None:
            alarm.start()
        found = [text for (text,) in connection.execute("PRAGMA quick_check(1)")]
    except sqlite3.DatabaseError as error:
        return str(error) if is_damage(error) else None
    finally:
        if alarm is not None:
            alarm.cancel()
        connection.close()
    return None if found == ["ok"] else f"SQLite's check: {found[0]}"


def _readable(connection: sqlite3.Connection, table: str, wanted: tuple[str, ...]) -> tuple[list[dict[str, Any]], bool]:
    """The rows of ``table`` that can be read, in rowid order, and whether it was read to its end:
    past a row that cannot be read, the next rowids are tried one by one."""
    try:
        present = [name for (_, name, *_) in connection.execute(f"PRAGMA table_info({table})")]
    except sqlite3.DatabaseError:
        return [], False
    columns = [name for name in wanted if name in present]
    if not columns:
        return [], not present
    query = f"SELECT rowid, {', '.join(columns)} FROM {table} WHERE rowid > ? ORDER BY rowid"
    rows: list[dict[str, Any]] = []
    after, hole, whole = 0, 0, True
    while hole <= MAX_HOLE:
        try:
            for rowid, *values in connection.execute(query, (after,)):
                rows.append(dict(zip(columns, values)))
                after, hole = rowid, 0
            return rows, whole
        except sqlite3.DatabaseError:
            whole = False
            after += 1
            hole += 1
    return rows, False


def salvage(path: Path) -> Salvage:
    """Every run, measurement and kernel file that can be read from the database at ``path``."""
    try:
        connection = store.connect(path, timeout_s=1.0, read_only=True)
        # SQLite then reads a file shorter than its header says up to where it was cut, instead of
        # refusing it whole; the connection is read-only, so nothing is written
        connection.execute("PRAGMA writable_schema=ON")
    except sqlite3.Error:
        return Salvage()
    try:
        runs, runs_whole = _readable(connection, "runs", ("run_id", "recorded_at", "git_commit", "host", "rows_added"))
        kept, kept_whole = _readable(connection, "measurements",
                                      tuple(dict.fromkeys((*store.MEASUREMENT_COLUMNS, *store.STORED_COLUMNS))))
        dictionaries, dictionaries_whole = _readable(connection, "row_dictionaries", ("dictionary_id", "dictionary"))
        files, files_whole = _readable(connection, "kernel_files", ("kernel_hash", "path", "content"))
    finally:
        connection.close()
    kept = _rows_with_json(kept, {d["dictionary_id"]: d["dictionary"] for d in dictionaries})
    return Salvage(runs, kept, files, runs_whole and kept_whole and dictionaries_whole and files_whole)


def _rows_with_json(kept: list[dict[str, Any]], dictionaries: dict[int, bytes]) -> list[dict[str, Any]]:
    """The measurements read back, each with its row's JSON: a packed row unpacked against its
    dictionary (none where either cannot be read), an older database's as it was kept."""
    for row in kept:
        packed, dictionary = row.pop("row_packed", None), dictionaries.get(row.pop("row_dictionary", None))
        if "row_json" not in row and packed is not None and dictionary is not None:
            try:
                row["row_json"] = rowpack.unpack(packed, dictionary)
            except (ValueError, UnicodeDecodeError):
                pass
    return kept


def _runs_of(saved: Salvage) -> list[tuple[Any, ...]]:
    """The runs table of the new database: the runs read back, in their order, then the runs of
    measurements whose run could not be read (recorded now, by the rebuild)."""
    now = dt.datetime.now().isoformat(timespec="seconds")
    known = {run["run_id"] for run in saved.runs}
    runs = [(run["run_id"], run.get("recorded_at") or now, run.get("git_commit"), run.get("host"),
             run.get("rows_added") or 0) for run in saved.runs if run.get("run_id")]
    lost: dict[str, Counter] = {}
    for row in saved.measurements:
        if row.get("run_id") and row["run_id"] not in known:
            lost.setdefault(row["run_id"], Counter())[row.get("git_commit")] += 1
    runs += [(run_id, now, commits.most_common(1)[0][0], None, sum(commits.values()))
             for run_id, commits in sorted(lost.items())]
    return runs


def rebuild(path: str | Path, why: str, timeout_s: float = store.BUSY_TIMEOUT_S) -> Rebuilt:
    """Move the damaged database at ``path`` aside and start a new one there, in the current
    schema, with what can be read from the old one. Raises store.HistoryUnavailable where the new
    one cannot be written."""
    path = Path(path)
    moved = store.set_aside(path)
    saved = salvage(moved)
    measurements = [row for row in saved.measurements if row.get("row_check") and row.get("run_id")
                    and row.get("cell") and row.get("row_json")]
    connection, _ = store.open_for_writing(path, timeout_s)
    try:
        with connection:
            connection.executemany("INSERT OR IGNORE INTO runs VALUES (?, ?, ?, ?, ?)", _runs_of(saved))
            store.insert_measurements(connection, measurements)
            connection.executemany("INSERT OR IGNORE INTO kernel_files (kernel_hash, path, content) VALUES (?, ?, ?)",
                                   [(row.get("kernel_hash"), row.get("path"), row.get("content"))
                                    for row in saved.kernel_files if row.get("kernel_hash") and row.get("path")])
    except sqlite3.Error as error:
        raise store.HistoryUnavailable(f"{path}: {error}") from None
    finally:
        connection.close()
    return Rebuilt(path, moved, why, len(measurements), len({row["run_id"] for row in measurements}), saved.whole)
