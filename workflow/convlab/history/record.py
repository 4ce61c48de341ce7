"""The record step: add this run's new rows to the device's results database and say, per
kernel, whether the re-measured cells got faster or slower.

It is the database's one writer. It reads the rows that jobs placed and no record step has added
yet (results/<device>/unrecorded/, see convlab.measure.rowjournal) and the grid's row files (a row
already kept is skipped, a damaged one is never read), judges each new row against the cell's
previous ``ok`` measurement, adds them all in one transaction, and writes the verdicts to
results/<device>/verdicts/ (<run>.csv, latest.csv, latest.txt). The verdicts are about the cells a
job of this run measured; rows that earlier runs measured but could not record, and rows on disk
that no job placed, are added with a line each. A database that cannot be written (locked by
another run, read-only, a full disk) costs one `warning:` line and no row: the rows wait in
unrecorded/, whatever happens to their cells' files, and the next run that records adds them.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from convlab.atomicfile import write_text_atomically
from convlab.codeversion import file_contents, fingerprint_contents
from convlab.history import store
from convlab.history.noise import cell_noise
from convlab.history.pairfile import PairRow
from convlab.history.rebuild import Rebuilt, database_damage, rebuild
from convlab.history.verdicts import CellVerdict, csv_text, judge, summary_lines
from convlab.history.waiting import clear_reason, note_reason
from convlab.measure.row import COLUMNS, DamagedRow, OtherFormat, read_row_file
from convlab.measure.rowjournal import FOLDER, UnrecordedRow, forget, new_run_id, unrecorded_rows
from convlab.paths import REPO_ROOT
from convlab.pictures.source import picture_hash
from convlab.plan.cell import Cell
from convlab.plan.cpusources import keep_sources
from convlab.plan.registry import load_registry

VERDICTS_DIR = "verdicts"
# the validated config of the run that recorded last, under results/<device>/
RUN_CONFIG = f"{VERDICTS_DIR}/config.json"
UNRECORDED_NOTE = f"{FOLDER}/"


@dataclass
class Recorded:
    """What one record step did: its run, the verdicts of the rows it found new, the lines to
    print, and its warnings."""

    run_id: str
    verdicts: list[CellVerdict]
    lines: list[str]
    added: int
    warnings: list[str] = field(default_factory=list)


def kept_spec_hash(cell: Cell) -> str:
    """The cell's spec_hash (the settings that shaped it) as a measurement keeps it."""
    return cell.spec_hash[:store.SPEC_HASH_DIGITS]


class KernelHashes:
    """The hash of each kernel's own files (.cu/.yaml, library wrapper or cpu twin), once each, and
    the bytes it was made from (``versions``), which the database keeps beside it."""

    def __init__(self) -> None:
        self.registry = load_registry()
        self.known: dict[tuple[str, str], str] = {}
        self.versions: dict[str, list[tuple[str, bytes | None]]] = {}

    def __call__(self, kernel: str, backend: str) -> str:
        key = (kernel, backend)
        if key not in self.known:
            spec = self.registry.get(kernel)
            if spec is None:
                self.known[key] = ""
            else:
                contents = file_contents(spec.files(backend), root=REPO_ROOT)
                self.known[key] = fingerprint_contents(contents)
                self.versions[self.known[key]] = contents
        return self.known[key]


def read_rows(cells: list[Cell]) -> list[tuple[Cell, dict[str, str]]]:
    """Each cell's row, where its file is a whole row of the current format."""
    rows = []
    for cell in cells:
        values = _read(cell.path)
        if values is not None:
            rows.append((cell, values))
    return rows


def _read(path: str | Path) -> dict[str, str] | None:
    try:
        return dict(zip(COLUMNS, read_row_file(path)))
    except (FileNotFoundError, DamagedRow, OtherFormat):
        return None


def _float(text: str) -> float | None:
    try:
        return float(text) if text != "" else None
    except ValueError:
        return None


class InputHashes:
    """The hash of each picture a cell reads (empty for cells on random data), once each."""

    def __init__(self) -> None:
        self.known: dict[str, str] = {}

    def __call__(self, cell: Cell) -> str:
        if not cell.image:
            return ""
        if cell.image not in self.known:
            try:
                self.known[cell.image] = picture_hash(cell.image)
            except OSError:
                self.known[cell.image] = ""
        return self.known[cell.image]


def measurement_of(cell: Cell, row: dict[str, str], run_id: str, kernel_hash: str,
                   input_hash: str = "") -> dict[str, Any]:
    """The store's columns for one row (verdict columns filled by the caller)."""
    return {"row_check": row["row_check"], "run_id": run_id, "cell": cell.path, "experiment": row["experiment"],
            "kernel": row["kernel"], "variant": row["variant"], "status": row["status"],
            "kernel_ms": _float(row["kernel_ms"]), "kernel_ms_iqr": _float(row["kernel_ms_iqr"]),
            "finished_at": row["finished_at"] or row["started_at"] or "", "git_commit": row["git_commit"],
            "code_version": row["code_version"], "kernel_hash": kernel_hash, "spec_hash": kept_spec_hash(cell),
            "gpu_uuid": row["gpu_uuid"], "row_json": _json(row), "input_hash": input_hash}


def _json(row: dict[str, str]) -> str:
    return json.dumps(row, separators=(",", ":"))


@dataclass
class Found:
    """A row the record step found: its cell, its values, the run whose job placed it (None for a
    row on disk that no job of a run placed), and its links in unrecorded/."""

    cell: Cell
    row: dict[str, str]
    run_id: str | None
    links: list[UnrecordedRow] = field(default_factory=list)


def found_rows(results_dir: Path, cells: list[Cell]) -> tuple[dict[str, Found], list[UnrecordedRow]]:
    """Every row to consider, by its check: those waiting in unrecorded/ (for cells of this grid),
    then the grid's row files; and the waiting links that can never be added (damaged)."""
    by_tail = {cell.path.partition("/cells/")[2]: cell for cell in cells}
    found: dict[str, Found] = {}
    unreadable = []
    for link in unrecorded_rows(results_dir):
        cell = by_tail.get(link.cell_tail)
        if cell is None:
            continue  # a cell of another grid: it waits for a run of that grid
        row = _read(link.file)
        if row is None:
            unreadable.append(link)
            continue
        entry = found.setdefault(row["row_check"], Found(cell, row, link.run_id))
        entry.links.append(link)
    for tail, cell in by_tail.items():
        # under results_dir, not the cell's relative path: a warm service shared by two checkouts of
        # the same code runs this in the other one's directory
        row = _read(results_dir / "cells" / tail)
        if row is not None:
            found.setdefault(row["row_check"], Found(cell, row, None))
    return found, unreadable


@dataclass
class Added:
    """What adding the rows found did: the rows new to the database (oldest first), the verdicts of
    those a job of the run placed, how many were added, the warnings, and the rebuild of a damaged
    database where there was one."""

    fresh: list[Found]
    verdicts: list[CellVerdict]
    added: int
    warnings: list[str]
    rebuilt: Rebuilt | None = None


def add_rows(results_dir: Path, cells: list[Cell], run_id: str, damage: str | None, timeout_s: float,
             threshold: float, pairs: Mapping[str, PairRow] | None = None) -> Added:
    """Add the rows found (found_rows) that the database lacks, each judged against the cell's
    previous measurement: record()'s work without its files (``threshold``: config
    verdicts.threshold, as record() takes it). ``damage``: why the database is
    damaged (convlab.history.rebuild), or None; a damaged one is first moved aside and started
    again from what can be read. Never raises for a database that cannot be used: it warns, and
    the rows wait in unrecorded/ (with the reason, which `convlab history` gives)."""
    pairs = pairs or {}
    warnings: list[str] = []
    path = store.database_path(results_dir)
    rebuilt = None
    if damage is not None:
        try:
            rebuilt = rebuild(path, damage, timeout_s)
        except (store.HistoryUnavailable, OSError) as error:
            warnings.append(f"{path} is damaged ({damage}) and could not be started again: {error}")
    connection = None
    failure = None
    try:
        connection, opened = store.open_for_writing(path, timeout_s)
        warnings += opened
    except store.HistoryUnavailable as error:
        failure = str(error)
        try:
            connection = store.open_for_reading(path)
        except store.HistoryUnavailable:
            connection = None
    added = 0
    try:
        found, unreadable = found_rows(results_dir, cells)
        known = store.known_checks(connection, list(found)) if connection else set()
        hashes, inputs = KernelHashes(), InputHashes()
        fresh = sorted((entry for check, entry in found.items() if check not in known),
                       key=lambda entry: entry.row["finished_at"] or entry.row["started_at"])
        measurements = [measurement_of(entry.cell, entry.row, entry.run_id or run_id,
                                       hashes(entry.cell.kernel, entry.cell.backend), inputs(entry.cell))
                        for entry in fresh]
        for entry, measurement in zip(fresh, measurements):
            if entry.run_id is None:
                # a row on disk that no recorded run placed (its journal or the database deleted, a
                # copy, a hand), read again from its file: which kernel files, settings and picture
                # it ran is not known, so no later verdict names a change against it
                measurement.update(kernel_hash=None, spec_hash=None, input_hash=None)
        history = store.ok_history(connection, [m["cell"] for m in measurements]) if connection else {}
        verdicts = []
        for entry, measurement in zip(fresh, measurements):
            earlier = history.setdefault(measurement["cell"], [])
            previous = earlier[-1] if earlier else None
            pair = pairs.get(measurement["cell"]) if entry.run_id == run_id else None
            if pair is not None and (previous is None or pair.previous_hash != previous.kernel_hash
                                     or pair.kernel_hash != measurement["kernel_hash"]):
                pair = None  # measured against another version than the one this row follows
            judged = judge(measurement, previous, cell_noise(earlier, threshold), pair, threshold=threshold)
            measurement.update(verdict=judged.verdict, ratio=judged.ratio.value, previous=judged.previous_check,
                               changed=";".join(judged.changed))
            if measurement["status"] == "ok" and measurement["kernel_ms"]:
                # a cell measured by several runs none of which recorded: each against the one before
                earlier.append(store.Measurement(**{name: measurement.get(name) for name in store.MEASUREMENT_FIELDS}))
            if entry.run_id == run_id:
                verdicts.append(judged)
        if failure is None and connection is not None:
            try:
                versions = {m["kernel_hash"]: hashes.versions[m["kernel_hash"]] for m in measurements
                            if m["kernel_hash"] in hashes.versions}
                added = (store.add_measurements(connection, socket.gethostname(), measurements, versions)
                         if measurements else 0)
                clear_reason(results_dir)
                forget([link for entry in found.values() for link in entry.links] + unreadable)
            except store.HistoryUnavailable as error:
                failure = f"{path}: {error}"
    finally:
        if connection is not None:
            connection.close()
    waiting = sum(1 for entry in fresh if entry.links)
    if failure is not None:
        warnings.append(f"history not recorded: {failure}; {waiting} rows wait in {results_dir}/{UNRECORDED_NOTE} "
                        "and the next run that can write it adds them")
        if waiting:
            note_reason(results_dir, failure)
    if rebuilt is not None:
        stored = failure is None
        from_files = sum(1 for entry in fresh if entry.run_id is None) if stored else 0
        earlier_runs = sum(1 for entry in fresh if entry.run_id not in (None, run_id)) if stored else 0
        warnings.insert(0, rebuilt.line(from_files, earlier_runs))
    return Added(fresh, verdicts, added, warnings, rebuilt)


def record(results_dir: str | Path, cells: list[Cell], device: str, threshold: float, run_id: str | None = None,
           timeout_s: float = store.BUSY_TIMEOUT_S, pairs: dict[str, PairRow] | None = None,
           config: Mapping[str, Any] | None = None) -> Recorded:
    """Add the rows of ``cells`` that are not kept yet to results_dir/history.sqlite, judge them,
    and write the verdict files; the verdicts are those of the rows jobs of ``run_id`` placed.
    ``threshold``: the least floor of a cell whose reruns gave it its own, and the change a paired
    cell's interval is judged against (config verdicts.threshold). ``pairs``: the run's side-by-side
    measurements by cell (paired.csv). ``config``: the run's grid, kept beside the verdicts (what
    `check-verdicts` samples its cells from). The database is checked in full first (a damaged one
    is rebuilt). The verdict files have no other writer. Never raises for a database that cannot be
    used: it warns."""
    results_dir = Path(results_dir)
    run_id = run_id or new_run_id()
    damage = database_damage(store.database_path(results_dir))
    done = add_rows(results_dir, cells, run_id, damage, timeout_s, threshold, pairs)
    fresh, verdicts = done.fresh, done.verdicts
    details = write_verdicts(results_dir, run_id, verdicts)
    keep_sources(results_dir, [entry.cell for entry in fresh], cells, load_registry())
    lines = summary_lines(verdicts, device, run_id, details) + other_rows_lines(fresh, run_id, rebuilt=done.rebuilt is not None)
    write_text_atomically(results_dir / VERDICTS_DIR / "latest.txt", "\n".join(lines) + "\n")
    if config is not None:
        write_text_atomically(results_dir / RUN_CONFIG, json.dumps(config, sort_keys=True) + "\n")
    return Recorded(run_id, verdicts, lines, done.added, done.warnings)


def other_rows_lines(fresh: list[Found], run_id: str, lead: str = "  also recorded", rebuilt: bool = False) -> list[str]:
    """A line for the new rows no job of this run measured: those of earlier runs that could not
    record them, and those no job placed (written by hand, or by an older convlab). None after a
    rebuild, whose own line counts them truthfully (the rows on disk were kept in the damaged one)."""
    if rebuilt:
        return []
    earlier = sorted({entry.run_id for entry in fresh if entry.run_id not in (None, run_id)})
    lines = []
    if earlier:
        count = sum(entry.run_id in earlier for entry in fresh)
        lines.append(f"{lead}: {count} rows that earlier runs measured but could not record "
                     f"(run {', '.join(earlier)})")
    unplaced = sum(entry.run_id is None for entry in fresh)
    if unplaced:
        lines.append(f"{lead}, without a verdict: {unplaced} rows on disk that no recorded run placed (a "
                     "deleted journal or database, or rows copied in), read again from their cells' files")
    return lines


def write_verdicts(results_dir: Path, run_id: str, verdicts: list[CellVerdict]) -> str:
    """verdicts/<run>.csv (when there are any) and verdicts/latest.csv; returns the path to read."""
    folder = results_dir / VERDICTS_DIR
    text = csv_text(verdicts)
    if verdicts:
        write_text_atomically(folder / f"{run_id}.csv", text)
    write_text_atomically(folder / "latest.csv", text)
    return str(folder / f"{run_id}.csv") if verdicts else str(folder / "latest.csv")
