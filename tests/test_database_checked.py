"""Every run checks the results database, a run with nothing to do too: a damaged one (cut short,
overwritten) is moved aside with one line and started again from what can be read, its rows
labelled for what they are; rows that wait in unrecorded/ are added by the next run that can write
the database, and `convlab history` says how many wait and why (cpu backend; the real workflow in
the pipeline tier)."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from workflow_helpers import (
    RESULTS,
    TINY,
    FinishedRun,
    assert_no_traceback,
    convlab,
    copy_finished_run,
    snakemake,
    terminal_lines,
)

from convlab.history import store
from convlab.history.listing import history_lines
from convlab.history.rebuild import database_damage
from convlab.history.record import record
from convlab.measure.row import build_row, read_row_file, write_row_atomically
from convlab.measure.rowjournal import keep_unrecorded
from convlab.paths import REPO_ROOT
from convlab.plan.config import load_config
from convlab.plan.grid import build_cells
from convlab.snakefile.database import check_results_database

DEVICE = "testcpu"
THRESHOLD = 0.02  # config verdicts.threshold's default
HAND_LABEL = "written by hand"


@pytest.fixture
def lab(tmp_path, monkeypatch):
    """A working folder with the tiny grid's cells of DEVICE (the tests write their rows)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path / "results" / DEVICE, build_cells(load_config(REPO_ROOT / TINY), "cpu", DEVICE)[:12]


def plant(cells, run_id: str, ms: float, hour: int = 10) -> None:
    """The rows of ``cells`` as a run's jobs place them at ``hour``: at the cell's path, linked under
    the run."""
    for index, cell in enumerate(cells):
        kernel_ms = ms * (1 + index / 10)
        values = {"experiment": cell.experiment, "kernel": cell.kernel, "variant": cell.variant, "backend": "cpu",
                  "size": cell.size, "stride": cell.stride, "filter_size": cell.filter_size, "batch": cell.batch,
                  "padding": cell.padding, "status": "ok", "git_commit": "c0ffee", "code_version": "abc",
                  "kernel_ms": kernel_ms, "kernel_ms_iqr": kernel_ms / 100, "reps": 20, "max_rel_err": 1e-7,
                  "tolerance": 1e-4, "flops": 1000, "gflops": 1000 / kernel_ms / 1e6, "device": "cpu",
                  "started_at": f"2026-11-24T{hour}:00:{index:02d}", "finished_at": f"2026-11-24T{hour}:00:{index + 1:02d}",
                  "implementation": "planted " + "x" * 3000}  # a few pages of database per row
        write_row_atomically(build_row([values]), cell.path)
        keep_unrecorded(cell.path, run_id)


def recorded_three_runs(results: Path, cells, runs: int = 3) -> Path:
    """A database that three runs (or ``runs``) recorded, checkpointed into its file (no write-ahead log left)."""
    for number, ms in enumerate([1.0, 1.5] * (runs // 2) + [1.0] * (runs % 2)):
        run_id = f"20261124T10{number:03d}-run{number}"
        plant(cells, run_id, ms, hour=10 + number)
        assert record(results, cells, DEVICE, THRESHOLD, run_id=run_id).added == len(cells)
    path = store.database_path(results)
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


def kept(path: Path, query: str = "SELECT count(*) FROM measurements") -> int:
    with sqlite3.connect(path) as connection:
        return connection.execute(query).fetchone()[0]


def cut(path: Path, share: float = 0.6) -> None:
    os.truncate(path, int(path.stat().st_size * share))


def overwrite(path: Path) -> None:
    path.write_bytes(os.urandom(path.stat().st_size))
    for side in ("-wal", "-shm"):
        Path(f"{path}{side}").unlink(missing_ok=True)


def page_of(path: Path, table: str) -> int:
    with sqlite3.connect(path) as connection:
        return connection.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]


# ---------------------------------------------------------------------------------------------
# The check


def test_a_whole_database_and_none_at_all_pass_the_check(lab):
    results, cells = lab
    path = recorded_three_runs(results, cells)
    assert database_damage(path, budget_s=0.2) is None
    assert database_damage(results / "absent.sqlite") is None


@pytest.mark.parametrize(("damage", "why"), [
    (cut, "cut short: "),
    (overwrite, "not a SQLite database: its first bytes are not SQLite's header"),
    (lambda path: path.write_bytes(b""), "empty (0 bytes)"),
])
def test_a_cut_overwritten_or_emptied_database_is_damaged_saying_how(lab, damage, why):
    results, cells = lab
    path = recorded_three_runs(results, cells)
    damage(path)
    assert database_damage(path).startswith(why)


def test_a_page_overwritten_inside_the_file_is_found_by_sqlites_check(lab):
    results, cells = lab
    path = recorded_three_runs(results, cells)
    page_size = kept(path, "PRAGMA page_size")
    with open(path, "r+b") as handle:
        handle.seek((page_of(path, "measurements_by_run") - 1) * page_size)
        handle.write(b"\xff" * 64)
    assert database_damage(path, budget_s=5.0)


def test_the_check_before_a_run_stops_at_its_budget(tmp_path):
    """SQLite's check of a large database, cut short by a budget far below what it takes in full."""
    path = tmp_path / "large.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE large (data BLOB)")
        connection.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000) "
                           "INSERT INTO large SELECT randomblob(3000) FROM n")
    whole = []
    for budget in (None, 0.001):
        started = time.perf_counter()
        assert database_damage(path, budget_s=budget) is None
        whole.append(time.perf_counter() - started)
    full, budgeted = whole
    assert budgeted < full / 4, (full, budgeted)


# ---------------------------------------------------------------------------------------------
# The rebuild, and what its rows are called


def test_a_cut_database_is_rebuilt_from_what_can_be_read_and_the_rows_on_disk(lab):
    results, cells = lab
    # rows are kept packed, a few to a page: eight runs' rows fill most of the file, so that the cut
    # falls among them
    path = recorded_three_runs(results, cells, runs=8)
    files = kept(path, "SELECT count(*) FROM kernel_files")
    cut(path)
    done = record(results, cells, DEVICE, THRESHOLD, run_id="20261124T110000-next")
    (line,) = done.warnings
    assert line.startswith(f"{path} was damaged (cut short: ") and "moved it to " in line
    moved = Path(line.split("moved it to ")[1].split(" and started")[0])
    assert moved.is_file() and moved.name.startswith("history.sqlite.corrupt-")
    read_back = int(line.split("started a new one with ")[1].split(" rows of ")[0])
    assert 0 < read_back < 8 * len(cells)
    assert "(the rest could not be read)" in line
    assert not any(HAND_LABEL in text for text in done.lines + done.warnings)
    # what could be read keeps its runs; every row on disk is kept again, those not read back as
    # rows read again from their cells' files
    read_again = re.search(r"; (\d+) rows measured before that it no longer gave back", line)
    again = int(read_again.group(1)) if read_again else 0
    assert kept(path) == read_back + again
    on_disk = [read_row_file(cell.path)[-1] for cell in cells]
    marks = ",".join("?" * len(on_disk))
    with sqlite3.connect(path) as connection:
        assert connection.execute(f"SELECT count(*) FROM measurements WHERE row_check IN ({marks})",
                                  on_disk).fetchone()[0] == len(cells)
        runs = [run for (run,) in connection.execute("SELECT run_id FROM runs ORDER BY rowid")]
        assert runs[0] == "20261124T10000-run0"
        assert connection.execute("SELECT count(*) FROM kernel_files").fetchone()[0] <= files
    assert database_damage(path) is None


def test_an_overwritten_database_is_started_again_from_the_rows_on_disk_named_for_what_they_are(lab):
    results, cells = lab
    path = recorded_three_runs(results, cells)
    overwrite(path)
    done = record(results, cells, DEVICE, THRESHOLD, run_id="20261124T110000-next")
    (line,) = done.warnings
    assert line.startswith(f"{path} was damaged (not a SQLite database: its first bytes are not SQLite's header); "
                           "moved it to ")
    assert line.endswith(f"started a new one with nothing it held could be read back; {len(cells)} rows measured "
                         "before that it no longer gave back, read again from their cells' files")
    assert not any(HAND_LABEL in text for text in done.lines)
    assert kept(path) == len(cells)
    # which kernel files, settings and picture those rows ran is not known: not a change to name later
    assert kept(path, "SELECT count(*) FROM measurements WHERE kernel_hash IS NULL AND config_hash IS NULL") \
        == len(cells)


# ---------------------------------------------------------------------------------------------
# Before every run: the check, and the rows that wait


def test_a_whole_database_with_nothing_waiting_costs_a_run_nothing_to_say(lab):
    results, cells = lab
    recorded_three_runs(results, cells)
    started = time.monotonic()
    assert check_results_database(results, cells, THRESHOLD) == []
    assert time.monotonic() - started < 0.5


def test_a_dry_run_names_a_damaged_database_and_changes_nothing(lab):
    results, cells = lab
    path = recorded_three_runs(results, cells)
    cut(path)
    before = path.read_bytes()
    (line,) = check_results_database(results, cells, THRESHOLD, dry_run=True)
    assert line.startswith(f"warning: {path} is damaged (cut short") and "the real run will move it aside" in line
    assert path.read_bytes() == before and not list(results.glob("*.corrupt-*"))


def test_rows_that_wait_are_added_by_the_next_run_that_can_write_and_history_says_why_they_wait(lab, monkeypatch):
    results, cells = lab
    recorded_three_runs(results, cells)
    plant(cells[:4], "20261125T090000-ro", 2.0, hour=15)
    original = store.connect
    monkeypatch.setattr(store, "connect", lambda path, timeout_s=1.0, read_only=False: original(path, timeout_s, True))
    assert record(results, cells, DEVICE, THRESHOLD, run_id="20261125T090000-ro").added == 0
    (line,) = check_results_database(results, cells, THRESHOLD)  # a plain run while it cannot be written
    assert line.startswith("warning: history not recorded: ") and "4 rows wait in " in line
    waiting = history_lines(results)[-1]
    assert waiting.startswith(f"4 rows wait in {results}/unrecorded/ for the database (run 20261125T090000-ro): "
                              "the last run that tried could not add them: ")
    assert "readonly" in waiting or "read-only" in waiting
    monkeypatch.setattr(store, "connect", original)
    assert check_results_database(results, cells, THRESHOLD) == [
        "history: recorded: 4 rows that earlier runs measured but could not record (run 20261125T090000-ro)"]
    assert kept(store.database_path(results)) == 3 * len(cells) + 4
    assert not any("wait" in text for text in history_lines(results))
    assert check_results_database(results, cells, THRESHOLD) == []


def test_rows_on_disk_the_database_lacks_are_recorded_whoever_deleted_what(lab):
    """Rows that waited, their journal in unrecorded/ deleted: recorded by the next run, read again from
    their files. The database deleted: started again from every row on disk, none called written by hand."""
    results, cells = lab
    recorded_three_runs(results, cells)
    plant(cells[:3], "20261125T090000-lost", 2.0, hour=15)
    shutil.rmtree(results / "unrecorded")
    (line,) = check_results_database(results, cells, THRESHOLD, dry_run=True)
    assert line.startswith("history: 3 rows on disk are not in ") and kept(store.database_path(results)) == 3 * len(cells)
    (line,) = check_results_database(results, cells, THRESHOLD)
    assert line == ("history: recorded, without a verdict: 3 rows on disk that no recorded run placed (a deleted "
                    "journal or database, or rows copied in), read again from their cells' files")
    assert kept(store.database_path(results)) == 3 * len(cells) + 3
    assert check_results_database(results, cells, THRESHOLD) == []
    store.database_path(results).unlink()
    for suffix in ("-wal", "-shm"):
        Path(f"{store.database_path(results)}{suffix}").unlink(missing_ok=True)
    (line,) = check_results_database(results, cells, THRESHOLD)
    assert f"{len(cells)} rows on disk that no recorded run placed" in line and HAND_LABEL not in line
    assert kept(store.database_path(results), "SELECT count(*) FROM measurements WHERE kernel_hash IS NULL") == len(cells)


def test_history_says_rows_wait_that_no_record_step_has_tried(lab):
    results, cells = lab
    recorded_three_runs(results, cells)
    plant(cells[:2], "20261125T100000-killed", 2.0, hour=16)  # a run killed before its record step
    assert history_lines(results)[-1] == (
        f"2 rows wait in {results}/unrecorded/ for the database (run 20261125T100000-killed): no record step has "
        "added them yet (the run that measured them stopped before it recorded); the next run that can write it "
        "adds them, a plain `snakemake --cores 1` too")


# ---------------------------------------------------------------------------------------------
# The real workflow


def rows_on_disk(repo: Path) -> int:
    return len(list((repo / RESULTS / "cells").rglob("*.csv")))


def nothing_to_do(result: subprocess.CompletedProcess) -> bool:
    return "Nothing to be done" in result.stdout + result.stderr


@pytest.mark.pipeline
@pytest.mark.parametrize("damage", [cut, overwrite], ids=["cut short", "overwritten"])
def test_a_plain_run_notices_a_damaged_database_and_rebuilds_it_truthfully(
        tiny_run: FinishedRun, tmp_path, damage):
    repo = copy_finished_run(tiny_run.repo, tmp_path / "repo")
    database = repo / RESULTS / "history.sqlite"
    with sqlite3.connect(database) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    damage(database)
    result = snakemake(repo, 1)
    assert_no_traceback(result)
    assert nothing_to_do(result)
    lines = [line for line in terminal_lines(result) if "history.sqlite" in line]
    assert len(lines) == 1 and lines[0].startswith(f"warning: {RESULTS}/history.sqlite was damaged ("), lines
    assert f"moved it to {RESULTS}/history.sqlite.corrupt-" in lines[0]
    assert "read again from their cells' files" in lines[0] or "read back from it" in lines[0]
    assert not any(HAND_LABEL in line for line in terminal_lines(result))
    assert kept(database, "SELECT count(DISTINCT cell) FROM measurements") == rows_on_disk(repo)
    # the next run that measures a cell judges it against what the rebuilt database keeps
    victim = sorted((repo / RESULTS / "cells").rglob("*.csv"))[0]
    victim.unlink()
    again = snakemake(repo, 1)
    shown = "\n".join(terminal_lines(again))
    assert "verdict: 1 cells of" in shown and "measured for the first time" not in shown, shown
    assert HAND_LABEL not in shown and "history.sqlite" not in shown


def unwritable(path: Path, on: bool) -> None:
    """Make a file unwritable to this user, root included (the immutable flag), or writable again."""
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i" if on else "-i", str(path)], check=True)
    else:
        path.chmod(0o444 if on else 0o644)


@pytest.mark.pipeline
def test_rows_that_an_unwritable_database_left_waiting_are_recorded_by_a_plain_run_once_it_can(
        tiny_run: FinishedRun, tmp_path):
    repo = copy_finished_run(tiny_run.repo, tmp_path / "repo")
    database = repo / RESULTS / "history.sqlite"
    before = kept(database)
    victims = sorted((repo / RESULTS / "cells" / "cpu" / "gemm").rglob("*.csv"))[:2]
    for victim in victims:
        victim.unlink()
    unwritable(database, True)
    try:
        measured = snakemake(repo, 1)
        assert any("history not recorded" in line for line in terminal_lines(measured))
        plain = snakemake(repo, 1)
        assert nothing_to_do(plain)
        (warning,) = [line for line in terminal_lines(plain) if line.startswith("warning:")]
        assert "history not recorded: " in warning and "2 rows wait in " in warning
        listed = convlab("history", cwd=repo)
        assert listed.returncode == 0, listed.stderr
        waiting = listed.stdout.strip().splitlines()[-1]
        assert waiting.startswith(f"2 rows wait in {RESULTS}/unrecorded/ for the database (run ")
        assert "readonly" in waiting or "read-only" in waiting
        assert kept(database) == before
    finally:
        unwritable(database, False)
    plain = snakemake(repo, 1)
    assert nothing_to_do(plain)
    assert [line for line in terminal_lines(plain) if line.startswith("history:")] == [
        line for line in terminal_lines(plain)
        if line.startswith("history: recorded: 2 rows that earlier runs measured but could not record (run ")]
    assert kept(database) == before + 2
    quiet = snakemake(repo, 1)
    assert nothing_to_do(quiet) and not [line for line in terminal_lines(quiet) if "history" in line]
    listed = convlab("history", cwd=repo)
    assert listed.returncode == 0 and "wait" not in listed.stdout, listed.stdout + listed.stderr
