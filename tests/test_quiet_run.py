"""What a plain `snakemake` prints with the default profile (profiles/default): the backend line,
a progress display on a terminal, the project's own `warning:`/`error:` lines, and no per-job
blocks; those stay in the complete log under .snakemake/log/."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import shutil
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest
from workflow_helpers import cell_rows, copy_repo, snakemake, snakemake_command, snakemake_env

pytestmark = pytest.mark.pipeline

# Lines of Snakemake's per-job blocks (its default logger), none of which a default run shows.
JOB_BLOCK_LINE = re.compile(r"^\s*(jobid:|localrule \w+:|rule \w+:|reason:|output:|input:|wildcards:|"
                            r"Finished jobid|Select jobs to execute|Execute \d+ jobs)")
# What Snakemake prints before the Snakefile is read: which profile it uses, and that --configfile
# extends the config. The project's backend line comes right after.
SNAKEMAKE_PREAMBLE = ("Using workflow specific profile profiles/default ", "Config file config/config.yaml is extended")
COMPLETE_LOG = re.compile(r"^Complete log\S*: (\S+)$", re.IGNORECASE | re.MULTILINE)


@pytest.fixture(scope="module")
def quiet_run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """The tiny cpu grid from nothing, output captured (not a terminal)."""
    repo = copy_repo(tmp_path_factory.mktemp("quiet") / "repo")
    return repo, snakemake(repo, 2)


def test_a_run_prints_a_screenful_and_no_job_blocks(quiet_run):
    _, result = quiet_run
    lines = (result.stdout + result.stderr).splitlines()
    printed = [line for line in lines if line.strip()]
    assert len(printed) < 40, "\n".join(lines)
    assert not [line for line in lines if JOB_BLOCK_LINE.match(line)], "\n".join(lines)


def test_the_backend_line_comes_first(quiet_run):
    _, result = quiet_run
    lines = result.stderr.splitlines()
    first = next(line for line in lines if not line.startswith(SNAKEMAKE_PREAMBLE))
    assert first.startswith("backend cpu: "), result.stderr[:2000]


def test_the_complete_log_keeps_every_job(quiet_run):
    repo, result = quiet_run
    logs = COMPLETE_LOG.findall(result.stdout + result.stderr)
    assert len(logs) == 1, result.stdout + result.stderr
    log = Path(logs[0]).read_text()
    assert log.count("rule cell:") == len(cell_rows(repo)) > 0 and "jobid:" in log


def read_terminal(master: int, process: subprocess.Popen, timeout_s: float) -> bytes:
    """Everything drawn on the terminal until ``process`` exits (and its last output is read).
    A process it started and left running may keep the terminal open, so EOF is not awaited."""
    drawn = bytearray()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every holder of the terminal has closed it
                break
            if not chunk:
                break
            drawn += chunk
        elif process.poll() is not None:
            break
    return bytes(drawn)


def run_in_terminal(repo: Path, *args: str, columns: int = 120, rows: int = 40) -> tuple[int, str]:
    """snakemake with a pseudo-terminal as its stdin, stdout and stderr, as in an interactive shell."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    env = {**snakemake_env(repo), "TERM": "xterm-256color"}
    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "COLUMNS", "LINES"):
        env.pop(name, None)
    process = subprocess.Popen(snakemake_command(1, *args), cwd=repo, env=env, stdin=slave, stdout=slave,
                               stderr=slave, start_new_session=True)
    os.close(slave)
    try:
        drawn = read_terminal(master, process, timeout_s=600)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
        os.close(master)
    return process.returncode, drawn.decode("utf-8", errors="replace")


def test_a_terminal_shows_the_progress_display(quiet_run, tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(quiet_run[0], repo, symlinks=True)
    # the summary and everything made from it run again: jobs for the display to count
    returncode, drawn = run_in_terminal(repo, "--forcerun", "aggregate")
    assert returncode == 0, drawn[-3000:]
    assert "Total Progress" in drawn and re.search(r"\b\d{1,3}%", drawn), drawn[-3000:]
    assert "\x1b[" in drawn  # drawn in place with terminal control sequences, not printed line by line
    assert not [line for line in re.split(r"[\r\n]+", drawn) if JOB_BLOCK_LINE.match(line)], drawn[-3000:]


def test_a_failing_cell_shows_its_error_line(quiet_run, tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(quiet_run[0], repo, symlinks=True)
    picture = repo / "data/input_64.png"
    picture.write_bytes(picture.read_bytes()[:100])  # cut: the cells of size 64 cannot read it
    result = snakemake(repo, 1, check=False)
    assert result.returncode != 0
    # the failing cell's log ends in its one error line, and the terminal shows that line whole
    logs = sorted((repo / "results").glob("*/logs/cells/**/size~64/**/*.log"), key=lambda path: path.stat().st_mtime)
    error = logs[-1].read_text().strip().splitlines()[-1]
    assert error.startswith("error: ") and "input_64.png" in error and "could not decode" in error, error
    assert error in result.stderr.splitlines(), result.stderr[-3000:]
