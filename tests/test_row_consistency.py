"""A row that contradicts itself in a derived column is damaged, and so is a directory in a row's
place; both, and a whole row of another convlab version, are moved aside once with one line and
their cell measured again (cpu backend; the real workflow in the pipeline tier)."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from cpu_helpers import cell_for
from workflow_helpers import RESULTS, FinishedRun, assert_no_traceback, copy_finished_run, snakemake, terminal_lines

from convlab.measure.row import COLUMNS, DamagedRow, OtherFormat, format_row, parse_row, read_row_file, row_check
from convlab.report.aggregate import RowRefused, read_rows
from convlab.run.runner import run_cell
from convlab.snakefile.damaged import MAX_LINES, move_damaged_rows, moved_lines

# Every column of a row that holds a time in ms (phase_ms and stage_ms are lists of them).
TIMES = [name for name in COLUMNS if (name.endswith("_ms") or name.startswith("kernel_ms"))
         and name not in ("phase_ms", "stage_ms")]
VICTIM = f"{RESULTS}/cells/cpu/conv2d/kernel~direct/size~64/stride~1/filter~3/default.csv"


def measured(**values) -> dict:
    """A measured row whose derived columns agree with its time (the GPU's energy columns too)."""
    ms, flops, size, copy_gbps, watts = 0.5, 10**6, 4 * 10**5, 20.0, 300.0
    floor_ms = size / copy_gbps / 1e6
    row = {"experiment": "conv2d", "kernel": "direct", "variant": "default", "backend": "cuda", "size": 64,
           "status": "ok", "git_commit": "abc", "code_version": "0123456789ab", "kernel_ms": ms,
           "kernel_ms_min": 0.49, "kernel_ms_max": 0.52, "kernel_ms_iqr": 0.01, "reps": 20, "max_rel_err": 1e-7,
           "tolerance": 1e-5, "flops": flops, "bytes": size, "gflops": flops / ms / 1e6, "gbps": size / ms / 1e6,
           "copy_gbps": copy_gbps, "floor_ms": floor_ms, "pct_of_floor": floor_ms / ms * 100,
           "power_median_w": watts, "energy_per_rep_mj": watts * ms, "gflop_per_j": flops / (watts * ms) / 1e6,
           "device": "Test GPU", "started_at": "2026-11-24T10:00:00", "finished_at": "2026-11-24T10:00:01"}
    return {**row, **values}


def forged(text: str, factor: float = 10.0) -> str:
    """The row's text with every time divided by ``factor`` and its check recomputed: a whole row."""
    header, values = list(csv.reader(io.StringIO(text)))
    row = dict(zip(header, values))
    for name in TIMES:
        if row[name]:
            row[name] = f"{float(row[name]) / factor:.6g}"
    row["row_check"] = row_check([row[name] for name in header[:-1]])
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([header, [row[name] for name in header]])
    return out.getvalue()


def other_version(text: str) -> str:
    """The row as a convlab with one more column would write it, whole, its check recomputed."""
    header, values = list(csv.reader(io.StringIO(text)))
    header = [*header[:-1], "a_later_column", header[-1]]
    values = [*values[:-1], "1"]
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([header, [*values, row_check(values)]])
    return out.getvalue()


# ---------------------------------------------------------------------------------------------
# The row's own check


def test_a_row_whose_derived_columns_agree_with_its_time_is_whole():
    parse_row(format_row(measured()))


@pytest.mark.parametrize(("column", "formula"), [
    ("gflops", "flops / kernel_ms / 1e6"), ("gbps", "bytes / kernel_ms / 1e6"), ("floor_ms", "bytes / copy_gbps"),
    ("pct_of_floor", "floor_ms / kernel_ms * 100"), ("energy_per_rep_mj", "power_median_w * kernel_ms"),
    ("gflop_per_j", "flops / energy_per_rep_mj"),
])
def test_a_derived_column_ten_times_off_its_time_is_damaged_saying_which(column, formula):
    with pytest.raises(DamagedRow, match="contradict each other") as refused:
        parse_row(format_row(measured(**{column: measured()[column] * 10})))
    assert f"{column} " in str(refused.value) and formula in str(refused.value)


def test_a_measured_row_with_every_time_divided_by_ten_and_its_check_recomputed_is_damaged(image_path):
    row = run_cell(cell_for("direct"), image_path)
    assert row["status"] == "ok", row["reason"]
    text = format_row(row)
    parse_row(text)  # as measured: whole
    with pytest.raises(DamagedRow, match="gflops .* disagrees with flops / kernel_ms / 1e6"):
        parse_row(forged(text))


def test_a_directory_in_a_rows_place_is_damaged_and_moved_aside_with_one_line(tmp_path):
    results = tmp_path / "results" / "cpu"
    path = results / "cells" / "row.csv"
    (path / "inside").mkdir(parents=True)
    with pytest.raises(DamagedRow, match="a directory"):
        read_row_file(path)
    with pytest.raises(RowRefused, match="a directory, not a row file"):
        read_rows([path])
    (moved,) = move_damaged_rows([str(path)], results)
    assert not path.exists() and (moved.moved_to / "inside").is_dir()
    assert moved.line().startswith(f"damaged row: {path} (a directory, not a row file); moved to ")


def test_a_row_of_another_version_is_moved_aside_with_a_line_that_does_not_call_it_damaged(tmp_path):
    results = tmp_path / "results" / "cpu"
    path = results / "cells" / "row.csv"
    path.parent.mkdir(parents=True)
    path.write_text(other_version(format_row(measured())))
    with pytest.raises(OtherFormat):
        read_row_file(path)
    (moved,) = move_damaged_rows([str(path)], results)
    assert not path.exists() and moved.moved_to.is_file()
    assert moved.line() == (f"row of another convlab version: {path} (its columns are not this convlab's); moved to "
                            f"{moved.moved_to}, its cell will be measured again")
    assert moved.line() in (results / "damaged" / "damaged.log").read_text()


def test_the_summary_step_refuses_a_row_of_another_version_with_advice_that_a_run_follows(tmp_path):
    path = tmp_path / "row.csv"
    path.write_text(other_version(format_row(measured())))
    with pytest.raises(RowRefused) as refused:
        read_rows([path])
    assert "rerun-triggers" not in str(refused.value)
    assert "moves the file to results/<device>/damaged/ and measures the cell again" in str(refused.value)


def test_many_rows_of_another_version_are_told_in_one_line_and_each_in_the_log(tmp_path):
    results = tmp_path / "results" / "cpu"
    paths = []
    for number in range(MAX_LINES + 3):
        path = results / "cells" / f"row{number}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(other_version(format_row(measured())))
        paths.append(str(path))
    damaged = results / "cells" / "cut.csv"
    damaged.write_text(format_row(measured())[:-30])
    moved = move_damaged_rows([*paths, str(damaged)], results)
    lines = moved_lines(moved, results)
    assert len(lines) == 2 and lines[0].startswith(f"damaged row: {damaged}")
    assert lines[1] == (f"rows of another convlab version: {MAX_LINES + 3} moved to {results}/damaged/ (each one's "
                        f"path and why: {results}/damaged/damaged.log), their cells will be measured again")
    assert len((results / "damaged" / "damaged.log").read_text().splitlines()) == MAX_LINES + 4


# ---------------------------------------------------------------------------------------------
# The real workflow: one line, the cell measured again, and the next run has nothing to do


def rewritten(change: Callable[[str], str]) -> Callable[[Path], None]:
    """The damage that rewrites a row file by ``change`` of its text."""
    def damage(victim: Path) -> None:
        victim.write_text(change(victim.read_text()))
    return damage


def a_directory_in_its_place(victim: Path) -> None:
    victim.unlink()
    (victim / "left-here").mkdir(parents=True)


def summary_row(repo: Path) -> pd.Series:
    summary = pd.read_csv(repo / RESULTS / "summary.csv")
    chosen = summary[(summary.experiment == "conv2d") & (summary.kernel == "direct") & (summary["size"] == 64)
                     & (summary.stride == 1)]
    assert len(chosen) == 1
    return chosen.iloc[0]


def moved_once_and_measured_again(tiny_run: FinishedRun, tmp_path: Path, damage: Callable[[Path], None],
                                  lead: str) -> tuple[Path, list[str]]:
    """A copy of the session's tiny run whose VICTIM ``damage`` damaged, run, expecting one line about the
    victim, its cell measured again; then a run with nothing to do. The copy and the first run's lines."""
    repo = copy_finished_run(tiny_run.repo, tmp_path / "repo")
    damage(repo / VICTIM)
    before = (repo / VICTIM).read_text() if (repo / VICTIM).is_file() else None
    result = snakemake(repo, 1)
    assert_no_traceback(result)
    lines = terminal_lines(result)
    about = [line for line in lines if VICTIM in line]
    assert len(about) == 1 and about[0].startswith(f"{lead}: {VICTIM} ("), lines
    assert "moved to " in about[0] and about[0].endswith("its cell will be measured again")
    assert read_row_file(repo / VICTIM) and (repo / VICTIM).read_text() != before
    assert len(list((repo / RESULTS / "damaged").rglob("default.*.csv"))) == 1
    again = snakemake(repo, 1)
    shown = again.stdout + again.stderr
    assert "Nothing to be done" in shown and VICTIM not in shown, shown
    return repo, lines


@pytest.mark.pipeline
def test_a_consistent_forgery_is_moved_aside_and_its_cell_measured_again(tiny_run, tmp_path):
    repo, lines = moved_once_and_measured_again(tiny_run, tmp_path, rewritten(forged), "damaged row")
    assert any("gflops" in line and "disagrees with flops / kernel_ms / 1e6" in line for line in lines), lines
    row = summary_row(repo)
    assert row.gflops == pytest.approx(row.flops / row.kernel_ms / 1e6, rel=1e-4)


@pytest.mark.pipeline
def test_a_row_of_another_version_is_moved_aside_once_and_its_cell_measured_again(tiny_run, tmp_path):
    _, lines = moved_once_and_measured_again(tiny_run, tmp_path, rewritten(other_version),
                                             "row of another convlab version")
    assert not any("error:" in line for line in lines), lines


@pytest.mark.pipeline
def test_a_directory_in_a_rows_place_is_moved_aside_once_and_its_cell_measured_again(tiny_run, tmp_path):
    repo, lines = moved_once_and_measured_again(tiny_run, tmp_path, a_directory_in_its_place, "damaged row")
    assert any("(a directory, not a row file)" in line for line in lines), lines
    assert list((repo / RESULTS / "damaged").rglob("left-here"))
