"""The results database keeps every row whole in under 1 KB on disk: each row's JSON is packed
against a dictionary kept in the file, a database of the previous layout is packed once with
every row as it was, and a damaged packed row costs its JSON, never the database."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest
from test_history import DEVICE, TINY, record, results_of, write_rows

from convlab.history import rowpack, store
from convlab.plan.config import load_config
from convlab.plan.grid import build_cells


@pytest.fixture
def lab(tmp_path, monkeypatch):
    """A working folder with six of the tiny grid's cells (test_history.write_rows writes their rows)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path, build_cells(load_config(TINY), "cpu", DEVICE)[:6]


def _previous_layout(path, rows: list[dict]) -> None:
    """A database as the convlab before packing kept it: schema version 3, each row's JSON as text."""
    connection = sqlite3.connect(path)
    for step in range(3):
        connection.executescript(f"BEGIN; {store.MIGRATIONS[step]} PRAGMA user_version = {step + 1}; COMMIT;")
    with connection:
        connection.execute("INSERT INTO runs VALUES ('run1', '2026-11-01T00:00:00', 'c0ffee', 'host', ?)", (len(rows),))
        connection.executemany(
            "INSERT INTO measurements (row_check, run_id, cell, kernel, status, kernel_ms, row_json) "
            "VALUES (?, 'run1', ?, ?, 'ok', ?, ?)",
            [(row["row_check"], row["cell"], row["kernel"], 1.0, row["json"]) for row in rows])
    connection.close()


def _row_json(number: int) -> str:
    row = {"experiment": "conv2d", "kernel": f"k{number % 7}", "variant": "block~16", "size": str(128 << number % 6),
           "kernel_ms": f"{0.01 * (1 + number):.6f}", "phase_ms": f"startup=20;timing={number}",
           "gpu_uuid": "GPU-9cf12a44-6b1c-633d-4cb9-cf954ab9c9f6", "row_check": f"{number:016x}",
           **{f"column_{i}": "" for i in range(60)}}
    return json.dumps(row, separators=(",", ":"))


def test_pack_gives_back_the_row_byte_for_byte_and_refuses_what_is_not_a_packed_row():
    dictionary = _row_json(0).encode()
    for text in (_row_json(5), "{}", "not json at all", "é" * 3000):
        assert rowpack.unpack(rowpack.pack(text, dictionary), dictionary) == text
    packed = rowpack.pack(_row_json(5), dictionary)
    assert len(packed) < len(_row_json(5)) / 4  # the row differs from its dictionary in a few values
    for damaged in (b"\xff" * 40, packed[: len(packed) // 2]):
        with pytest.raises(ValueError):
            rowpack.unpack(damaged, dictionary)


def _pages(path) -> tuple[int, int]:
    connection, _ = store.open_for_writing(path)
    try:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return tuple(connection.execute(f"PRAGMA {name}").fetchone()[0] for name in ("page_count", "page_size"))
    finally:
        connection.close()


def test_rows_take_under_1_kb_each_on_disk(lab):
    """What each further run's rows add to the file (the tables' first pages aside)."""
    folder, cells = lab
    path = store.database_path(results_of(folder))
    for number in range(22):
        if number == 2:
            start, _ = _pages(path)
        write_rows(cells, 1.0 + number / 100)
        record(results_of(folder), cells, DEVICE)
    end, page_size = _pages(path)
    connection = store.open_for_reading(path)
    try:
        kept = {m.row_check: m.row for m in store.measurements(connection)}
    finally:
        connection.close()
    assert len(kept) == 22 * len(cells)
    assert all(row["kernel"] and row["row_check"] == check for check, row in kept.items())  # each row whole
    assert (end - start) * page_size / (20 * len(cells)) < 1024


def test_a_database_of_the_previous_layout_is_packed_once_with_every_row_as_it_was(tmp_path):
    path = tmp_path / "history.sqlite"
    rows = [{"row_check": f"{n:016x}", "cell": f"results/h200/cells/conv2d/k{n % 7}/{n}.csv", "kernel": f"k{n % 7}",
             "json": _row_json(n)} for n in range(400)]
    rows.append({"row_check": "f" * 16, "cell": "results/h200/cells/odd.csv", "kernel": "odd", "json": "not json"})
    _previous_layout(path, rows)
    before = os.path.getsize(path)
    connection, warnings = store.open_for_writing(path)
    try:
        assert warnings == [] and connection.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION
        kept = {m.row_check: m.row_json for m in store.measurements(connection)}
        dictionaries = connection.execute("SELECT count(*) FROM row_dictionaries").fetchone()[0]
    finally:
        connection.close()
    assert kept == {row["row_check"]: row["json"] for row in rows}
    assert dictionaries == 2  # one per set of columns: the rows', and the one that is not JSON
    assert os.path.getsize(path) < before / 3


def test_a_damaged_packed_row_loses_its_json_and_nothing_else(lab):
    folder, cells = lab
    write_rows(cells, 1.0)
    record(results_of(folder), cells, DEVICE)
    path = store.database_path(results_of(folder))
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE measurements SET row_packed = x'00ff00ff' WHERE cell = ?", (cells[0].path,))
    connection = store.open_for_reading(path)
    try:
        kept = {m.cell: m for m in store.measurements(connection)}
    finally:
        connection.close()
    assert len(kept) == len(cells)
    assert kept[cells[0].path].row_json is None and kept[cells[0].path].row == {}
    assert kept[cells[0].path].kernel_ms == pytest.approx(1.0)
    assert all(kept[cell.path].row["kernel"] == cell.kernel for cell in cells[1:])
    write_rows(cells, 1.1)  # the next run still judges every cell against what was kept
    assert len(record(results_of(folder), cells, DEVICE).verdicts) == len(cells)


def test_a_cell_is_judged_by_its_recent_measurements_and_only_the_last_is_unpacked(lab):
    folder, cells = lab
    for number in range(6):
        write_rows(cells, 1.0 + number / 100)
        record(results_of(folder), cells, DEVICE)
    connection = store.open_for_reading(store.database_path(results_of(folder)))
    try:
        everything = store.measurements(connection, cell=cells[0].path)
        recent = store.ok_history(connection, [cells[0].path], recent=3)[cells[0].path]
    finally:
        connection.close()
    assert [m.row_check for m in recent] == [m.row_check for m in everything[-3:]]
    assert [m.kernel_ms for m in recent] == sorted(m.kernel_ms for m in recent)  # oldest first
    assert [m.row_json is None for m in recent] == [True, True, False]
    assert recent[-1].row == everything[-1].row


class _FullDisk:
    """A connection whose VACUUM finds no room for its copy."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection

    def execute(self, sql: str, *args):
        if sql.strip().upper() == "VACUUM":
            raise sqlite3.OperationalError("database or disk is full")
        return self.connection.execute(sql, *args)


def test_a_file_that_cannot_shrink_keeps_its_rows_and_free_pages(tmp_path):
    path = tmp_path / "history.sqlite"
    _previous_layout(path, [{"row_check": f"{n:016x}", "cell": f"c{n}", "kernel": "k", "json": _row_json(n)}
                            for n in range(50)])
    connection = sqlite3.connect(path)
    try:
        assert store.shrink(_FullDisk(connection)) is False
        assert store.shrink(connection) is True
        assert connection.execute("SELECT count(*) FROM measurements").fetchone()[0] == 50
    finally:
        connection.close()

