"""One SQLite database per device label, results/<device>/history.sqlite (standard library only).

Every row the pipeline writes is added once, keyed by its ``row_check`` (a hash over the row's
values, so a re-measured cell is a new key and a row seen again is not added twice). The whole
row is kept as JSON beside the columns the history is queried on, so that a later change of the
row contract loses nothing. Only the record step (convlab.history.record) writes here; cell jobs
never open it.

The schema carries its version in SQLite's ``user_version``; MIGRATIONS[n] takes a database of
version n to n + 1, so an older database is brought up to date when it is opened for writing.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from convlab.history import rowpack
from convlab.status import UserError

DATABASE_NAME = "history.sqlite"
# How long a writer waits for another run's transaction before it gives up (seconds).
BUSY_TIMEOUT_S = 15.0

MIGRATIONS: tuple[str, ...] = (
    # 0 -> 1: runs and measurements
    """
    CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        recorded_at TEXT NOT NULL,
        git_commit TEXT,
        host TEXT,
        rows_added INTEGER NOT NULL
    );
    CREATE TABLE measurements (
        row_check TEXT PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        cell TEXT NOT NULL,
        experiment TEXT,
        kernel TEXT,
        variant TEXT,
        status TEXT,
        kernel_ms REAL,
        kernel_ms_iqr REAL,
        finished_at TEXT,
        git_commit TEXT,
        code_version TEXT,
        kernel_hash TEXT,
        config_hash TEXT,
        gpu_uuid TEXT,
        row_json TEXT NOT NULL,
        verdict TEXT,
        ratio REAL,
        previous TEXT,
        changed TEXT
    );
    CREATE INDEX measurements_by_cell ON measurements(cell, finished_at);
    CREATE INDEX measurements_by_kernel ON measurements(kernel, finished_at);
    CREATE INDEX measurements_by_run ON measurements(run_id);
    """,
    # 1 -> 2: the hash of the picture a cell read, so that a verdict can name a changed input
    # (NULL for rows kept before: not known, never taken for a change)
    """
    ALTER TABLE measurements ADD COLUMN input_hash TEXT;
    """,
    # 2 -> 3: each kernel version's own files (its description, .cu, wrapper or twin), by the hash
    # its measurements carry, so that a previous version can be read, compiled and run again
    """
    CREATE TABLE kernel_files (
        kernel_hash TEXT NOT NULL,
        path TEXT NOT NULL,
        content BLOB,
        PRIMARY KEY (kernel_hash, path)
    );
    """,
    # 3 -> 4: each row's JSON packed against a dictionary (convlab.history.rowpack: the first row
    # kept with the same columns), 4.4 KB a row on disk to under 1 KB; the indexes by cell and
    # kernel lose the time, which no query orders by alone
    """
    CREATE TABLE row_dictionaries (
        dictionary_id INTEGER PRIMARY KEY,
        columns_key TEXT NOT NULL UNIQUE,
        dictionary BLOB NOT NULL
    );
    INSERT OR IGNORE INTO row_dictionaries (columns_key, dictionary)
        SELECT columns_key(row_json), CAST(row_json AS BLOB) FROM measurements ORDER BY rowid;
    CREATE TABLE packed_measurements (
        row_check TEXT PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        cell TEXT NOT NULL,
        experiment TEXT,
        kernel TEXT,
        variant TEXT,
        status TEXT,
        kernel_ms REAL,
        kernel_ms_iqr REAL,
        finished_at TEXT,
        git_commit TEXT,
        code_version TEXT,
        kernel_hash TEXT,
        config_hash TEXT,
        gpu_uuid TEXT,
        row_dictionary INTEGER NOT NULL REFERENCES row_dictionaries(dictionary_id),
        row_packed BLOB NOT NULL,
        verdict TEXT,
        ratio REAL,
        previous TEXT,
        changed TEXT,
        input_hash TEXT
    );
    INSERT INTO packed_measurements
        SELECT m.row_check, m.run_id, m.cell, m.experiment, m.kernel, m.variant, m.status, m.kernel_ms,
               m.kernel_ms_iqr, m.finished_at, m.git_commit, m.code_version, m.kernel_hash, m.config_hash,
               m.gpu_uuid, d.dictionary_id, pack_row(m.row_json, d.dictionary), m.verdict, m.ratio, m.previous,
               m.changed, m.input_hash
        FROM measurements m JOIN row_dictionaries d ON d.columns_key = columns_key(m.row_json) ORDER BY m.rowid;
    DROP TABLE measurements;
    ALTER TABLE packed_measurements RENAME TO measurements;
    CREATE INDEX measurements_by_cell ON measurements(cell);
    CREATE INDEX measurements_by_kernel ON measurements(kernel);
    CREATE INDEX measurements_by_run ON measurements(run_id);
    """,
)
# The step after which the rows are packed: a database brought past it is vacuumed once, so that
# the file shrinks to what it now holds.
PACKED_FROM = 4
SCHEMA_VERSION = len(MIGRATIONS)

class HistoryUnavailable(UserError, RuntimeError):
    """The database cannot be read or written here (locked by another run, a read-only file
    system, a full disk). The rows stay in their CSV files; the next run that records adds them."""


@dataclass(frozen=True)
class MeasuredCell:
    """What the history knows a measurement by, kept or judged: its cell, the cell's experiment, kernel and
    variant, its status and its time (None where it has none)."""

    cell: str
    experiment: str
    kernel: str
    variant: str
    status: str
    kernel_ms: float | None


@dataclass(frozen=True)
class Measurement(MeasuredCell):
    """One kept row, as the history reads it."""

    row_check: str
    run_id: str
    kernel_ms_iqr: float | None
    finished_at: str
    git_commit: str
    code_version: str
    kernel_hash: str
    spec_hash: str  # the first SPEC_HASH_DIGITS of the cell's spec_hash (its column: config_hash)
    gpu_uuid: str
    row_json: str
    verdict: str | None = None
    ratio: float | None = None
    previous: str | None = None
    changed: str | None = None
    input_hash: str | None = None

    @property
    def row(self) -> dict[str, str]:
        return json.loads(self.row_json or "{}")


# How many digits of a cell's spec_hash (the row's column, convlab.measure.row.spec_hash) a measurement keeps:
# the 12 every kept row has, so that a rerun's hash equals its predecessors' and is not read as new settings.
SPEC_HASH_DIGITS = 12
# Measurement's fields, and their columns in the database where the name differs. The settings hash's column
# keeps the name it was made with: renaming it takes a schema migration, after which every older convlab
# refuses the database, for a name alone.
MEASUREMENT_FIELDS = tuple(f.name for f in fields(Measurement))
COLUMN_NAMES = {"spec_hash": "config_hash"}
# The measurement columns (row_json among them: the whole row), in Measurement's order, so that a query that
# selects them reads Measurements.
MEASUREMENT_COLUMNS = tuple(COLUMN_NAMES.get(name, name) for name in MEASUREMENT_FIELDS)
# The whole row is kept packed (rowpack); this expression reads it back as its JSON.
ROW_JSON = ("unpack_row(row_packed, (SELECT dictionary FROM row_dictionaries "
            "WHERE dictionary_id = row_dictionary))")
SELECTED_COLUMNS = tuple(ROW_JSON if name == "row_json" else name for name in MEASUREMENT_COLUMNS)
STORED_COLUMNS = tuple(column for name in MEASUREMENT_COLUMNS
                       for column in (("row_dictionary", "row_packed") if name == "row_json" else (name,)))


def database_path(results_dir: str | Path) -> Path:
    """results/<device>/history.sqlite for the device folder ``results_dir``."""
    return Path(results_dir) / DATABASE_NAME


def device_folder(results: str | Path, device: str | None) -> Path:
    """results/<device>: the one named, or the only one that has a results database."""
    results = Path(results)
    if device:
        return results / device
    found = sorted(p.parent for p in results.glob(f"*/{DATABASE_NAME}"))
    if len(found) == 1:
        return found[0]
    if not found:
        raise HistoryUnavailable(f"no results database under {results}/ yet: a run that measures cells makes one")
    raise HistoryUnavailable(f"{len(found)} devices have a results database ({', '.join(p.name for p in found)}): "
                             "name one with --device")


def _describe(error: Exception) -> str:
    text = str(error) or type(error).__name__
    if "locked" in text or "busy" in text:
        return f"{text} (another run is writing it)"
    if "readonly" in text or "read-only" in text or "unable to open" in text:
        return f"{text} (a read-only file system?)"
    if "full" in text:
        return f"{text}; nothing of this run was added"
    return text


def set_aside(path: Path) -> Path:
    """Move a database that is not one (and its WAL files) aside under a name of its own,
    history.sqlite.corrupt-<time>, never deleting it."""
    stamp = dt.datetime.now().strftime("%Y%m%dT%H%M%S")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    number = 1
    while target.exists():  # a second one within the second keeps the first
        number += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{number}")
    os.replace(path, target)
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            os.replace(side, target.with_name(target.name + suffix))
    return target


def connect(path: str | Path, timeout_s: float = BUSY_TIMEOUT_S, read_only: bool = False) -> sqlite3.Connection:
    """A connection to the database at ``path`` (made if absent, unless ``read_only``)."""
    path = Path(path)
    if read_only:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=timeout_s)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(path, timeout=timeout_s)
    add_row_functions(connection)
    return connection


def _unpack_row(packed: bytes | None, dictionary: bytes | None) -> str | None:
    if packed is None or dictionary is None:
        return None
    try:
        return rowpack.unpack(packed, dictionary)
    except (ValueError, UnicodeDecodeError):
        return None  # a damaged row reads as none: its columns stand, its JSON is lost


def _pack_row(row_json: str | None, dictionary: bytes) -> bytes:
    return rowpack.pack(row_json or "{}", dictionary)


def add_row_functions(connection: sqlite3.Connection) -> None:
    """The SQL functions that pack and unpack kept rows (the schema's migration and ROW_JSON use them)."""
    connection.create_function("unpack_row", 2, _unpack_row, deterministic=True)
    connection.create_function("pack_row", 2, _pack_row, deterministic=True)
    connection.create_function("columns_key", 1, lambda text: rowpack.columns_key(text or "{}"), deterministic=True)


def _version(connection: sqlite3.Connection) -> int:
    return int(connection.execute("PRAGMA user_version").fetchone()[0])


def _migrate(connection: sqlite3.Connection) -> None:
    version = _version(connection)
    if version > SCHEMA_VERSION:
        raise HistoryUnavailable(f"schema version {version} is newer than this convlab's {SCHEMA_VERSION}; "
                                 "update convlab to add to it")
    for step in range(version, SCHEMA_VERSION):
        connection.executescript(f"BEGIN; {MIGRATIONS[step]} PRAGMA user_version = {step + 1}; COMMIT;")
    if 0 < version < PACKED_FROM <= SCHEMA_VERSION:
        shrink(connection)  # the rows now take a fraction of the pages they left


def shrink(connection: sqlite3.Connection) -> bool:
    """Give the file's free pages back (VACUUM), where it can be done now. Whether it was: VACUUM
    writes a copy of the database first, which a nearly full disk has no room for; the file then
    keeps its free pages, which later rows fill, and nothing is lost."""
    try:
        connection.execute("VACUUM")
    except sqlite3.OperationalError:
        return False
    return True


def open_for_writing(path: str | Path, timeout_s: float = BUSY_TIMEOUT_S) -> tuple[sqlite3.Connection, list[str]]:
    """The database, migrated to the current schema in WAL mode, and the warnings opening it
    gave. A file that is not a database is moved aside (one warning) and a new one started.
    Raises HistoryUnavailable where it can be neither read nor made."""
    path = Path(path)
    warnings: list[str] = []
    for attempt in range(2):
        connection = None
        try:
            connection = connect(path, timeout_s)
            connection.execute("PRAGMA journal_mode=WAL")
            _migrate(connection)
            return connection, warnings
        except sqlite3.DatabaseError as error:
            if connection is not None:
                connection.close()
            damaged = "not a database" in str(error) or "malformed" in str(error)
            if attempt == 0 and damaged and path.exists():
                moved = set_aside(path)
                warnings.append(f"{path} was not a readable database ({error}); moved it to {moved} and started "
                                "a new one")
                continue
            raise HistoryUnavailable(f"{path}: {_describe(error)}") from None
        except OSError as error:
            if connection is not None:
                connection.close()
            raise HistoryUnavailable(f"{path}: {_describe(error)}") from None
    raise AssertionError("unreachable")


def open_for_reading(path: str | Path) -> sqlite3.Connection:
    """The database read-only. Raises HistoryUnavailable where there is none or it is not one."""
    path = Path(path)
    if not path.is_file():
        raise HistoryUnavailable(f"{path} does not exist yet: a run that measures cells makes it")
    try:
        connection = connect(path, read_only=True)
        version = _version(connection)
    except sqlite3.DatabaseError as error:
        raise HistoryUnavailable(f"{path} is not a readable database ({error})") from None
    if version != SCHEMA_VERSION:
        connection.close()
        raise HistoryUnavailable(f"{path} has schema version {version}, this convlab reads {SCHEMA_VERSION}: a run "
                                 "that measures cells brings it up to date")
    return connection


def known_checks(connection: sqlite3.Connection, checks: Iterable[str]) -> set[str]:
    """Which of ``checks`` are already kept."""
    wanted = list(checks)
    found: set[str] = set()
    for start in range(0, len(wanted), 500):
        chunk = wanted[start:start + 500]
        marks = ",".join("?" * len(chunk))
        found.update(r[0] for r in connection.execute(
            f"SELECT row_check FROM measurements WHERE row_check IN ({marks})", chunk))
    return found


# What a measurement records of what it ran on, by the content: its kernel's files, its picture.
CONTENT_HASHES = ("kernel_hash", "input_hash")


def recorded_hashes(connection: sqlite3.Connection, checks: Iterable[str], column: str) -> dict[str, str]:
    """The content hash (``column``, one of CONTENT_HASHES) each of ``checks`` was recorded with,
    where it is kept and known."""
    if column not in CONTENT_HASHES:
        raise ValueError(f"{column} is not a content hash of a measurement")
    wanted = list(checks)
    found: dict[str, str] = {}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start:start + 500]
        marks = ",".join("?" * len(chunk))
        found.update((check, value) for check, value in connection.execute(
            f"SELECT row_check, {column} FROM measurements WHERE row_check IN ({marks})", chunk) if value)
    return found


def _measurement(record: tuple[Any, ...]) -> Measurement:
    return Measurement(*record)


# Oldest first by the run that kept them (its order of recording), then by when they finished: a
# clock that went back between runs cannot reorder the history.
RUN_RANK = "(SELECT rowid FROM runs WHERE runs.run_id = measurements.run_id)"
RUN_ORDER = f"{RUN_RANK}, finished_at, row_check"


def _select(where: str = "", order: str = RUN_ORDER, with_rows: bool = True) -> str:
    columns = SELECTED_COLUMNS if with_rows else tuple("NULL" if c == ROW_JSON else c for c in SELECTED_COLUMNS)
    return f"SELECT {', '.join(columns)} FROM measurements {where} ORDER BY {order}"


# The most recent ok measurements of a cell that a run reads to judge it: its noise is learned from
# their consecutive pairs (Student's t flattens out well before 200), and a year of daily runs
# costs no more than this.
RECENT_MEASUREMENTS = 200


def ok_history(connection: sqlite3.Connection, cells: Iterable[str],
               recent: int = RECENT_MEASUREMENTS) -> dict[str, list[Measurement]]:
    """Each cell's ``recent`` latest kept ``ok`` measurements with a time, oldest first (by run). Only
    the last of each carries its row's JSON (what a verdict reads of a row is the previous
    measurement's); the earlier ones, which a cell's noise is learned from by their columns, have
    none (``row_json`` None), so that a long history is not unpacked row by row."""
    history: dict[str, list[Measurement]] = {}
    chosen: list[int] = []
    for cell in dict.fromkeys(cells):
        # the cell's index holds its rows in the order they were kept, newest last: a long history
        # costs the latest ``recent`` of them, not all
        chosen += [row for (row,) in connection.execute(
            "SELECT rowid FROM measurements WHERE cell = ? AND status = 'ok' AND kernel_ms > 0 "
            "ORDER BY rowid DESC LIMIT ?", (cell, recent))]
    columns = ", ".join("NULL" if c == ROW_JSON else c for c in SELECTED_COLUMNS)
    ranked: dict[str, list[tuple[tuple[Any, ...], Measurement]]] = {}
    for start in range(0, len(chosen), 500):
        chunk = chosen[start:start + 500]
        for *record, rank in connection.execute(
                f"SELECT {columns}, {RUN_RANK} FROM measurements WHERE rowid IN ({','.join('?' * len(chunk))})",
                chunk):
            measurement = _measurement(tuple(record))
            ranked.setdefault(measurement.cell, []).append(((rank, measurement.finished_at or "",
                                                             measurement.row_check), measurement))
    for cell, kept in ranked.items():
        # as RUN_ORDER sorts: a row whose run is not kept (rank NULL) first
        history[cell] = [m for _, m in sorted(kept, key=lambda pair: (pair[0][0] is not None, pair[0][0] or 0,
                                                                      *pair[0][1:]))]
    rows = row_jsons(connection, [kept[-1].row_check for kept in history.values()])
    for kept in history.values():
        kept[-1] = replace(kept[-1], row_json=rows.get(kept[-1].row_check))
    return history


def row_jsons(connection: sqlite3.Connection, checks: Iterable[str]) -> dict[str, str]:
    """The row JSON of each of ``checks`` that is kept and can be read."""
    wanted = list(checks)
    found: dict[str, str] = {}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start:start + 500]
        found.update((check, text) for check, text in connection.execute(
            f"SELECT row_check, {ROW_JSON} FROM measurements WHERE row_check IN ({','.join('?' * len(chunk))})",
            chunk) if text is not None)
    return found


def add_measurements(connection: sqlite3.Connection, host: str, measurements: list[Mapping[str, Any]],
                     kernel_versions: Mapping[str, list[tuple[str, bytes | None]]] | None = None) -> int:
    """Add measurements (mappings of Measurement's fields), each under the run its ``run_id`` names (a run that measured it; the runs
    oldest first), and the files of each kernel version they name (``kernel_versions``: kernel hash
    -> (path, bytes) pairs), in one transaction: all of it or nothing (a full disk or a lost lock
    rolls it back). Rows and versions already kept are skipped. Returns the rows added."""
    try:
        with connection:
            connection.executemany("INSERT OR IGNORE INTO kernel_files (kernel_hash, path, content) VALUES (?, ?, ?)",
                                   [(kernel_hash, path, data) for kernel_hash, files in (kernel_versions or {}).items()
                                    for path, data in files])
            known = known_checks(connection, [m["row_check"] for m in measurements])
            fresh = [m for m in measurements if m["row_check"] not in known]
            by_run: dict[str, list[Mapping[str, Any]]] = {}
            for measurement in fresh:
                by_run.setdefault(measurement["run_id"], []).append(measurement)
            recorded_at = dt.datetime.now().isoformat(timespec="seconds")
            for run_id in sorted(by_run):
                commits = Counter(m["git_commit"] for m in by_run[run_id])
                connection.execute("INSERT OR IGNORE INTO runs VALUES (?, ?, ?, ?, ?)",
                                   (run_id, recorded_at, commits.most_common(1)[0][0], host, len(by_run[run_id])))
            insert_measurements(connection, [{COLUMN_NAMES.get(f, f): m.get(f) for f in MEASUREMENT_FIELDS}
                                             for m in fresh])
    except sqlite3.Error as error:
        raise HistoryUnavailable(f"{_describe(error)}") from None
    return len(fresh)


def insert_measurements(connection: sqlite3.Connection, rows: list[Mapping[str, Any]]) -> None:
    """Insert measurements (mappings of MEASUREMENT_COLUMNS to values), each row's JSON packed
    against the dictionary of its columns (made from it where it is the first of them); rows
    already kept are skipped. Within the caller's transaction."""
    dictionaries: dict[str, tuple[int, bytes]] = {}
    stored = []
    for row in rows:
        row_json = row.get("row_json") or "{}"
        key = rowpack.columns_key(row_json)
        if key not in dictionaries:
            found = connection.execute("SELECT dictionary_id, dictionary FROM row_dictionaries WHERE columns_key = ?",
                                       (key,)).fetchone()
            if found is None:
                dictionary = row_json.encode()
                cursor = connection.execute("INSERT INTO row_dictionaries (columns_key, dictionary) VALUES (?, ?)",
                                            (key, dictionary))
                found = (cursor.lastrowid, dictionary)
            dictionaries[key] = found
        dictionary_id, dictionary = dictionaries[key]
        packed = {"row_dictionary": dictionary_id, "row_packed": rowpack.pack(row_json, dictionary)}
        stored.append(tuple(packed[c] if c in packed else row.get(c) for c in STORED_COLUMNS))
    marks = ",".join("?" * len(STORED_COLUMNS))
    connection.executemany(f"INSERT OR IGNORE INTO measurements ({', '.join(STORED_COLUMNS)}) VALUES ({marks})",
                           stored)


def runs(connection: sqlite3.Connection) -> list[tuple[str, str, str, int]]:
    """Every run that added rows, oldest first: (run_id, recorded_at, git_commit, rows_added)."""
    return list(connection.execute(
        "SELECT run_id, recorded_at, git_commit, rows_added FROM runs WHERE rows_added > 0 ORDER BY rowid"))


def measurements(connection: sqlite3.Connection, kernel: str | None = None, cell: str | None = None,
                 run_ids: Iterable[str] | None = None, with_rows: bool = True) -> list[Measurement]:
    """Kept measurements, oldest first, of one kernel and/or cells whose path contains ``cell``,
    and/or of the given runs; ``with_rows`` False: without their rows' JSON (``row_json`` None),
    for a reader of the columns only."""
    clauses, values = [], []
    if kernel:
        clauses.append("kernel = ?")
        values.append(kernel)
    if cell:
        clauses.append("instr(cell, ?) > 0")
        values.append(cell)
    if run_ids is not None:
        ids = list(run_ids)
        clauses.append(f"run_id IN ({','.join('?' * len(ids))})")
        values.extend(ids)
    where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
    return [_measurement(r) for r in connection.execute(_select(where, with_rows=with_rows), values)]


def kernel_version(connection: sqlite3.Connection, kernel_hash: str) -> list[tuple[str, bytes | None]]:
    """The files kept for one kernel version, in the order its hash takes them (empty where none
    are kept: a version recorded before the files were)."""
    return list(connection.execute("SELECT path, content FROM kernel_files WHERE kernel_hash = ? ORDER BY rowid",
                                   (kernel_hash,)))
