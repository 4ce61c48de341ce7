"""Faults in the real workflow (tiny cpu config, in a temporary copy) leave nothing stale and lose
nothing: a report step that fails leaves no output from before, and the next plain run makes it
again; rows of a run that could not record them are added by the next run, although their cells
were measured again meanwhile; a second run beside a live one stops with one line naming it.

A full disk is planted with a `sitecustomize` on the jobs' PYTHONPATH: in the measurement service's
processes (which start with site), renaming a file over the named output fails with ENOSPC, as
writing it on a full disk would. The service the run before left warm is stopped first: it was
started without the planted file."""

from __future__ import annotations

import csv
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from workflow_helpers import (
    RESULTS,
    FinishedRun,
    cell_rows,
    copy_finished_run,
    snakemake,
    snakemake_command,
    snakemake_env,
)

from convlab.history import store
from convlab.measure.row import read_row_file

pytestmark = pytest.mark.pipeline

FULL_DISK = '''import os
_target = os.environ.get("CONVLAB_TEST_FULL_DISK")
if _target:
    _replace = os.replace

    def replace(src, dst, *args, **kwargs):
        if os.fspath(dst).endswith(_target):
            raise OSError(28, "No space left on device", os.fspath(dst))
        return _replace(src, dst, *args, **kwargs)

    os.replace = replace
'''


@pytest.fixture(scope="module")
def built(tiny_run: FinishedRun, tmp_path_factory) -> Path:
    """A copy of the session's tiny run, which this module's tests change in turn."""
    return copy_finished_run(tiny_run.repo, tmp_path_factory.mktemp("faults") / "repo")


def edit_direct(repo: Path) -> None:
    """An edit that re-measures the direct kernel's cells (and redraws what reads them)."""
    with open(repo / "kernels" / "direct.yaml", "a") as description:
        description.write(f"# an edit at {time.time_ns()}\n")


def full_disk_env(repo: Path, target: str) -> dict[str, str]:
    stopped = subprocess.run([sys.executable, "-m", "convlab", "serve", "--stop"], cwd=repo,
                             env={**snakemake_env(repo), "PYTHONPATH": "workflow"}, capture_output=True, text=True,
                             timeout=120)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr  # stopped, or none was running
    planted = repo.parent / "full-disk"
    planted.mkdir(exist_ok=True)
    (planted / "sitecustomize.py").write_text(FULL_DISK)
    env = snakemake_env(repo)
    env["PYTHONPATH"] = f"{planted}:{env['PYTHONPATH']}" if env.get("PYTHONPATH") else str(planted)
    env["CONVLAB_TEST_FULL_DISK"] = target
    return env


def summary_checks(repo: Path) -> set[str]:
    with open(repo / RESULTS / "summary.csv", newline="") as handle:
        return {row["row_check"] for row in csv.DictReader(handle)}


def row_checks(repo: Path) -> set[str]:
    return {read_row_file(path)[-1] for path in cell_rows(repo).values()}


def kept_rows(repo: Path) -> int:
    with sqlite3.connect(store.database_path(repo / RESULTS)) as connection:
        return connection.execute("SELECT count(*) FROM measurements").fetchone()[0]


@pytest.mark.parametrize("target", ["summary.csv", "gallery/direct_96.png"])
def test_a_failed_step_leaves_no_stale_output_and_the_next_run_makes_it_again(built, target):
    output = built / RESULTS / target
    assert output.is_file()
    edit_direct(built)
    failed = snakemake(built, 1, check=False, env=full_disk_env(built, target))
    assert failed.returncode != 0
    # the machine's fault as its one line: the file, what happened and the fix
    errors = [line for line in failed.stderr.splitlines() if line.startswith("error: ") and "the disk is full" in line]
    assert len(errors) == 1 and target.split("/")[-1] in errors[0] and "free space" in errors[0], failed.stderr
    assert not output.exists()  # never the file from before the edit, taken as up to date later
    snakemake(built, 1)
    assert output.is_file()
    assert summary_checks(built) == row_checks(built)
    again = snakemake(built, 1, "--dry-run")
    assert "Nothing to be done" in again.stdout + again.stderr, again.stdout[-3000:]


def test_rows_a_run_could_not_record_are_added_after_their_cells_are_measured_again(built):
    before = kept_rows(built)
    direct = sum("kernel~direct/" in name for name in cell_rows(built))
    edit_direct(built)
    holder = sqlite3.connect(store.database_path(built / RESULTS))
    holder.execute("BEGIN EXCLUSIVE")  # another run writing the database all along
    try:
        locked = snakemake(built, 1)
    finally:
        holder.rollback()
        holder.close()
    assert "warning: history not recorded" in locked.stderr
    assert kept_rows(built) == before
    edit_direct(built)  # the next run measures those cells again: their files are replaced
    recorded = snakemake(built, 1)
    assert kept_rows(built) == before + 2 * direct
    text = recorded.stdout + recorded.stderr
    assert f"recorded: {direct} rows that earlier runs measured but could not record" in text
    verdict = next(line for line in text.splitlines() if line.startswith("verdict: "))
    assert f"verdict: {direct} cells of" in verdict  # the verdict is this run's cells alone


def test_a_run_beside_a_live_one_stops_with_one_line_naming_it(built):
    edit_direct(built)
    env = snakemake_env(built)
    first = subprocess.Popen(snakemake_command(1, "--forcerun", "cell"), cwd=built, env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not list((built / ".snakemake" / "locks").glob("*.lock")) and time.monotonic() < deadline:
            time.sleep(0.2)
        # Held (stopped, alive) while the second run starts: the tiny grid's run may otherwise end
        # before a second run on a loaded machine has read the Snakefile.
        os.kill(first.pid, signal.SIGSTOP)
        assert first.poll() is None, "the first run ended before the second started"
        try:
            second = snakemake(built, 1, check=False)
        finally:
            os.kill(first.pid, signal.SIGCONT)
        ours = [line for line in second.stderr.splitlines() if not line.startswith("Using workflow specific profile")]
        assert second.returncode != 0
        assert len(ours) == 1 and ours[0].startswith(f"error: another run is working in this folder (pid {first.pid}, "
                                                     "started "), second.stderr
        assert "unlock" not in second.stderr.replace("Do not --unlock", "")
        out, err = first.communicate(timeout=600)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 0, err[-3000:]
    assert summary_checks(built) == row_checks(built)
