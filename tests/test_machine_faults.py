"""Faults of the machine, not of the workflow, as one line that names the path and the fix: a
read-only folder, a full disk, a file-size limit, an unwritable cache folder, the Snakefile run
from another folder, a GPU backend on a machine without one."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest
from snakemake_interface_logger_plugins.common import LogEvent
from workflow_helpers import copy_repo, snakemake_command, snakemake_env

REPO = Path(__file__).resolve().parents[1]
# the plugin's source in this checkout, ahead of the copy pip installed
sys.path.insert(0, str(REPO / "workflow/logger"))
from snakemake_logger_plugin_convlab.display import PlainDisplay  # noqa: E402
from snakemake_logger_plugin_convlab.faults import fault_line  # noqa: E402
from snakemake_logger_plugin_convlab.reporter import STOPPING_LINE, Reporter  # noqa: E402

from convlab.plan.configfile import check_working_directory  # noqa: E402
from convlab.status import UserError  # noqa: E402


def traceback_of(cause: str) -> str:
    return f'Traceback (most recent call last):\n  File "/x/convlab/atomicfile.py", line 30, in write\n{cause}\n'


@pytest.mark.parametrize("cause,says", [
    ("OSError: [Errno 30] Read-only file system: 'results/h100/summary.csv'",
     ["results/h100/summary.csv is on a read-only file system", "make that folder writable"]),
    ("OSError: [Errno 28] No space left on device: 'results/h100/summary/conv2d.csv'",
     ["results/h100/summary/conv2d.csv could not be written: the disk is full", "free space on that disk"]),
    ("OSError: [Errno 27] File too large: 'data/source_4096.png'",
     ["data/source_4096.png could not be written: larger than this shell's file-size limit", "ulimit -f unlimited"]),
    ("PermissionError: [Errno 13] Permission denied: 'results/h100'",
     ["results/h100 cannot be written (permission denied)", "chmod -R u+w"]),
])
def test_an_oserror_of_the_machine_is_one_line_with_its_path_and_fix(cause, says):
    line = fault_line(cause)
    assert line is not None and line.startswith("error: ") and "\n" not in line
    assert all(part in line for part in says), line


def test_a_fault_whose_message_names_no_path_names_the_folder_the_run_cannot_write(tmp_path, monkeypatch):
    (tmp_path / "results").mkdir()
    (tmp_path / "data").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(os, "access", lambda path, mode: path != "results")
    assert fault_line("OSError: [Errno 30] Read-only file system").startswith(
        "error: results/ is on a read-only file system: make that folder writable")


def test_an_unwritable_cache_folder_names_the_variable_and_the_fix(monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", "/proc/nothing")
    line = fault_line("FileNotFoundError: [Errno 2] No such file or directory: '/proc/nothing'")
    assert line.startswith("error: the cache folder XDG_CACHE_HOME=/proc/nothing cannot be made or written")
    assert "export XDG_CACHE_HOME=$HOME/.cache" in line
    # a program's own missing file is no fault of the machine
    assert fault_line("FileNotFoundError: [Errno 2] No such file or directory: 'results/x.csv'") is None
    assert fault_line("ValueError: not a number") is None


def test_the_reporter_shows_a_fault_of_the_machine_as_its_one_line_not_a_traceback():
    written: list[str] = []
    reporter = Reporter(PlainDisplay(written.append), complete_log=lambda: "/repo/.snakemake/log/x.log")
    message = traceback_of("OSError: [Errno 30] Read-only file system: 'results/h100/summary.csv'")
    reporter.handle(logging.makeLogRecord({"msg": message, "levelno": logging.ERROR, "levelname": "ERROR",
                                           "event": LogEvent.ERROR, "exception": "OSError"}))
    lines = "".join(written).splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: results/h100/summary.csv is on a read-only file system")


def test_a_stop_asked_for_is_one_line_however_often_snakemake_says_so():
    written: list[str] = []
    reporter = Reporter(PlainDisplay(written.append), complete_log=lambda: "/repo/.snakemake/log/x.log")
    for _ in range(4):  # at the signal, and at each job that ends meanwhile
        reporter.handle(logging.makeLogRecord({"msg": "Will exit after finishing currently running jobs (scheduler).",
                                               "levelno": logging.INFO, "levelname": "INFO"}))
    assert "".join(written).splitlines() == [STOPPING_LINE]
    assert "run snakemake again" in STOPPING_LINE


def test_the_working_directory_must_be_the_checkout(tmp_path):
    check_working_directory(REPO, REPO)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with pytest.raises(UserError, match=rf"run it there \(cd {REPO}\), or add --directory {REPO}"):
        check_working_directory(REPO, elsewhere)


@pytest.mark.pipeline
def test_the_snakefile_run_from_another_folder_is_one_line_naming_the_fix(tmp_path):
    import subprocess

    repo = copy_repo(tmp_path / "repo")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    command = snakemake_command(1, "-s", str(repo / "Snakefile"), "--dry-run",
                                configfile=str(repo / "config" / "tiny-cpu.yaml"))
    result = subprocess.run(command, cwd=elsewhere, env=snakemake_env(repo), capture_output=True, text=True,
                            timeout=300)
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert errors == [f"error: snakemake runs in {elsewhere.resolve()}, but the workflow's files (kernels/, config/) "
                      f"are in {repo.resolve()}: run it there (cd {repo.resolve()}), or add --directory "
                      f"{repo.resolve()}"], result.stderr
    assert "MissingInputException" not in result.stderr + result.stdout


@pytest.mark.pipeline
def test_an_unwritable_cache_folder_stops_the_run_with_its_one_line(tmp_path):
    import subprocess

    repo = copy_repo(tmp_path / "repo")
    env = {**snakemake_env(repo), "XDG_CACHE_HOME": "/proc/convlab-cache"}
    result = subprocess.run(snakemake_command(1), cwd=repo, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "XDG_CACHE_HOME=/proc/convlab-cache" in errors[0], result.stderr
    assert "Traceback" not in result.stderr and os.path.exists(repo / "Snakefile")
