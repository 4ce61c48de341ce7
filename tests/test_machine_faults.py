"""Faults of the machine, not of the workflow, as one line that names the path and the fix: a
read-only folder, a full disk, a file-size limit, an unwritable cache folder, a job killed by a
signal, the Snakefile run from another folder, a GPU backend on a machine without one."""

from __future__ import annotations

import logging
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from snakemake_interface_logger_plugins.common import LogEvent
from workflow_helpers import copy_repo, snakemake_command, snakemake_env

REPO = Path(__file__).resolve().parents[1]
# the plugin's source in this checkout, ahead of the copy pip installed
sys.path.insert(0, str(REPO / "workflow/logger"))
from snakemake_logger_plugin_convlab.display import PlainDisplay  # noqa: E402
from snakemake_logger_plugin_convlab.machinefaults import fault_line, folder_fault, signal_words  # noqa: E402
from snakemake_logger_plugin_convlab.reporter import INTERRUPTED_LINE, STOPPING_LINE, Reporter  # noqa: E402

from convlab.plan.configfile import check_working_directory  # noqa: E402
from convlab.snakefile.jobshell import logged  # noqa: E402
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


def test_ctrl_c_is_one_line_saying_how_to_go_on_and_the_jobs_it_stopped_are_no_failures():
    written: list[str] = []
    reporter = Reporter(PlainDisplay(written.append), complete_log=lambda: "/repo/.snakemake/log/x.log")
    reporter.handle(logging.makeLogRecord({"event": LogEvent.RUN_INFO, "stats": {"cell": 4, "total": 5}}))
    reporter.handle(logging.makeLogRecord({"msg": "Terminating processes on user request, this might take some time.",
                                           "levelno": logging.INFO, "levelname": "INFO"}))
    for _ in range(3):  # each job the interruption stopped
        reporter.handle(logging.makeLogRecord({"event": LogEvent.JOB_ERROR, "rule_name": "cell",
                                               "log": ["results/x/logs/cells/a.log"]}))
    reporter.handle(logging.makeLogRecord({"msg": "At least one job did not complete successfully.",
                                           "levelno": logging.ERROR, "levelname": "ERROR", "event": LogEvent.ERROR}))
    reporter.close()
    lines = "".join(written).splitlines()
    assert lines[1] == INTERRUPTED_LINE and "run the same snakemake command again" in INTERRUPTED_LINE
    assert not any(line.startswith("error:") for line in lines), lines
    assert lines[-1].startswith("stopped after ") and "failed" not in lines[-1]


def test_the_working_directory_must_be_the_checkout(tmp_path):
    check_working_directory(REPO, REPO)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with pytest.raises(UserError, match=rf"run it there \(cd {REPO}\), or add --directory {REPO}"):
        check_working_directory(REPO, elsewhere)


@pytest.mark.pipeline
def test_the_snakefile_run_from_another_folder_is_one_line_naming_the_fix(tmp_path):
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
    repo = copy_repo(tmp_path / "repo")
    env = {**snakemake_env(repo), "XDG_CACHE_HOME": "/proc/convlab-cache"}
    result = subprocess.run(snakemake_command(1), cwd=repo, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "XDG_CACHE_HOME=/proc/convlab-cache" in errors[0], result.stderr
    assert "Traceback" not in result.stderr and os.path.exists(repo / "Snakefile")


def run_logged(command: str, log: Path) -> subprocess.CompletedProcess:
    """``command`` in the shell line a rule gives it, as Snakemake runs it (bash, strict mode)."""
    line = logged(command).format(log=log)
    return subprocess.run(["bash", "-c", f"set -euo pipefail; {line}"], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("command,says", [
    (f"{sys.executable} -c 'import os, signal; os.kill(os.getpid(), signal.SIGKILL)'",
     "error: this job's process died of SIGKILL (killed from outside: kill, the out-of-memory killer or a batch "
     "system's limit): run again"),
    ("sh -c 'kill -XFSZ $$'", "error: this job's process died of SIGXFSZ (it wrote past this shell's file-size "
     "limit): raise the limit (ulimit -f unlimited) and run again"),
    ("sh -c 'kill -USR1 $$'", "error: this job's process died of SIGUSR1: run again"),
])
def test_a_job_killed_by_a_signal_says_so_in_its_log_and_on_the_terminal(tmp_path, command, says):
    log = tmp_path / "cell.log"
    result = run_logged(command, log)
    assert result.returncode == 1
    assert result.stderr.startswith(says) and len(result.stderr.splitlines()) == 1, result.stderr
    # the log keeps the line too: no empty log to be pointed at; bash's notice (the command) stays there
    assert log.read_text().splitlines()[-1] == result.stderr.strip()


def test_a_job_that_fails_or_is_asked_to_stop_shows_its_own_last_line(tmp_path):
    log = tmp_path / "cell.log"
    failed = run_logged("sh -c \"echo working; echo 'error: the cell cannot run: its reason'; exit 3\"", log)
    assert failed.returncode == 1 and failed.stderr.splitlines() == ["error: the cell cannot run: its reason"]
    # a stop asked for is said once by the run, not by each job it stops
    stopped = run_logged("sh -c 'echo working; kill -TERM $$'", log)
    assert stopped.returncode == 1 and stopped.stderr == ""
    warned = run_logged("sh -c 'echo \"warning: slow disk\"; echo done'", log)
    assert warned.returncode == 0 and warned.stderr.splitlines() == ["warning: slow disk"]


def test_the_reporter_names_the_signal_that_killed_a_jobs_shell():
    written: list[str] = []
    reporter = Reporter(PlainDisplay(written.append), complete_log=lambda: "/repo/.snakemake/log/x.log")
    command = "set -euo pipefail; " + "python -m convlab cell --spec '{...}' " * 30
    reporter.handle(logging.makeLogRecord({
        "msg": f"CalledProcessError in file \"/repo/workflow/rules/cells.smk\", line 90:\nCommand '{command}' died "
               "with <Signals.SIGKILL: 9>.", "levelno": logging.ERROR, "levelname": "ERROR", "event": LogEvent.ERROR,
        "exception": "RuleException"}))
    reporter.handle(logging.makeLogRecord({"msg": "Error in rule cell", "levelno": logging.ERROR, "levelname": "ERROR",
                                           "event": LogEvent.JOB_ERROR, "rule_name": "cell",
                                           "log": ["results/h100/logs/cells/x.log"]}))
    lines = "".join(written).splitlines()
    assert lines == [f"error: rule cell failed: its shell died of {signal_words('SIGKILL')}; "
                     "its log: results/h100/logs/cells/x.log"]
    assert "out-of-memory killer" in lines[0] and "run again" in lines[0]


def test_ffmpeg_stopped_by_the_file_size_limit_is_one_line_with_the_fix(tmp_path):
    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))

    result = subprocess.run([sys.executable, "-m", "convlab", "source", "--size", "256",
                             "--out", str(tmp_path / "source_256.png")],
                            env={**os.environ, "PYTHONPATH": str(REPO / "workflow"), "CONVLAB_SERVICE": "off"},
                            preexec_fn=small_files, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: could not render the 256x256 source: ffmpeg died of SIGXFSZ (it wrote past this shell's file-size "
        "limit): raise the limit (ulimit -f unlimited) and run again"], result.stderr
    # no partial picture stays behind for a later run to take as made
    assert list(tmp_path.iterdir()) == []


class FullDisk:
    f_bavail = 0
    f_frsize = 4096


def test_a_write_to_a_full_disk_that_names_no_file_names_the_full_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results").mkdir()
    monkeypatch.setattr(os, "statvfs", lambda folder: FullDisk())
    assert fault_line("OSError: [Errno 28] No space left on device") == (
        "error: results/ could not be written: the disk is full: free space on that disk and run again (data/ and the "
        "drawings under results/<device>/ can be made again; its history.sqlite and cells/ hold the measurements: keep "
        "them)")


def test_a_failed_job_whose_log_is_empty_on_a_full_disk_says_the_disk_is_full(tmp_path, monkeypatch):
    log = tmp_path / "logs" / "cell.log"
    log.parent.mkdir()
    log.write_text("")  # the job could write no line of its own
    assert folder_fault(str(log)) is None  # an empty log on a disk with room: no fault of the machine
    monkeypatch.setattr(os, "statvfs", lambda folder: FullDisk())
    written: list[str] = []
    reporter = Reporter(PlainDisplay(written.append), complete_log=lambda: "/repo/.snakemake/log/x.log")
    reporter.handle(logging.makeLogRecord({"msg": "Error in rule cell", "levelno": logging.ERROR, "levelname": "ERROR",
                                           "event": LogEvent.JOB_ERROR, "rule_name": "cell", "log": [str(log)]}))
    said = [f"error: rule cell failed; its log: {log}",
            f"error: {log} could not be written: the disk is full: free space on that disk and run again (data/ and the "
            "drawings under results/<device>/ can be made again; its history.sqlite and cells/ hold the measurements: "
            "keep them)"]
    assert "".join(written).splitlines() == said
    # the next job the full disk fails: its own line, and no second line of the same fault
    reporter.handle(logging.makeLogRecord({"msg": "Error in rule cell", "levelno": logging.ERROR, "levelname": "ERROR",
                                           "event": LogEvent.JOB_ERROR, "rule_name": "cell", "log": [str(log)]}))
    assert "".join(written).splitlines() == [*said, f"error: rule cell failed; its log: {log}"]
