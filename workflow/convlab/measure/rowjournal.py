"""Rows that wait for the results database (standard library only: the service places rows).

A row placed at its cell's path, results/<device>/cells/<cell>.csv, lives there only until the cell
is measured again. So every row a job of a run places is also linked, under that run, at
results/<device>/unrecorded/<run>/<the cell's path below cells/, quoted>.csv; the record step
(convlab.history.record) adds what it finds there to the database and only then removes the
links. A row that a record step could not add (the database locked, read-only, the disk full)
outlives the next measurement of its cell, and the next run that records adds it. The links also
say which cells a job of *this* run measured: those are the cells a verdict is about.
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

# The run that asks for a cell (set once by the run the user started; its jobs, on a cluster node
# too, inherit it), and the folder of each device's unrecorded rows.
RUN_ID_ENV = "CONVLAB_RUN_ID"
FOLDER = "unrecorded"
CELLS = "/cells/"


@dataclass(frozen=True)
class UnrecordedRow:
    """One placed row that no record step has added yet: the run whose job placed it, the cell's
    path below cells/, and the link that keeps it."""

    run_id: str
    cell_tail: str
    file: Path


def new_run_id() -> str:
    """Sortable by time, unique across hosts: 20261124T143012-3fa9."""
    return f"{dt.datetime.now().strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(2)}"


def _split(row_path: str) -> tuple[str, str] | None:
    """results/<device> and the cell's path below cells/, for a cell row's path."""
    head, found, tail = row_path.partition(CELLS)
    return (head, tail) if found and head and tail else None


def keep_unrecorded(row_path: str | os.PathLike, run_id: str | None) -> None:
    """Link the row just placed at ``row_path`` under ``run_id``, until it is recorded. Nothing
    for a row outside a device's cells/ folder or without a run (a cell measured by hand). A link
    that cannot be made costs nothing but that guarantee: the row itself is in place."""
    parts = _split(os.fspath(row_path))
    if parts is None or not run_id:
        return
    head, tail = parts
    folder = os.path.join(head, FOLDER, run_id)
    target = os.path.join(folder, quote(tail, safe=""))
    temporary = f"{target}.{os.getpid()}.link"
    try:
        os.makedirs(folder, exist_ok=True)
        os.link(row_path, temporary)
        os.replace(temporary, target)  # a cell measured twice in one run keeps its last row
    except OSError:
        try:
            os.unlink(temporary)
        except OSError:
            pass


def unrecorded_rows(results_dir: str | Path) -> list[UnrecordedRow]:
    """Every row waiting in results_dir/unrecorded/, by run."""
    rows = []
    for folder in sorted((Path(results_dir) / FOLDER).glob("*")):
        if folder.is_dir():
            rows += [UnrecordedRow(folder.name, unquote(file.name), file)
                     for file in sorted(folder.iterdir()) if not file.name.endswith(".link")]
    return rows


def forget(rows: Iterable[UnrecordedRow]) -> None:
    """Remove the links of rows the database now keeps, and their runs' folders once empty."""
    folders = set()
    for row in rows:
        row.file.unlink(missing_ok=True)
        folders.add(row.file.parent)
    for folder in [*folders, *{folder.parent for folder in folders}]:
        try:
            folder.rmdir()
        except OSError:
            pass  # rows still wait there
