"""Which of a run's re-measured cells can be measured side by side with their previous kernel
version.

A cell is paired when this run measured it ``ok``, its latest earlier ``ok`` measurement ran other
kernel files, and the database keeps those files as a kernel that can run again (a source
kernel's description and .cu; convlab.history.kernelversions). The pairs are measured by the
`pair` step on the device (convlab.run.paired) before the record step, which judges a paired cell
by its interval instead of by its history (convlab.history.pairfile); every other cell keeps the
history's rule. The step only reads the database: the record step stays its one writer.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from convlab.history import store
from convlab.history.kernelversions import restore_kernel_version
from convlab.history.record import KernelHashes, found_rows
from convlab.measure.row import finite_number
from convlab.plan.cell import Cell


@dataclass(frozen=True)
class Candidate:
    """A cell to pair: the cell, its kernel's current hash and the previous measurement's."""

    cell: Cell
    kernel_hash: str
    previous_hash: str
    previous_ms: float | None
    service_ms: float | None  # what measuring the cell took this run: the cost a pair is held against
    previous_module: str = ""  # the machine code each row says it ran (empty: none recorded)
    new_module: str = ""
    new_ms: float | None = None
    previous_row: Mapping[str, object] = field(default_factory=dict)  # each side's whole row, as recorded
    new_row: Mapping[str, object] = field(default_factory=dict)


def candidates(results_dir: str | Path, cells: list[Cell], run_id: str) -> tuple[list[Candidate], sqlite3.Connection | None]:
    """The cells of ``run_id`` to pair, and the database open for reading (None where there is
    none yet: a first run pairs nothing). The caller closes it."""
    try:
        connection = store.open_for_reading(store.database_path(results_dir))
    except store.HistoryUnavailable:
        return [], None
    found, _ = found_rows(Path(results_dir), cells)
    known = store.known_checks(connection, list(found))
    fresh = [entry for check, entry in found.items()
             if check not in known and entry.run_id == run_id and entry.row.get("status") == "ok"]
    history = store.ok_history(connection, [entry.cell.path for entry in fresh])
    hashes = KernelHashes()
    chosen = []
    for entry in fresh:
        earlier = history.get(entry.cell.path) or []
        if not earlier:
            continue
        previous = earlier[-1]
        current = hashes(entry.cell.kernel, entry.cell.backend)
        if previous.kernel_hash and current and previous.kernel_hash != current:
            previous_row = recorded_row(previous.row_json)
            chosen.append(Candidate(entry.cell, current, previous.kernel_hash, previous.kernel_ms,
                                    finite_number(entry.row.get("service_ms")),
                                    str(previous_row.get("module_hash") or ""), entry.row.get("module_hash") or "",
                                    finite_number(entry.row.get("kernel_ms")), previous_row, dict(entry.row)))
    return chosen, connection


def recorded_row(row_json: str | None) -> dict[str, object]:
    """A kept row's columns (none where its JSON cannot be read)."""
    try:
        row = json.loads(row_json or "{}")
    except ValueError:
        return {}
    return row if isinstance(row, dict) else {}


def restore_previous(connection: sqlite3.Connection, candidate: Candidate, versions_dir: Path,
                     twins: bool = False) -> tuple[Path, str]:
    """The previous version's kernel folder (written once per version) and the name it is
    registered under there. VersionUnavailable where it cannot run again. ``twins``: a cpu twin's
    version runs again too (where the new version is a copy of its files as well: a preview)."""
    folder = versions_dir / f"{candidate.cell.kernel}@{candidate.previous_hash}"
    name = restore_kernel_version(connection, candidate.cell.kernel, candidate.previous_hash, folder, twins)
    return folder, name
