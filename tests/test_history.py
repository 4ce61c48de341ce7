"""The results database: adding is idempotent, every re-measured cell gets a verdict against
its previous measurement, and a database that cannot be used costs one warning and no row."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from workflow_helpers import TINY as TINY_CONFIG

from convlab.app.cli import main
from convlab.history import record as record_module
from convlab.history import store
from convlab.history.record import record as record_rows
from convlab.history.verdictpolicy import VerdictPolicy
from convlab.history.verdicts import MAX_KERNEL_LINES, NEW, judge, summary_lines
from convlab.measure.row import build_row, write_row_atomically
from convlab.measure.rowjournal import keep_unrecorded
from convlab.paths import REPO_ROOT
from convlab.plan.config import load_config
from convlab.plan.grid import build_cells

DEVICE = "testgpu"
TINY = REPO_ROOT / TINY_CONFIG
THRESHOLD = VerdictPolicy.from_config(load_config(TINY)).threshold


@pytest.fixture
def lab(tmp_path, monkeypatch):
    """A working folder with the tiny grid's cells (rows are written by the tests)."""
    monkeypatch.chdir(tmp_path)
    cells = build_cells(load_config(TINY), "cpu", DEVICE)
    return tmp_path, cells[:6]


# The run whose jobs wrote the latest rows (write_rows), which record() records as its own.
RUNS = {"latest": ""}


def record(results_dir, cells, device, **options):
    """The record step of the run that wrote the latest rows (as the history rule passes its run)."""
    return record_rows(results_dir, cells, device, THRESHOLD, run_id=options.pop("run_id", RUNS["latest"]), **options)


def write_rows(cells, ms: float, iqr_fraction: float = 0.01, status: str = "ok", uuid: str = "GPU-a",
               commit: str = "c0ffee", backend: str = "cuda", errors: int = 0) -> None:
    """The rows of ``cells`` as the jobs of a new run place them (measured on a GPU, unless
    ``backend`` says otherwise); the first ``errors`` of them are `error` rows."""
    RUNS["latest"] = f"20261124T1000{len(RUNS):02d}-run"
    RUNS[RUNS["latest"]] = ""
    for index, cell in enumerate(cells):
        row_status = "error" if index < errors else status
        kernel_ms = ms * (1 + index / 10)
        measured = {"kernel_ms": kernel_ms, "kernel_ms_iqr": kernel_ms * iqr_fraction, "reps": 20,
                    "max_rel_err": 1e-7, "tolerance": 1e-4, "flops": 1000, "gflops": 1000 / kernel_ms / 1e6, "device": "cpu",
                    "started_at": f"2026-11-24T10:00:{index:02d}", "finished_at": f"2026-11-24T10:00:{index + 1:02d}"}
        values = {"experiment": cell.experiment, "kernel": cell.kernel, "variant": cell.variant, "backend": backend,
                  "size": cell.size, "stride": cell.stride, "filter_size": cell.filter_size, "batch": cell.batch,
                  "padding": cell.padding, "status": row_status, "git_commit": commit, "code_version": "abc", "gpu_uuid": uuid,
                  **(measured if row_status == "ok" else {"reason": "planted"})}
        write_row_atomically(build_row([values]), cell.path)
        keep_unrecorded(cell.path, RUNS["latest"])


def database_rows(folder: Path) -> int:
    with sqlite3.connect(store.database_path(folder)) as connection:
        return connection.execute("SELECT count(*) FROM measurements").fetchone()[0]


def results_of(folder: Path) -> Path:
    return folder / "results" / DEVICE


def recorded_twice(lab, factor: float):
    """The lab's cells measured and recorded, then measured again at ``factor`` times their time: the second
    record step."""
    folder, cells = lab
    write_rows(cells, 1.0)
    record(results_of(folder), cells, DEVICE)
    write_rows(cells, factor)
    return record(results_of(folder), cells, DEVICE)


def test_adding_is_idempotent_and_a_first_measurement_is_new(lab):
    folder, cells = lab
    write_rows(cells, 1.0)
    first = record(results_of(folder), cells, DEVICE)
    assert first.added == len(cells)
    assert {v.verdict for v in first.verdicts} == {NEW}
    assert "measured for the first time" in first.lines[0] and "of them" not in first.lines[0]
    again = record(results_of(folder), cells, DEVICE)
    assert again.added == 0 and again.verdicts == []
    assert database_rows(results_of(folder)) == len(cells)
    with sqlite3.connect(store.database_path(results_of(folder))) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert connection.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION


@pytest.mark.parametrize(("factor", "expected"), [(1.5, "SLOWER"), (0.5, "FASTER"), (1.02, "SAME")])
def test_a_planted_change_gets_its_verdict_against_the_previous_measurement(lab, factor, expected):
    folder, cells = lab
    second = recorded_twice(lab, factor)
    assert {v.verdict for v in second.verdicts} == {expected}
    assert all(v.ratio.value == pytest.approx(factor) for v in second.verdicts)
    assert second.lines[0].startswith(f"verdict: {len(cells)} cells of {DEVICE} re-measured")
    assert f"{len(cells)} {expected}" in second.lines[0]
    # the verdict is kept with the measurement and written to the run's CSV
    with sqlite3.connect(store.database_path(results_of(folder))) as connection:
        kept = connection.execute("SELECT verdict FROM measurements WHERE run_id = ?", (second.run_id,)).fetchall()
    assert {v for (v,) in kept} == {expected}
    assert (results_of(folder) / "verdicts" / f"{second.run_id}.csv").read_text().count(expected) == len(cells)


def test_the_verdict_says_what_changed_between_the_two_measurements(lab, monkeypatch):
    folder, cells = lab
    write_rows(cells, 1.0, uuid="GPU-a")
    record(results_of(folder), cells, DEVICE)
    write_rows(cells, 1.0, uuid="GPU-b")
    monkeypatch.setattr(record_module.KernelHashes, "__call__", lambda self, kernel, backend: "edited")
    second = record(results_of(folder), cells, DEVICE)
    assert {v.changed for v in second.verdicts} == {("kernel files", "GPU board")}
    assert "changed: GPU board, kernel files" in "\n".join(second.lines)


def test_a_measurement_keeps_its_cells_spec_hash_and_other_settings_are_named_config(lab):
    """The database keeps the start of the cell's spec_hash (under its column config_hash); a rerun with
    the same settings keeps the same hash, one with other timing settings is named a config change."""
    folder, cells = lab
    write_rows(cells, 1.0)
    record(results_of(folder), cells, DEVICE)
    write_rows(cells, 1.01)
    rerun = record(results_of(folder), cells, DEVICE)
    assert len(rerun.verdicts) == len(cells) and {v.changed for v in rerun.verdicts} == {()}
    connection = store.open_for_reading(store.database_path(results_of(folder)))
    try:
        kept = store.measurements(connection, cell=cells[0].path)
        (column,) = connection.execute("SELECT DISTINCT config_hash FROM measurements WHERE cell = ?",
                                       (cells[0].path,)).fetchone()
    finally:
        connection.close()
    assert {m.spec_hash for m in kept} == {column} and cells[0].spec_hash.startswith(column)
    retimed = [dataclasses.replace(cell, timing={**cell.timing, "warmup": 7}) for cell in cells]
    write_rows(retimed, 1.02)
    assert {v.changed for v in record(results_of(folder), retimed, DEVICE).verdicts} == {("config",)}


def test_a_cell_that_is_not_ok_now_gets_its_status_and_the_next_ok_one_compares_with_the_last_ok(lab):
    folder, cells = lab
    write_rows(cells, 1.0)
    record(results_of(folder), cells, DEVICE)
    write_rows(cells, 1.0, status="invalid_config")
    failed = record(results_of(folder), cells, DEVICE)
    assert {v.verdict for v in failed.verdicts} == {"invalid_config"}
    write_rows(cells, 2.0)
    recovered = record(results_of(folder), cells, DEVICE)
    assert {v.verdict for v in recovered.verdicts} == {"SLOWER"}


def test_a_first_run_says_how_many_of_its_cells_failed(lab):
    folder, cells = lab
    write_rows(cells, 1.0, errors=1)
    first = record(results_of(folder), cells, DEVICE)
    assert "measured for the first time" in first.lines[0]
    assert ", of them 1 error;" in first.lines[0]


def test_a_damaged_row_is_never_added(lab):
    folder, cells = lab
    write_rows(cells, 1.0)
    Path(cells[0].path).write_text("cut short")
    recorded = record(results_of(folder), cells, DEVICE)
    assert recorded.added == len(cells) - 1
    assert cells[0].path not in {v.cell for v in recorded.verdicts}


def test_the_end_of_run_lines_stay_short_for_many_kernels():
    previous = store.Measurement("cell", "conv2d", "k", "default", "ok", 1.0, "p", "r0", 0.01, "t", "c", "v", "h",
                                 "cfg", "GPU-a", "{}")
    verdicts = [judge({"cell": f"c{k}-{i}", "kernel": f"kernel{k:02d}", "status": "ok", "kernel_ms": 1.0 + k / 5,
                       "kernel_ms_iqr": 0.01, "kernel_hash": "h", "code_version": "v", "spec_hash": "cfg",
                       "gpu_uuid": "GPU-a"}, previous, threshold=THRESHOLD)
                for k in range(22) for i in range(20)]
    lines = summary_lines(verdicts, DEVICE, "run1", "results/x.csv")
    assert len(lines) <= MAX_KERNEL_LINES + 3 <= 15
    assert lines[-2].startswith("  ... and 12 more kernels")
    assert "SLOWER" in lines[1]  # the kernels that changed come first


def test_history_lists_runs_and_a_kernels_measurements_and_compare_takes_previous(lab, capsys):
    cells = lab[1]
    recorded_twice(lab, 1.5)
    assert main(["history"]) == 0
    runs = capsys.readouterr().out.splitlines()
    assert len(runs) == 3 and f"{len(cells)} SLOWER" in runs[2] and f"{len(cells)} new" in runs[1]
    kernel = cells[0].kernel
    assert main(["history", "--kernel", kernel]) == 0
    listed = capsys.readouterr().out
    assert "SLOWER" in listed and "c0ffee" in listed and "x1.500" in listed
    assert main(["compare", "@previous", "@latest"]) == 0
    compared = capsys.readouterr().out
    assert f"overall: geomean B/A 1.50 over {len(cells)} cells; 0 FASTER, {len(cells)} SLOWER" in compared
    assert main(["compare", "@previous", "@latest", "--fail-on", "slower"]) == 1
    assert "SLOWER (--fail-on slower)" in capsys.readouterr().err
    assert main(["compare", "@latest", "@latest", "--fail-on", "slower"]) == 2
    assert "nothing was re-measured between them" in capsys.readouterr().err
    assert main(["compare", "@nonsense", "@latest"]) == 2
    assert capsys.readouterr().err.startswith("error: @nonsense")
    # a run id and a commit are sides too
    run_ids = [line.split()[1] for line in runs[1:]]
    assert main(["compare", run_ids[0], "c0ffee", "--fail-on", "slower"]) == 1


def test_compare_why_gives_each_slower_cell_its_reason_where_no_counts_can_be_read(lab, capsys, monkeypatch):
    folder, cells = lab
    recorded_twice(lab, 1.5)
    monkeypatch.chdir(REPO_ROOT)  # the config's files, as a command in the checkout reads them
    out = folder / "compared.csv"
    assert main(["compare", "@previous", "@latest", "--why", "--configfile", str(TINY), "--results",
                 str(folder / "results"), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert f"(0 of {len(cells)} FASTER/SLOWER cells explained" in said
    lines = [line for line in said.splitlines() if "why: not read: " in line]
    assert len(lines) == len(cells) and all(line.endswith("no hardware counters on the cpu backend") for line in lines)
    table = pd.read_csv(out, keep_default_na=False)
    assert (table["why"] == "why: not read: no hardware counters on the cpu backend").all()
    assert "why_instructions_a" in table and (table["kernel_hash_a"] != "").all()
    assert "<th>why</th>" in out.with_suffix(".html").read_text()
    # a summary file keeps no kernel files: one line, nothing compared
    summary = folder / "summary.csv"
    summary.write_text("experiment,kernel,variant,status,kernel_ms\nconv2d,direct,block~16,ok,1.0\n")
    assert main(["compare", str(summary), "@latest", "--why", "--results", str(folder / "results")]) == 2
    assert capsys.readouterr().err.startswith("error: --why compares two states of the results database")


def test_history_lists_the_last_runs_and_says_how_many_more_are_kept(lab, capsys):
    folder, cells = lab
    for factor in (1.0, 1.5, 1.01):  # three runs: each re-measures every cell
        write_rows(cells, factor)
        record(results_of(folder), cells, DEVICE)
    assert main(["history", "--limit", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and lines[-1] == "(1 earlier runs not shown; --limit to see more)"
    assert f"{len(cells)} SLOWER" in lines[1] and f"{len(cells)} FASTER" in lines[2]


def test_the_gate_after_a_first_run_says_there_is_nothing_to_compare_yet(lab, capsys):
    folder, cells = lab
    write_rows(cells, 1.0)
    record(results_of(folder), cells, DEVICE)
    assert main(["compare", "@previous", "@latest", "--fail-on", "slower"]) == 0
    said = capsys.readouterr().out.strip()
    assert said.startswith("compare: @previous: the results database holds only one run (")
    assert said.endswith("nothing to compare yet; the run that measures cells again makes a previous one to compare "
                         "with")
    assert main(["compare", "@previous", "c0ffee"]) == 2  # another side than @latest: still a mistake


def test_compare_of_two_states_with_no_slower_cell_passes_the_gate(lab, capsys):
    cells = lab[1]
    recorded_twice(lab, 0.5)
    assert main(["compare", "@previous", "@latest", "--fail-on", "slower"]) == 0
    assert f"{len(cells)} FASTER" in capsys.readouterr().out


def test_a_database_locked_by_another_run_costs_a_warning_and_the_next_run_adds_the_rows(lab):
    folder, cells = lab
    write_rows(cells, 1.0)
    record(results_of(folder), cells[:1], DEVICE)
    holder = sqlite3.connect(store.database_path(results_of(folder)))
    holder.execute("BEGIN EXCLUSIVE")
    try:
        locked = record(results_of(folder), cells, DEVICE, timeout_s=0.2)
    finally:
        holder.rollback()
        holder.close()
    assert locked.added == 0
    assert len(locked.warnings) == 1 and "locked" in locked.warnings[0] and "next run" in locked.warnings[0]
    assert Path(cells[1].path).is_file()  # the rows are untouched
    later = record(results_of(folder), cells, DEVICE)
    assert later.added == len(cells) - 1


def test_a_corrupted_database_is_moved_aside_and_a_new_one_started(lab):
    folder, cells = lab
    write_rows(cells, 1.0)
    record(results_of(folder), cells, DEVICE)
    path = store.database_path(results_of(folder))
    path.write_bytes(b"this is not a database" * 100)
    for side in ("-wal", "-shm"):
        Path(f"{path}{side}").unlink(missing_ok=True)
    recorded = record(results_of(folder), cells, DEVICE)
    assert len(recorded.warnings) == 1 and "moved it to" in recorded.warnings[0]
    assert recorded.added == len(cells)
    assert list(path.parent.glob("history.sqlite.corrupt-*"))


def test_a_read_only_database_costs_a_warning_and_keeps_the_rows(lab, monkeypatch):
    folder, cells = lab
    write_rows(cells, 1.0)
    record(results_of(folder), cells[:2], DEVICE)
    write_rows(cells, 1.01)
    original = store.connect
    monkeypatch.setattr(store, "connect", lambda path, timeout_s=1.0, read_only=False: original(path, timeout_s, True))
    recorded = record(results_of(folder), cells, DEVICE)
    assert recorded.added == 0 and len(recorded.warnings) == 1
    assert "read-only" in recorded.warnings[0] or "readonly" in recorded.warnings[0]
    # the cells kept before give verdicts against their kept rows, the rest against the rows the
    # first run placed and could not record for them (they still wait in unrecorded/)
    assert {v.verdict for v in recorded.verdicts} == {"SAME"}
    monkeypatch.setattr(store, "connect", original)
    assert database_rows(results_of(folder)) == 2


def test_a_full_disk_adds_nothing_of_the_run(lab, monkeypatch):
    folder, cells = lab
    write_rows(cells, 1.0)
    record(results_of(folder), cells[:1], DEVICE)
    original = store.connect

    def nearly_full(path, timeout_s=1.0, read_only=False):
        connection = original(path, timeout_s, read_only)
        pages = connection.execute("PRAGMA page_count").fetchone()[0]
        connection.execute(f"PRAGMA max_page_count = {pages}")
        return connection

    write_rows(cells, 1.0)
    big = [cell for cell in cells]
    monkeypatch.setattr(record_module, "_json", lambda row: "x" * 200_000)
    monkeypatch.setattr(store, "connect", nearly_full)
    recorded = record(results_of(folder), big, DEVICE)
    assert recorded.added == 0
    assert len(recorded.warnings) == 1 and "full" in recorded.warnings[0]
    monkeypatch.setattr(store, "connect", original)
    with sqlite3.connect(store.database_path(results_of(folder))) as connection:
        assert connection.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
        assert connection.execute("SELECT count(*) FROM measurements").fetchone()[0] == 1
    assert all(Path(cell.path).is_file() for cell in cells)


def test_two_device_labels_keep_two_databases(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for device in ("gpu-a", "gpu-b"):
        cells = build_cells(load_config(TINY), "cpu", device)[:3]
        write_rows(cells, 1.0)
        assert record(tmp_path / "results" / device, cells, device).added == 3
    assert sorted(p.parent.name for p in tmp_path.glob("results/*/history.sqlite")) == ["gpu-a", "gpu-b"]
    assert main(["history"]) == 2  # two databases: the device must be named


def test_a_newer_schema_is_refused_with_one_line(lab):
    folder, cells = lab
    write_rows(cells, 1.0)
    path = store.database_path(results_of(folder))
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as connection:
        connection.execute(f"PRAGMA user_version = {store.SCHEMA_VERSION + 1}")
    recorded = record(results_of(folder), cells, DEVICE)
    assert recorded.added == 0 and "newer than this convlab" in recorded.warnings[0]


def test_the_history_figure_follows_runs_in_order_and_marks_where_kernel_files_changed(lab, monkeypatch):
    from convlab.report.historypage import relative_times, write_history_page

    folder, cells = lab
    write_rows(cells, 1.0)
    record(results_of(folder), cells, DEVICE)
    monkeypatch.setattr(record_module.KernelHashes, "__call__", lambda self, kernel, backend: "edited")
    write_rows(cells, 1.5)  # the same finished_at as the first run: run order must still hold
    record(results_of(folder), cells, DEVICE)
    connection = store.open_for_reading(store.database_path(results_of(folder)))
    series = relative_times(store.measurements(connection))
    connection.close()
    for kernel in {cell.kernel for cell in cells}:
        (first_run, first, first_changed), (second_run, second, second_changed) = series[kernel]
        assert (first_run, first, first_changed) == (1, pytest.approx(1.0), False)
        assert (second_run, second, second_changed) == (2, pytest.approx(1.5), True)
    page = write_history_page(results_of(folder), results_of(folder) / "verdicts" / "latest.csv",
                              folder / "history.png", folder / "history.html")
    assert "2 runs" in page and (folder / "history.png").stat().st_size > 10_000
    assert (folder / "history.html").read_text().count("SLOWER") >= len(cells)


def test_rows_of_two_runs_that_could_not_record_are_all_added_by_the_next(lab, monkeypatch):
    folder, cells = lab
    store.open_for_writing(store.database_path(results_of(folder)))[0].close()  # a device with a history
    write_rows(cells, 1.0)
    original = store.connect
    monkeypatch.setattr(store, "connect", lambda path, timeout_s=1.0, read_only=False: original(path, timeout_s, True))
    first = RUNS["latest"]
    assert record(results_of(folder), cells, DEVICE).added == 0  # read-only
    monkeypatch.setattr(store, "connect", original)
    write_rows(cells, 2.0)  # the next run measures the same cells again: their files are replaced
    holder = sqlite3.connect(store.database_path(results_of(folder)))
    holder.execute("BEGIN EXCLUSIVE")
    try:
        assert record(results_of(folder), cells, DEVICE, timeout_s=0.2).added == 0  # locked
    finally:
        holder.rollback()
        holder.close()
    write_rows(cells, 2.0, commit="beef")
    third = record(results_of(folder), cells, DEVICE)
    assert third.added == 3 * len(cells)
    assert database_rows(results_of(folder)) == 3 * len(cells)
    # this run's verdicts are its own cells', against the run before, which was recorded with them
    assert len(third.verdicts) == len(cells) and {v.verdict for v in third.verdicts} == {"SAME"}
    assert any(line.startswith(f"  also recorded: {2 * len(cells)} rows that earlier runs measured") and first in line
               for line in third.lines)
    assert not (results_of(folder) / "unrecorded").exists() or not any((results_of(folder) / "unrecorded").rglob("*"))


def test_only_cells_a_job_of_this_run_measured_get_a_verdict(lab):
    folder, cells = lab
    write_rows(cells, 1.0)
    record(results_of(folder), cells, DEVICE)
    write_rows(cells[:2], 1.1)
    for link in (results_of(folder) / "unrecorded").rglob("*.csv"):
        link.unlink()  # as if written by hand: no job of a run placed them
    recorded = record(results_of(folder), cells, DEVICE)
    assert recorded.verdicts == [] and recorded.added == 2
    assert recorded.lines[0] == f"history: no cell of {DEVICE} was re-measured in this run"
    assert "without a verdict: 2 rows on disk that no recorded run placed" in recorded.lines[1]


def test_a_changed_input_picture_is_named_in_the_verdict(lab):
    folder, cells = lab
    pictured = [cell for cell in cells if cell.image]
    assert pictured
    for image in {cell.image for cell in pictured}:
        Path(image).parent.mkdir(parents=True, exist_ok=True)
        Path(image).write_bytes(b"the first picture")
    write_rows(pictured, 1.0)
    record(results_of(folder), pictured, DEVICE)
    write_rows(pictured, 1.01)
    assert {v.changed for v in record(results_of(folder), pictured, DEVICE).verdicts} == {()}
    for image in {cell.image for cell in pictured}:
        Path(image).write_bytes(b"another picture")
    write_rows(pictured, 1.02)
    recorded = record(results_of(folder), pictured, DEVICE)
    assert {v.changed for v in recorded.verdicts} == {("input picture",)}
    assert any("changed: input picture" in line for line in recorded.lines)
