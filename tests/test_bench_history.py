"""The history benchmark (`python -m convlab bench-history`): the database it grows keeps every
row and run under new keys, its table, its arguments, and (pipeline tier) the real command on the
tiny cpu grid."""

from __future__ import annotations

import dataclasses
import json
import sqlite3

import pytest
from test_figures_honest import _measurement
from workflow_helpers import TINY, convlab, copy_repo

from convlab.bench.history import STEPS, Grown, Timings, format_table, grow_database
from convlab.history import store


def test_a_grown_database_copies_every_run_under_new_keys(tmp_path):
    path = store.database_path(tmp_path / "h100")
    kept = [dataclasses.replace(_measurement(run, "k", cell, 1.0 + run / 10), run_id=f"run{run}",
                                row_json=json.dumps({"cell": cell, "kernel_ms": 1.0 + run / 10}))
            for run in (1, 2) for cell in "abc"]
    connection, _ = store.open_for_writing(path)
    try:
        store.add_measurements(connection, "host", [dataclasses.asdict(m) for m in kept])
    finally:
        connection.close()
    grown = grow_database(path, 20)
    assert (grown.rows, grown.runs) == (24, 8) and grown.bytes_per_row > 0  # three copies of the two runs
    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT count(DISTINCT row_check) FROM measurements").fetchone()[0] == 24
        assert connection.execute("SELECT count(DISTINCT cell) FROM measurements").fetchone()[0] == 3
        last = connection.execute("SELECT run_id FROM runs ORDER BY rowid DESC LIMIT 1").fetchone()[0]
    assert last == "run2-copy3"
    connection = store.open_for_reading(path)
    try:  # each copy's rows read back whole
        copied = store.measurements(connection, run_ids=[last])
    finally:
        connection.close()
    assert sorted((m.row["cell"], m.row["kernel_ms"]) for m in copied) == [(cell, 1.2) for cell in "abc"]


def test_the_table_gives_each_steps_medians_and_their_ratio_against_the_target():
    timings = Timings()
    for side, seconds in (("fresh", (10.0, 12.0, 11.0)), ("grown", (11.0, 13.0, 12.0))):
        for value in seconds:
            for step in STEPS:
                timings.add(side, step, value / (1 + STEPS.index(step)))
    table = format_table(timings, Grown(200_016, 5556, 870.4), "heading")
    lines = table.splitlines()
    assert lines[0] == "heading" and "200016 rows of 5556 runs, 870 bytes a row" in lines[1]
    assert all(f"{12 / 11:.2f}  met (≤ 1.10)" in line for line in lines[3:6])
    assert lines[-1].startswith("medians of 3 rounds")


def test_bad_arguments_are_one_line(tmp_path):
    result = convlab("bench-history", "--rows", "0", cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.strip() == "error: --rows and --rounds must be at least 1"


@pytest.mark.pipeline
def test_bench_history_on_the_tiny_cpu_grid(tmp_path):
    checkout = copy_repo(tmp_path / "repo")
    (tmp_path / "tmp").mkdir()
    result = convlab("bench-history", "--checkout", str(checkout), "--configfile", TINY, "--rows", "400",
                     "--rounds", "1", cwd=tmp_path, service=None, timeout=900, TMPDIR=str(tmp_path / "tmp"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[1].startswith("grown database: 432 rows of 12 runs")  # the first run's 36 rows, 12 times
    assert [line.split("  ")[0] for line in lines[3:6]] == list(STEPS)
    assert not list((tmp_path / "tmp").glob("convlab-bench-*"))  # its scratch folder is removed
