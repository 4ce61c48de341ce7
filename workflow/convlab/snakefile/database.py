"""The results database checked by every run, while Snakemake builds the DAG, a run with nothing
to do included: a damaged database is moved aside and started again from what can be read (one
line), rows that wait in unrecorded/ are added by the first run that can write it, and so are the
rows on disk the database lacks, whoever deleted what (their journal in unrecorded/, the database).

A healthy database with nothing waiting costs its header, SQLite's structural check within a
budget, a look into unrecorded/ and each row file's check looked up in it; the rows are read whole
only when there is something to add.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

from convlab.history import store
from convlab.history.rebuild import database_damage
from convlab.history.record import add_rows, other_rows_lines
from convlab.measure.rowjournal import CELLS, new_run_id, unrecorded_rows
from convlab.plan.cell import Cell
from convlab.snakefile.freshness import cell_row_check

# The most SQLite's structural check may take before a run: it covers a database of many MB in
# this time (a larger one's rest is checked by the record step, which checks in full).
CHECK_BUDGET_S = 0.2
# How long adding the waiting rows waits for a lock before the run goes on without them.
LOCK_TIMEOUT_S = 1.0


def _reading(database: Path, untouched: bool) -> sqlite3.Connection:
    """The database read-only; ``untouched``: as an immutable file (a dry run writes nothing, not
    even SQLite's shared-memory file)."""
    if untouched:
        return sqlite3.connect(f"{database.resolve().as_uri()}?immutable=1", uri=True)
    return store.open_for_reading(database)


def recorded_hashes(rows: Iterable[str], database: Path, column: str, untouched: bool = False) -> dict[str, str]:
    """What the database recorded (``column``: the kernel files' hash, or the picture's) for the
    measurement of each row file of ``rows`` it keeps and can tell, by the row's check."""
    checks = {path: check for path in rows if (check := cell_row_check(path))}
    if not checks or not database.exists():
        return {}
    try:
        connection = _reading(database, untouched)
    except (store.HistoryUnavailable, sqlite3.Error):
        return {}
    try:
        recorded = store.recorded_hashes(connection, checks.values(), column)
    except sqlite3.Error:
        return {}
    finally:
        connection.close()
    return {path: recorded[check] for path, check in checks.items() if check in recorded}


def rows_of_edited_kernels(rows: dict[str, str], database: Path, untouched: bool = False) -> list[str]:
    """The row files (of ``rows``: each cell's row path and the hash of its kernel's files now)
    whose measurement the database recorded with other kernel files: their cells are due whatever
    the files' times say (a row dated ahead by another clock or a copy hides an edit from
    Snakemake). Rows the database lacks or cannot tell are left to the times."""
    recorded = recorded_hashes(rows, database, "kernel_hash", untouched)
    return [path for path, kernel_hash in recorded.items() if kernel_hash != rows[path]]


def rows_not_kept(results_dir: Path, tails: set[str], database: Path, untouched: bool = False) -> list[str]:
    """The checks of the rows on disk (of the cells under ``tails``) that the database lacks: rows
    whose journal in unrecorded/ was deleted while they waited, or a database deleted (every row).
    A database that cannot be read lacks none here: the record step says why. ``untouched``: read it
    as an immutable file (a dry run writes nothing, not even SQLite's shared-memory file)."""
    on_disk = [check for tail in tails if (check := cell_row_check(results_dir / "cells" / tail))]
    if not on_disk:
        return []
    if not database.exists():
        return on_disk
    try:
        connection = _reading(database, untouched)
    except (store.HistoryUnavailable, sqlite3.Error):
        return []
    try:
        known = store.known_checks(connection, on_disk)
    except sqlite3.Error:
        return []
    finally:
        connection.close()
    return [check for check in on_disk if check not in known]


def check_results_database(results_dir: str | Path, cells: list[Cell], threshold: float,
                           dry_run: bool = False) -> list[str]:
    """The lines for the terminal after checking results_dir's database: a damaged one moved aside
    and started again, the rows waiting in unrecorded/ (for cells of this grid) added, or why they
    still wait. ``dry_run``: only say what the real run will do."""
    results_dir = Path(results_dir)
    path = store.database_path(results_dir)
    damage = database_damage(path, CHECK_BUDGET_S)
    tails = {cell.path.partition(CELLS)[2] for cell in cells}
    waiting = [row for row in unrecorded_rows(results_dir) if row.cell_tail in tails]
    unknown = 0 if damage or waiting else len(rows_not_kept(results_dir, tails, path, untouched=dry_run))
    if damage is None and not waiting and not unknown:
        return []
    if dry_run and unknown:
        return [f"history: {unknown} rows on disk are not in {path}; the real run adds them (a dry run changes "
                "nothing)"]
    if dry_run:
        if damage is not None:
            return [f"warning: {path} is damaged ({damage}); the real run will move it aside and start a new one "
                    "with what can be read (a dry run changes nothing)"]
        return [f"history: {len(waiting)} rows wait in {results_dir}/unrecorded/; the real run adds them (a dry run "
                "changes nothing)"]
    run_id = new_run_id()
    done = add_rows(results_dir, cells, run_id, damage, LOCK_TIMEOUT_S, threshold)
    lines = [f"warning: {warning}" for warning in done.warnings]
    if done.added:
        lines += other_rows_lines(done.fresh, run_id, lead="history: recorded", rebuilt=done.rebuilt is not None)
    return lines
