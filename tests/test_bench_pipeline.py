"""The pipeline benchmark (`python -m convlab bench-pipeline`): its figures from planted rows and a
planted log, the copy of a checkout it runs in, its arguments, its failure line, and (pipeline
tier) the real command on the tiny cpu grid."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from workflow_helpers import TINY, convlab, copy_repo

from convlab.app.commandtable import parse
from convlab.app.handlers.benchpipeline import snakemake_options
from convlab.bench.pipeline import bare_snakefile, complete_log, copy_checkout, job_total
from convlab.bench.pipelinefigures import (
    Runs,
    TimedRun,
    cell_times,
    format_table,
    pipeline_figures,
    read_cells,
    targets,
)
from convlab.measure.row import build_row, write_row_atomically
from convlab.status import UserError

T = 1_800_000_000.0
# (name, start, job_ms, phases, service_ms): start in seconds after T; the job ends job_ms later
PLANTED = [
    ("a", 0.8, 200.0, {"startup": 50, "timing": 100, "e2e": 10}, 120.0),
    ("b", 1.1, 300.0, {"startup": 60, "timing": 150, "e2e": 20, "settle": 10}, 200.0),
    ("c", 1.6, 100.0, {"startup": 40}, 50.0),  # refused before it ran: no timing, no e2e
    ("d", 2.0, 400.0, {"startup": 70, "timing": 200, "e2e": 30}, 250.0),
]
PLANTED_LOG = """\
Building DAG of jobs...
Job stats:
job      count
-----  -------
cell         4
all          1
total        5

Select jobs to execute...
Job stats:
job      count
-----  -------
all          1
total        1
"""


def near(expected):
    """Epoch seconds near 1.8e9 hold times to about a microsecond."""
    return pytest.approx(expected, rel=1e-4, abs=1e-3)


def iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat(timespec="microseconds")


def plant_row(results: Path, name: str, start: float, job_ms: float, phases: dict, service_ms: float) -> Path:
    """A whole cell row whose job started ``start`` s after T: its measurement finished before the
    settle phase that ends the job's clock."""
    end = T + start + job_ms / 1e3
    row = build_row([{
        "experiment": "conv2d", "kernel": name, "variant": "default", "backend": "cpu", "size": 64, "status": "ok",
        "git_commit": "planted", "code_version": "planted", "kernel_ms": 1.0, "reps": 3, "max_rel_err": 0.0,
        "tolerance": 1e-5, "flops": 1, "gflops": 1e-6, "device": "cpu", "started_at": iso(T + start),
        "finished_at": iso(end - phases.get("settle", 0) / 1e3),
        "phase_ms": ";".join(f"{k}={v}" for k, v in phases.items()), "job_ms": job_ms, "service_ms": service_ms,
    }])
    path = results / "cpu-planted" / "cells" / "cpu" / "conv2d" / f"kernel~{name}" / "default.csv"
    write_row_atomically(row, path)
    os.utime(path, (end + 0.005, end + 0.005))  # written 5 ms after the job's clock stopped
    return path


@pytest.fixture
def planted(tmp_path: Path) -> tuple[list, Runs]:
    results = tmp_path / "results"
    for name, start, job_ms, phases, service_ms in PLANTED:
        plant_row(results, name, start, job_ms, phases, service_ms)
    (results / "cpu-planted" / "cells" / "cpu" / "conv2d" / "kernel~cut").mkdir()
    (results / "cpu-planted" / "cells" / "cpu" / "conv2d" / "kernel~cut" / "default.csv").write_text("experiment,")
    cells, skipped = read_cells(results)
    assert [Path(path).parent.name for path in skipped] == ["kernel~cut"]
    runs = Runs(real=TimedRun(T, T + 3.0), noop=TimedRun(T + 10, T + 11.5), bare=TimedRun(T + 20, T + 21.2),
                bare_noop=TimedRun(T + 30, T + 31.0), jobs=job_total(PLANTED_LOG),
                stamps=[T + 0.05, T, T + 0.06, T + 0.02])
    return cells, runs


def test_a_job_ends_where_its_settle_phase_ends_and_starts_job_ms_before():
    row = {"job_ms": "300", "finished_at": iso(T + 1.39), "phase_ms": "startup=60;settle=10;timing=150"}
    times = cell_times(row)
    assert times.end == pytest.approx(T + 1.4) and times.start == pytest.approx(T + 1.1)
    assert times.phases == {"startup": 60, "settle": 10, "timing": 150}
    # a row its client wrote when the service went away has no finished_at: no times
    assert cell_times({"job_ms": "12", "finished_at": ""}) is None


def test_the_figures_of_planted_rows_and_runs(planted):
    cells, runs = planted
    f = pipeline_figures(cells, runs)
    assert (f["cells"], f["jobs"], f["bare_stamps"]) == (4, 5, 4)
    assert f["gap_median_ms"] == near(200) and f["gap_p90_ms"] == near(280)
    assert f["bare_per_job_ms"] == near(20) and f["gap_per_bare_job"] == near(10)
    assert f["phase_median_ms"] == near({"startup": 55, "timing": 150, "e2e": 20, "settle": 10})
    assert list(f["phase_median_ms"]) == ["startup", "timing", "e2e", "settle"]  # the order they happen in
    assert f["phase_sum_s"] == near({"startup": 0.22, "timing": 0.45, "e2e": 0.06, "settle": 0.01})
    # service_ms less its phases from load to settle: a 10, b 20, c 50, d 20 ms; the start-up is the client's
    assert f["unphased_median_ms"] == near(20) and f["unphased_sum_s"] == near(0.1)
    # b: 300 - 150 - 20 + 100, c: 100 + 200 (all overhead), d: 400 - 200 - 30 + 300
    assert f["overhead_median_ms"] == near(300)
    assert f["row_written_median_ms"] == near(5)
    assert f["timing_sum_s"] == near(0.45) and f["service_sum_s"] == near(0.62)
    assert f["wall_s"] == near(3.0) and f["wall_per_timing"] == near(3.0 / 0.45)
    assert (f["before_cells_s"], f["cell_stage_s"], f["after_cells_s"]) == near((0.8, 1.6, 0.6))
    assert f["cell_stage_per_service"] == near(1.6 / 0.62)
    assert (f["noop_s"], f["bare_noop_s"], f["noop_over_bare_s"]) == near((1.5, 1.0, 0.5))
    assert f["wall_per_bare_wall"] == near(3.0 / 1.2) and f["service_per_timing"] == near(0.62 / 0.45)
    # whole run 6.7 × Σ timing, 0.8 s before the cells, cell stage 2.6 × Σ service_ms, Σ service_ms
    # 1.4 × Σ timing, gap 10 × bare per job, client start-up 55 ms, no verify phase, 0.6 s after, no-op +0.5 s
    assert [t.met for t in targets(f)] == [False, True, False, True, False, False, None, True, True]


def test_the_table_prints_every_figure_and_target(planted):
    table = format_table(pipeline_figures(*planted), heading="planted")
    lines = table.splitlines()
    assert lines[0] == "planted"
    gap = next(line for line in lines if "Snakemake gap per cell (median)" in line)
    assert "200.0 ms" in gap and "bare Snakemake per job 20.0 ms" in gap and "ratio 10.00" in gap
    for label in ("client start-up", "timing (the GPU work)", "Σ timing", "Σ service_ms", "wall / Σ timing",
                  "Σ service_ms / Σ timing", "cell stage / Σ service_ms", "before the first cell",
                  "after the last cell"):
        assert any(line.strip().startswith(label) for line in lines), label
    assert "  no-op " in table and "bare no-op 1.00 s" in table
    timing = next(line for line in lines if line.strip().startswith("timing (the GPU work)"))
    assert "150.0 ms" in timing and "Σ 0.45 s" in timing
    unphased = next(line for line in lines if line.strip().startswith("service time in no phase"))
    assert "20.0 ms" in unphased and "Σ 0.10 s" in unphased
    marks = lines[lines.index("targets") + 1:]
    assert [line.split("  ")[1].strip() for line in marks] == [
        "not met", "met", "not met", "met", "not met", "not met", "n/a", "met", "met"]
    assert "Σ service_ms ≤ 1.8 × Σ timing" in marks[3] and "1.38 ×" in marks[3]
    # the numbers line up: every value of the per-cell and totals rows ends in the same column
    ends = {line.index(" ms") + 3 for line in lines[2:8]}
    assert len(ends) == 1


def test_the_job_count_is_the_first_job_stats_total_of_the_log_the_run_names(tmp_path):
    assert job_total(PLANTED_LOG) == 5 and job_total("no table") is None
    log = tmp_path / "named.snakemake.log"
    log.write_text(PLANTED_LOG)
    assert complete_log(tmp_path, f"...\nComplete log(s): {log}\n") == log
    newest = tmp_path / ".snakemake" / "log" / "2.snakemake.log"
    newest.parent.mkdir(parents=True)
    newest.write_text("")
    assert complete_log(tmp_path, "no such line") == newest


def test_the_bare_snakefile_has_as_many_jobs():
    text = bare_snakefile(71)
    assert "range(70)" in text and "rule all:" in text and "rule stamp:" in text
    assert "printf '%s\\\\n' \\\"$EPOCHREALTIME\\\" > {output}" in text  # bash's builtin: no process


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_the_copy_holds_what_git_knows_and_data_with_its_times_and_no_results(tmp_path):
    checkout = tmp_path / "checkout"
    for name in ("Snakefile", "workflow/a.py", "results/README.md", "data/README.md", ".gitignore"):
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        (checkout / name).write_text(f"{name}\n" if name != ".gitignore" else "ignored.txt\nresults/*\n!results/README.md\n")
    git(checkout, "init", "-q")
    git(checkout, "add", ".")
    (checkout / "workflow" / "new.py").write_text("")  # not committed yet: part of the code under test
    (checkout / "ignored.txt").write_text("")
    (checkout / "results" / "cpu" / "cells").mkdir(parents=True)
    (checkout / "results" / "cpu" / "cells" / "row.csv").write_text("")
    (checkout / ".snakemake").mkdir()
    (checkout / ".snakemake" / "state").write_text("")
    (checkout / "data" / "input_64.png").write_bytes(b"png")
    os.utime(checkout / "data" / "input_64.png", (1_600_000_000, 1_600_000_000))
    target = tmp_path / "copy"
    copy_checkout(checkout, target)
    copied = sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())
    assert copied == [".gitignore", "Snakefile", "data/README.md", "data/input_64.png", "workflow/a.py",
                      "workflow/new.py"]
    assert (target / "data" / "input_64.png").stat().st_mtime == 1_600_000_000


def test_a_checkout_without_git_is_copied_by_its_workflow_folders(tmp_path):
    checkout = tmp_path / "checkout"
    for name in ("Snakefile", "workflow/rules/a.smk", "config/c.yaml", "notes.txt", "workflow/__pycache__/a.pyc"):
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        (checkout / name).write_text("")
    copy_checkout(checkout, tmp_path / "copy")
    assert sorted(str(p.relative_to(tmp_path / "copy")) for p in (tmp_path / "copy").rglob("*") if p.is_file()) == \
        ["Snakefile", "config/c.yaml", "workflow/rules/a.smk"]


def test_options_after_double_dash_go_to_both_runs():
    _, args = parse(["bench-pipeline", "--cores", "2", "--", "--scheduler", "greedy"])
    assert (args.cores, args.configfile, snakemake_options(args.extra)) == (2, "config/config.yaml",
                                                                            ["--scheduler", "greedy"])
    assert snakemake_options(parse(["bench-pipeline"])[1].extra) == []
    with pytest.raises(UserError, match="after --"):
        snakemake_options(["stray"])


def test_a_failed_run_is_one_error_line_naming_its_log_which_is_kept(tmp_path):
    checkout = tmp_path / "checkout"
    (checkout / "config").mkdir(parents=True)
    (checkout / "config" / "config.yaml").write_text("{}\n")
    (checkout / "Snakefile").write_text("rule all:\n    output: 'x'\n    shell: 'exit 3'\n")
    result = convlab("bench-pipeline", "--checkout", str(checkout), "--keep", str(tmp_path / "kept"), cwd=tmp_path,
                     timeout=120)
    assert result.returncode == 2, result.stderr
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("error: snakemake --cores 1 --configfile config/config.yaml failed"), result.stderr
    log = Path(error.rsplit("log: ", 1)[1])
    assert log == tmp_path / "kept" / "logs" / "pipeline.log" and log.is_file()
    assert "Traceback" not in result.stderr


@pytest.mark.pipeline
def test_bench_pipeline_on_the_tiny_cpu_grid(tmp_path):
    checkout = copy_repo(tmp_path / "repo")
    (tmp_path / "tmp").mkdir()
    out = tmp_path / "figures.json"
    result = convlab("bench-pipeline", "--checkout", str(checkout), "--configfile", TINY, "--cores", "1",
                     "--out", str(out), "--", "--scheduler", "greedy", cwd=tmp_path, service=None, timeout=900,
                     TMPDIR=str(tmp_path / "tmp"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert figures["cells"] == 36 and figures["jobs"] > figures["cells"] and figures["noop_idle"]
    assert figures["bare_stamps"] == figures["jobs"] - 1
    positive = ("gap_median_ms", "gap_p90_ms", "bare_per_job_ms", "gap_per_bare_job", "job_median_ms",
                "service_median_ms", "overhead_median_ms", "timing_sum_s", "service_sum_s", "wall_s",
                "wall_per_timing", "before_cells_s", "cell_stage_s", "after_cells_s", "cell_stage_per_service",
                "service_per_timing",
                "noop_s", "bare_wall_s", "bare_noop_s", "wall_per_bare_wall")
    for name in positive:
        assert isinstance(figures[name], float) and math.isfinite(figures[name]) and figures[name] > 0, name
    assert math.isfinite(figures["noop_over_bare_s"]) and math.isfinite(figures["row_written_median_ms"])
    for phase in ("startup", "connect", "queue", "load", "timing", "e2e", "verify", "settle"):
        assert math.isfinite(figures["phase_median_ms"][phase]), phase
    assert [t["met"] in (True, False) for t in figures["targets"]] == [True] * 9
    for label in ("Snakemake gap per cell (median)", "bare Snakemake per job", "client start-up",
                  "timing (the GPU work)", "Σ timing", "wall / Σ timing", "no-op", "bare no-op", "targets"):
        assert label in result.stdout, label
    assert "n/a" not in result.stdout, result.stdout


def test_cell_jobs_side_by_side_have_no_gap_and_their_targets_are_not_judged(planted):
    """With more than one core, cell jobs overlap: the time from one's end to the next one's start
    is negative, no gap of Snakemake's. No gap figure is made of it, and its targets say n/a, never
    met."""
    cells, runs = planted
    overlapping = [cells[0], replace(cells[1], start=cells[0].start + 0.01, end=cells[0].end + 0.01), *cells[2:]]
    f = pipeline_figures(overlapping, runs)
    assert f["cells_side_by_side"] and not pipeline_figures(cells, runs)["cells_side_by_side"]
    assert f["gap_median_ms"] is None and f["gap_p90_ms"] is None and f["gap_per_bare_job"] is None
    assert f["overhead_median_ms"] is None and f["bare_per_job_ms"] == near(20)
    gap_target = next(t for t in targets(f) if t.text.startswith("Snakemake gap per cell"))
    assert gap_target.met is None
    table = format_table(f)
    gap = next(line for line in table.splitlines() if "Snakemake gap per cell (median)" in line)
    assert "n/a" in gap and "side by side" in gap and "ratio" not in gap
    marks = table.splitlines()[table.splitlines().index("targets") + 1:]
    gap_mark = next(line for line in marks if "Snakemake gap per cell" in line)
    assert gap_mark.split("  ")[1].strip() == "n/a"
