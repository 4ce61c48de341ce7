"""A side of ``compare`` read from a device's results database: a run id, a commit, ``@latest``
or ``@previous``. Each names the state of the results at that point: every cell's latest
measurement up to and including that run (for a commit, the latest measured at that commit)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from convlab.history import store
from convlab.history.compare import CompareError, ResultSet, load_set
from convlab.history.summary import typed_summary

LATEST, PREVIOUS = "@latest", "@previous"
COMMIT = re.compile(r"^[0-9a-f]{4,40}$")


class NothingBefore(CompareError):
    """@previous where the database holds one run: the first run has nothing before it."""


def is_database_side(spec: str) -> bool:
    return spec.startswith("@") or not Path(spec).exists()


def _run_rowids(connection, last: int | None = None) -> list[tuple[int, str]]:
    """The runs that added rows, oldest first (the ``last`` of them only, where given)."""
    query = "SELECT rowid, run_id FROM runs WHERE rows_added > 0 ORDER BY rowid DESC"
    found = connection.execute(query + " LIMIT ?", (last,)) if last else connection.execute(query)
    return list(reversed(list(found)))


def _resolve(connection, spec: str) -> tuple[str, str, object]:
    """(label, how to select, value): a snapshot up to a run's rowid, or a commit."""
    # @latest and @previous read the last two runs only: a long history is not listed for them
    runs = _run_rowids(connection, 2 if spec in (LATEST, PREVIOUS) else None)
    if not runs:
        raise CompareError("the results database holds no run yet")
    if spec in (LATEST, PREVIOUS):
        if spec == PREVIOUS and len(runs) < 2:
            raise NothingBefore(f"{spec}: the results database holds only one run ({runs[0][1]})")
        rowid, run_id = runs[-1] if spec == LATEST else runs[-2]
        return run_id, "run", rowid
    if spec.startswith("@"):
        raise CompareError(f"{spec}: give @latest, @previous, a run id, a commit, a summary CSV or a folder")
    matches = [r for r in runs if r[1] == spec] or [r for r in runs if r[1].startswith(spec)]
    if len(matches) == 1:
        return matches[0][1], "run", matches[0][0]
    if len(matches) > 1:
        raise CompareError(f"{spec} matches {len(matches)} runs: give more of the run id")
    if COMMIT.match(spec):
        commits = {c for (c,) in connection.execute(
            "SELECT DISTINCT git_commit FROM measurements WHERE git_commit LIKE ?", (spec + "%",))}
        if len(commits) == 1:
            commit = commits.pop()
            return f"commit {commit[:10]}", "commit", commit
        if len(commits) > 1:
            raise CompareError(f"{spec} matches {len(commits)} commits: give more of the commit")
    raise CompareError(f"{spec}: no such file or folder, and no run or commit of that name in the results database")


# Runs read at a time, newest first, while looking for each cell's latest measurement: a few at
# first (after a full run the latest holds every cell), twice as many each time after.
FIRST_READ, MOST_READ = 4, 256


def _cell_count(connection) -> int:
    """How many cells the database keeps rows of: one seek of the cells' index a cell, where
    counting the distinct ones would read an entry a row."""
    count, cell = 0, ""
    while (cell := connection.execute("SELECT min(cell) FROM measurements WHERE cell > ?", (cell,)).fetchone()[0]):
        count += 1
    return count


def _latest_up_to_run(connection, rowid: int) -> list[int]:
    """The rowid of each cell's latest measurement in the runs up to the run ``rowid`` (by run, then
    finish time, then insertion). The runs are read newest first, and the reading stops once every
    cell the database knows has been found: a long history costs the runs since each cell was
    last measured, not every row."""
    cells = _cell_count(connection)
    chosen: dict[str, tuple[str, int]] = {}
    start, size = 0, FIRST_READ
    while batch := [run_id for (run_id,) in connection.execute(
            "SELECT run_id FROM runs WHERE rowid <= ? ORDER BY rowid DESC LIMIT ? OFFSET ?", (rowid, size, start))]:
        start, size = start + size, min(2 * size, MOST_READ)
        rank = {run_id: -index for index, run_id in enumerate(batch)}  # the newest ranks highest
        newest: dict[str, tuple[int, str, int]] = {}
        for cell, run_id, finished_at, row in connection.execute(
                f"SELECT cell, run_id, finished_at, rowid FROM measurements WHERE run_id IN "
                f"({','.join('?' * len(batch))})", batch):
            if cell in chosen:
                continue  # found in a later run
            key = (rank[run_id], finished_at or "", row)
            if cell not in newest or key > newest[cell]:
                newest[cell] = key
        chosen.update((cell, (key[1], key[2])) for cell, key in newest.items())
        if len(chosen) >= cells:
            break
    return [row for _, row in chosen.values()]


def snapshot(connection, how: str, value: object) -> pd.DataFrame:
    """Each cell's latest measurement in the selection, as summary rows (with row_check, and the
    database's cell and kernel_hash)."""
    if how == "run":
        rows = _latest_up_to_run(connection, int(value))
    else:
        rows = [row for (row,) in connection.execute(
            "SELECT rowid FROM (SELECT rowid, row_number() OVER (PARTITION BY cell ORDER BY finished_at DESC, "
            "rowid DESC) AS newest FROM measurements WHERE git_commit = ?) WHERE newest = 1", (value,))]
    records = []
    for start in range(0, len(rows), 500):  # only the chosen rows are unpacked
        chunk = rows[start:start + 500]
        # with the cell's path and its kernel files' hash, which the database keeps beside the row:
        # what compare --why restores each side's version by
        records += [{**json.loads(text), "cell": cell, "kernel_hash": kernel_hash or ""}
                    for text, cell, kernel_hash in connection.execute(
                        f"SELECT {store.ROW_JSON}, cell, kernel_hash FROM measurements WHERE rowid IN "
                        f"({','.join('?' * len(chunk))}) ORDER BY rowid", chunk)
                    if text]  # a damaged row's JSON reads as none
    return pd.DataFrame.from_records(records)


def load_side(spec: str, results: str | Path = "results", device: str | None = None) -> ResultSet:
    """One side of compare: a summary CSV or a folder, else a state of the results database."""
    if not is_database_side(spec):
        return load_set(spec)
    try:
        folder = store.device_folder(results, device)
    except store.HistoryUnavailable as error:
        raise CompareError(str(error)) from None
    path = store.database_path(folder)
    try:
        connection = store.open_for_reading(path)
    except store.HistoryUnavailable as error:
        raise CompareError(str(error)) from None
    try:
        label, how, value = _resolve(connection, spec)
        rows = snapshot(connection, how, value)
    finally:
        connection.close()
    return ResultSet(label, path, typed_summary(rows))
