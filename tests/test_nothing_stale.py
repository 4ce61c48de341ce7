"""Nothing stale, nothing lost, one line each: the faults and bad inputs that once slipped through,
each as a user meets it (the slow tier's real runs of the tiny cpu grid, a copy of one per test)."""

from __future__ import annotations

import shlex
import shutil
import subprocess

import pandas as pd
import pytest
from workflow_helpers import (
    RESULTS,
    convlab,
    copy_finished_run,
    copy_repo,
    planned_cells,
    snakemake,
    snakemake_command,
    snakemake_env,
    terminal_lines,
)

pytestmark = pytest.mark.pipeline

TWIN = "workflow/convlab/backends/cpu_twins/direct_hwc.py"


def read_only_mounts() -> str | None:
    """Why this machine cannot mount a folder read-only for a test (None: it can)."""
    if not shutil.which("unshare"):
        return "no unshare(1) here"
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "mount", "--bind", "-o", "ro", "/", "/mnt"],
                           capture_output=True, text=True)
    return None if probe.returncode == 0 else f"this machine does not let a test mount a folder read-only: {probe.stderr.strip()}"


def test_a_read_only_results_folder_stops_the_run_with_one_line_naming_it(tiny_run, tmp_path):
    why = read_only_mounts()
    if why:
        pytest.skip(why)
    repo = copy_finished_run(tiny_run.repo, tmp_path / "repo")
    with open(repo / TWIN, "a") as twin:
        twin.write("# an edit: its cells are measured again\n")
    run = " ".join(shlex.quote(part) for part in snakemake_command(1))
    result = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                             f"mount --bind -o ro results results && exec {run}"],
                            cwd=repo, env=snakemake_env(repo), capture_output=True, text=True, timeout=600)
    assert result.returncode != 0
    said = terminal_lines(result)
    assert said[-1] == ("error: results is on a read-only file system: make that folder writable, or run from a "
                        "writable copy of the checkout"), result.stderr
    assert len(said) == 2 and said[0].startswith("backend cpu"), result.stderr  # the run's first line, then this


def test_a_locale_that_is_not_installed_is_said_once_not_by_every_job(tiny_run, tmp_path):
    repo = copy_finished_run(tiny_run.repo, tmp_path / "repo")
    with open(repo / TWIN, "a") as twin:
        twin.write("# an edit: its cells are measured again\n")
    result = snakemake(repo, 1, env={**snakemake_env(repo), "LC_ALL": "xx_YY.UTF-8"})
    said = result.stderr.splitlines()
    assert [line for line in said if "xx_YY" in line] == [
        "warning: the locale xx_YY.UTF-8 is not installed here: the run's jobs use C.UTF-8 instead (install it, or "
        "set LC_ALL=C.UTF-8)"], result.stderr
    assert "setlocale" not in result.stderr


def test_a_mapping_given_with_config_keeps_the_numbers_the_user_typed(tmp_path):
    """Snakemake hands a --config mapping's values over as text ('64'): read as the user typed them,
    the grid runs at 64, instead of a schema error about a number the user gave."""
    repo = copy_repo(tmp_path / "repo")
    result = snakemake(repo, 1, "--dry-run", "--config", 'conv2d={"strides": [2], "kernels": [direct]}',
                       'cpu={"sizes": [64], "budget_s": 0.05}')
    conv2d = {cell for cell in planned_cells(result) if "/conv2d/" in cell}
    assert conv2d and all("/conv2d/kernel~direct/size~64/stride~2/" in cell for cell in conv2d), conv2d


def test_a_syntax_error_in_a_cpu_twin_is_its_cells_compile_error_and_a_preview_shows_it_once(tiny_run, tmp_path):
    repo = copy_finished_run(tiny_run.repo, tmp_path / "repo")
    with open(repo / TWIN, "a") as twin:
        twin.write("def broken(:\n")
    previewed = convlab("watch", "--once", "--configfile", "config/tiny-cpu.yaml", cwd=repo,
                        PYTHONPATH=str(repo / "workflow"), TMPDIR=snakemake_env(repo)["TMPDIR"])
    blocks = [line for line in previewed.stdout.splitlines() + previewed.stderr.splitlines()
              if line.startswith("compile error:")]
    # direct and conv_naive_batched share the twin: its error is said once
    assert len(blocks) == 1 and blocks[0].startswith(f"compile error: {TWIN}:") and "SyntaxError" in blocks[0], (
        previewed.stdout + previewed.stderr)
    result = snakemake(repo, 1, check=False)
    summary = repo / RESULTS / "summary.csv"
    rows = [row for row in pd.read_csv(summary).to_dict("records")
            if row["kernel"] in ("direct", "conv_naive_batched")] if summary.exists() else []
    assert "internal error" not in result.stderr, result.stderr
    assert rows and all(row["status"] == "error" and str(row["reason"]).startswith(f"compile: {TWIN}:")
                        for row in rows), [(row["kernel"], row["status"], row["reason"]) for row in rows]


def test_a_report_before_any_run_is_one_line_naming_what_to_run_first(tmp_path):
    repo = copy_repo(tmp_path / "repo")
    result = snakemake(repo, 1, "--report", "results/report.html", check=False)
    assert result.returncode != 0
    assert terminal_lines(result) == [
        f"error: {RESULTS}/summary.csv does not exist, so there is nothing to report yet: run `snakemake "
        "--cores 1` first (with the same --configfile and --config), then `snakemake --report results/report.html`"]
