"""What a plain `snakemake` prints with the default profile (profiles/default) and the project's
logger plugin (workflow/logger/): the backend line, the plan in one line, the cells done and the
time left (on a terminal, one status line redrawn in place), the project's own `warning:`/`error:`
lines, a final line, and no per-job blocks; those stay in the complete log under .snakemake/log/."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest
from workflow_helpers import FinishedRun, cell_rows, copy_finished_run, snakemake, snakemake_command, snakemake_env

pytestmark = pytest.mark.pipeline

# Lines of Snakemake's per-job blocks (its default logger), none of which a default run shows.
JOB_BLOCK_LINE = re.compile(r"^\s*(jobid:|localrule \w+:|rule \w+:|reason:|output:|input:|wildcards:|"
                            r"Finished jobid|Select jobs to execute|Execute \d+ jobs)")
# What Snakemake may print before the Snakefile is read: which profile it uses, and that
# --configfile extends the config (a start-up note the logger plugin leaves to the complete log).
# The project's backend line comes right after.
SNAKEMAKE_PREAMBLE = ("Using workflow specific profile profiles/default ", "Config file config/config.yaml is extended")
COMPLETE_LOG = re.compile(r"^Complete log\S*: (\S+)$", re.IGNORECASE | re.MULTILINE)
TERMINAL_ROWS = 40
# The status line drawn on the terminal's last row: cursor saved, moved there, the row erased,
# the text, cursor restored (the jobs' own lines scroll above it).
STATUS_DRAW = re.compile(rf"\x1b7\x1b\[{TERMINAL_ROWS};1H\x1b\[2K([^\x1b]*)\x1b8")


@pytest.fixture
def quiet_run(tiny_run: FinishedRun) -> tuple[Path, subprocess.CompletedProcess]:
    """The tiny cpu grid from nothing, output captured (not a terminal): the session's tiny run,
    read only (a test that runs again works on a copy)."""
    return tiny_run.repo, tiny_run.result


def test_a_run_prints_a_screenful_and_no_job_blocks(quiet_run):
    repo, result = quiet_run
    lines = (result.stdout + result.stderr).splitlines()
    printed = [line for line in lines if line.strip()]
    assert len(printed) < 25, "\n".join(lines)
    assert not [line for line in lines if JOB_BLOCK_LINE.match(line)], "\n".join(lines)
    # not a terminal: progress as a few lines, nothing redrawn
    assert "\x1b" not in result.stderr and "\r" not in result.stderr, result.stderr[-3000:]
    cells = len(cell_rows(repo))
    plan = re.search(r"^plan: (\d+) jobs, (\d+) cells$", result.stderr, re.MULTILINE)
    assert plan and int(plan[2]) == cells > 0 and int(plan[1]) > cells, result.stderr[-3000:]
    assert re.search(rf"^cells {cells}/{cells} measured in \d+:\d\d$", result.stderr, re.MULTILINE), result.stderr


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
    repo = copy_finished_run(quiet_run[0], tmp_path / "repo")
    cells = len(cell_rows(repo))
    # every cell measured again, and everything made from them: cells and jobs for the display to count
    returncode, drawn = run_in_terminal(repo, "--forcerun", "cell", rows=TERMINAL_ROWS)
    assert returncode == 0, drawn[-3000:]
    statuses = STATUS_DRAW.findall(drawn)
    assert statuses and all(re.match(rf"cells \d+/{cells} · jobs \d+/\d+ · \d+:\d\d elapsed · ", status)
                            for status in statuses), drawn[-3000:]
    assert len(set(statuses)) > 2, statuses  # redrawn as the run goes on
    assert any(re.search(r" · about \d+:\d\d left$", status) for status in statuses), statuses
    # drawn in place: only ever on the last row (the rest of the screen scrolls above it), and
    # that row is given back before the final line
    assert f"\x1b[1;{TERMINAL_ROWS - 1}r" in drawn, drawn[:3000]
    elsewhere = STATUS_DRAW.sub("", drawn)
    assert not re.search(r"cells \d+/\d+ ·", elsewhere), elsewhere[-3000:]
    assert re.search(rf"\x1b\[r\x1b8cells {cells}/{cells} measured in \d+:\d\d\r?\n", drawn), drawn[-3000:]
    assert not [line for line in re.split(r"[\r\n]+", elsewhere) if JOB_BLOCK_LINE.match(line)], drawn[-3000:]


def test_a_failing_cell_shows_its_error_line(quiet_run, tmp_path):
    repo = copy_finished_run(quiet_run[0], tmp_path / "repo")
    picture = repo / "data/input_64.png"
    picture.write_bytes(picture.read_bytes()[:100])  # cut: the cells of size 64 cannot read it
    result = snakemake(repo, 1, check=False)
    assert result.returncode != 0
    # the failing cell's log ends in its one error line, and the terminal shows that line whole
    logs = sorted((repo / "results").glob("*/logs/cells/**/size~64/**/*.log"), key=lambda path: path.stat().st_mtime)
    error = logs[-1].read_text().strip().splitlines()[-1]
    assert error.startswith("error: ") and "input_64.png" in error and "could not decode" in error, error
    lines = result.stderr.splitlines()
    assert error in lines, result.stderr[-3000:]
    # then Snakemake's job error in one line, naming the rule and that log, and no wall of text
    assert f"error: rule cell failed; its log: {logs[-1].relative_to(repo)}" in lines, result.stderr[-3000:]
    assert len([line for line in lines if line.strip()]) < 15 and "set -euo pipefail" not in result.stderr, \
        result.stderr[-3000:]
    assert re.match(r"stopped after \d+:\d\d: cells \d+/\d+ measured, jobs \d+/\d+ done, 1 failed$", lines[-1]), \
        result.stderr[-3000:]
