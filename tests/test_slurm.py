"""Cluster submission through Snakemake's Slurm executor plugin, against a real (local) Slurm.

The tiny cpu config is submitted with the project's profile (workflow/profiles/slurm),
grouped 32 cells per sbatch, and the summary must equal a local run's rows, times aside.
"""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from slurm_cluster import LocalSlurm, unavailable_reason

pytestmark = pytest.mark.pipeline
TINY = "config/tiny-cpu.yaml"
# what differs between two runs of the same cells: timings and provenance
VOLATILE = ["kernel_ms", "kernel_ms_min", "kernel_ms_max", "kernel_ms_iqr", "reps", "timing_stop", "setup_ms",
            "e2e_ms", "gflops", "gbps", "copy_gbps", "floor_ms", "pct_of_floor", "stage_ms", "started_at",
            "finished_at", "host", "git_commit", "phase_ms", "job_ms", "service_ms"]
ORDER = ["experiment", "kernel", "variant", "size", "batch", "C_in", "C_out", "W", "stride", "filter_size"]


@pytest.fixture(scope="module")
def slurm():
    reason = unavailable_reason()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the Slurm test, but: {reason}")
        pytest.skip(reason)
    if shutil.which("snakemake") is None and not (Path(sys.executable).parent / "snakemake").exists():
        pytest.skip("snakemake is not on PATH")
    try:
        import snakemake_executor_plugin_slurm  # noqa: F401
    except ImportError:
        pytest.fail("snakemake-executor-plugin-slurm is not installed: pip install -r envs/requirements-test.txt")
    cluster = LocalSlurm()
    cluster.start()
    yield cluster
    cluster.stop()


def env_with_python() -> dict:
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def copy_repo(target: Path) -> Path:
    from conftest import REPO

    shutil.copytree(REPO, target, ignore=shutil.ignore_patterns(
        ".git", ".snakemake", "results", "data", "__pycache__", ".pytest_cache", ".whl", ".venv"))
    return target


def submissions(repo: Path) -> int:
    """sbatch submissions made by the run, counted from the plugin's log directory."""
    logs = repo / ".snakemake" / "slurm_logs"
    return len(list(logs.rglob("*.log"))) if logs.exists() else 0  # one log per sbatch job


def run_on_slurm(repo: Path, *extra: str, timeout_s: float = 600) -> tuple[subprocess.CompletedProcess, int]:
    command = [
        sys.executable, "-m", "snakemake", "--workflow-profile", "workflow/profiles/slurm",
        "--configfile", TINY, "--cores", str(os.cpu_count()),
        "--slurm-no-account",
        "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "2",
        "--slurm-keep-successful-logs", *extra,
    ]
    process = subprocess.Popen(command, cwd=repo, env=env_with_python(), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        output, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGINT)  # Snakemake cancels its Slurm jobs on SIGINT
        output, _ = process.communicate(timeout=60)
        raise AssertionError(f"the Slurm run did not finish in {timeout_s} s:\n{output[-4000:]}") from None
    result = subprocess.CompletedProcess(command, process.returncode, output, "")
    assert result.returncode == 0, output[-6000:]
    return result, submissions(repo)


def test_slurm_run_matches_a_local_run(slurm, tmp_path):
    local = copy_repo(tmp_path / "local")
    subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", TINY], cwd=local,
                   env=env_with_python(), check=True, capture_output=True, timeout=600)

    cluster = copy_repo(tmp_path / "cluster")
    started = time.monotonic()
    result, grouped = run_on_slurm(cluster)
    wall = time.monotonic() - started
    print(f"\nSlurm run with grouping: {grouped} sbatch submissions, {wall:.0f} s")

    def keep(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.drop(columns=VOLATILE).sort_values(ORDER).reset_index(drop=True)

    on_slurm = pd.read_csv(cluster / "results/summary.csv")
    at_home = pd.read_csv(local / "results/summary.csv")
    assert len(on_slurm) == len(at_home) > 30 and set(on_slurm["status"]) <= {"ok", "unsupported"}
    pd.testing.assert_frame_equal(keep(on_slurm), keep(at_home))
    # the tiny config's cells in groups of 32, plus the bandwidth, ceiling and 2 gallery jobs:
    # far fewer than one job per cell
    assert 1 <= grouped <= 7, result.stdout[-3000:]


def test_grouping_cuts_submissions(slurm, tmp_path):
    """The same workflow without grouping submits one sbatch job per cell."""
    repo = copy_repo(tmp_path / "ungrouped")
    started = time.monotonic()
    _, ungrouped = run_on_slurm(repo, "--group-components", "cells=1")
    print(f"\nSlurm run without grouping: {ungrouped} sbatch submissions, {time.monotonic() - started:.0f} s")
    assert ungrouped >= 30 + 1  # a job per cell, plus the bandwidth and gallery jobs
