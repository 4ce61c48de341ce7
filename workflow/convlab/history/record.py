"""The record step: add this run's new rows to the device's results database and say, per
kernel, whether the re-measured cells got faster or slower.

It is the database's one writer. It reads the grid's row files (a row already kept is skipped,
a damaged one is never read), judges each new row against the cell's previous ``ok``
measurement, adds them all in one transaction, and writes the verdicts to
results/<device>/verdicts/ (<run>.csv, latest.csv, latest.txt). A database that cannot be
written (locked by another run, read-only, a full disk) costs one `warning:` line and no row:
the rows stay in their CSV files and the next run that records adds them.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import io
import json
import secrets
import socket
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from convlab.atomicfile import write_text_atomically
from convlab.codeversion import fingerprint
from convlab.history import store
from convlab.history.verdicts import CSV_COLUMNS, CellVerdict, csv_records, judge, summary_lines
from convlab.measure.row import COLUMNS, DamagedRow, OtherFormat, read_row_file
from convlab.paths import REPO_ROOT
from convlab.plan.cell import Cell
from convlab.plan.registry import load_registry

VERDICTS_DIR = "verdicts"


@dataclass
class Recorded:
    """What one record step did: its run, the verdicts of the rows it found new, the lines to
    print, and its warnings."""

    run_id: str
    verdicts: list[CellVerdict]
    lines: list[str]
    added: int
    warnings: list[str] = field(default_factory=list)


def new_run_id() -> str:
    """Sortable by time, unique across hosts: 20261124T143012-3fa9."""
    return f"{dt.datetime.now().strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(2)}"


def config_hash(cell: Cell) -> str:
    """The settings that shaped the cell (its spec), as a short hash."""
    return hashlib.sha256(cell.to_json().encode()).hexdigest()[:12]


class KernelHashes:
    """The hash of each kernel's own files (.cu/.yaml, library wrapper or cpu twin), once each."""

    def __init__(self) -> None:
        self.registry = load_registry()
        self.known: dict[tuple[str, str], str] = {}

    def __call__(self, kernel: str, backend: str) -> str:
        key = (kernel, backend)
        if key not in self.known:
            spec = self.registry.get(kernel)
            self.known[key] = fingerprint(spec.files(backend), root=REPO_ROOT) if spec else ""
        return self.known[key]


def read_rows(cells: list[Cell]) -> list[tuple[Cell, dict[str, str]]]:
    """Each cell's row, where its file is a whole row of the current format."""
    rows = []
    for cell in cells:
        try:
            values = read_row_file(cell.path)
        except (FileNotFoundError, DamagedRow, OtherFormat):
            continue
        rows.append((cell, dict(zip(COLUMNS, values))))
    return rows


def _float(text: str) -> float | None:
    try:
        return float(text) if text != "" else None
    except ValueError:
        return None


def measurement_of(cell: Cell, row: dict[str, str], run_id: str, kernel_hash: str) -> dict[str, Any]:
    """The store's columns for one row (verdict columns filled by the caller)."""
    return {"row_check": row["row_check"], "run_id": run_id, "cell": cell.path, "experiment": row["experiment"],
            "kernel": row["kernel"], "variant": row["variant"], "status": row["status"],
            "kernel_ms": _float(row["kernel_ms"]), "kernel_ms_iqr": _float(row["kernel_ms_iqr"]),
            "finished_at": row["finished_at"] or row["started_at"] or "", "git_commit": row["git_commit"],
            "code_version": row["code_version"], "kernel_hash": kernel_hash, "config_hash": config_hash(cell),
            "gpu_uuid": row["gpu_uuid"], "row_json": _json(row)}


def _json(row: dict[str, str]) -> str:
    return json.dumps(row, separators=(",", ":"))


def record(results_dir: str | Path, cells: list[Cell], device: str, run_id: str | None = None,
           timeout_s: float = store.BUSY_TIMEOUT_S) -> Recorded:
    """Add the rows of ``cells`` that are not kept yet to results_dir/history.sqlite, judge them,
    and write the verdict files. Never raises for a database that cannot be used: it warns."""
    results_dir = Path(results_dir)
    run_id = run_id or new_run_id()
    warnings: list[str] = []
    path = store.database_path(results_dir)
    connection = None
    writable = True
    try:
        connection, opened = store.open_for_writing(path, timeout_s)
        warnings += opened
    except store.HistoryUnavailable as error:
        writable = False
        warnings.append(f"history not recorded: {error}; the rows stay in {results_dir}/cells and the next run "
                        "that records adds them")
        try:
            connection = store.open_for_reading(path)
        except store.HistoryUnavailable:
            connection = None
    try:
        rows = read_rows(cells)
        known = store.known_checks(connection, [row["row_check"] for _, row in rows]) if connection else set()
        hashes = KernelHashes()
        fresh = [measurement_of(cell, row, run_id, hashes(cell.kernel, cell.backend))
                 for cell, row in rows if row["row_check"] not in known]
        previous = store.latest_ok(connection, [m["cell"] for m in fresh]) if connection else {}
        verdicts = []
        for measurement in fresh:
            judged = judge(measurement, previous.get(measurement["cell"]))
            measurement.update(verdict=judged.verdict, ratio=judged.ratio, previous=judged.previous_check,
                               changed=";".join(judged.changed))
            verdicts.append(judged)
        added = 0
        if writable and connection is not None and fresh:
            commits = Counter(m["git_commit"] for m in fresh)
            try:
                added = store.add_run(connection, run_id, commits.most_common(1)[0][0], socket.gethostname(), fresh)
            except store.HistoryUnavailable as error:
                warnings.append(f"history not recorded: {path}: {error}; the rows stay in {results_dir}/cells and "
                                "the next run that records adds them")
    finally:
        if connection is not None:
            connection.close()
    details = write_verdicts(results_dir, run_id, verdicts)
    return Recorded(run_id, verdicts, summary_lines(verdicts, device, run_id, details), added, warnings)


def write_verdicts(results_dir: Path, run_id: str, verdicts: list[CellVerdict]) -> str:
    """verdicts/<run>.csv (when there are any) and verdicts/latest.csv; returns the path to read."""
    folder = results_dir / VERDICTS_DIR
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(csv_records(verdicts))
    if verdicts:
        write_text_atomically(folder / f"{run_id}.csv", text.getvalue())
    write_text_atomically(folder / "latest.csv", text.getvalue())
    return str(folder / f"{run_id}.csv") if verdicts else str(folder / "latest.csv")
