"""Resuming after `kill -9` of snakemake with one plain `snakemake`: the killed run's lock is removed
(convlab.snakefile.runlock), what was running is run again (the default profile's rerun-incomplete), and
the rows finished before the kill are kept. A live run's lock is never removed."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from base64 import urlsafe_b64decode
from pathlib import Path

import pytest
from workflow_helpers import RESULTS, cell_rows, copy_repo, snakemake, snakemake_command, snakemake_env

from convlab.snakefile.runlock import (
    Run,
    is_alive,
    live_run_line,
    process_start,
    read_runs,
    release_stale_lock,
    this_run,
    write_runs,
)


def dead_run() -> Run:
    """A process of this host that has ended (and been reaped)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return Run(pid=process.pid, host=socket.gethostname(), started=None)


@pytest.fixture
def sleeper():
    process = subprocess.Popen(["sleep", "60"])
    yield process
    process.kill()
    process.wait()


def live_run(process: subprocess.Popen) -> Run:
    return Run(pid=process.pid, host=socket.gethostname(), started=process_start(process.pid))


def locked_folder(tmp_path: Path, runs: list[Run] | None) -> Path:
    """A .snakemake folder with Snakemake's two lock files, and ``runs`` noted (None: no record)."""
    folder = tmp_path / ".snakemake"
    (folder / "locks").mkdir(parents=True)
    (folder / "locks/0.input.lock").write_text("data/input_64.png\n")
    (folder / "locks/0.output.lock").write_text("results/summary.csv\n")
    if runs is not None:
        write_runs(folder, runs)
    return folder


def lock_names(folder: Path) -> list[str]:
    return sorted(path.name for path in (folder / "locks").iterdir())


def test_a_killed_runs_lock_is_removed_and_this_run_noted(tmp_path):
    killed = dead_run()
    folder = locked_folder(tmp_path, [killed])
    line = release_stale_lock(folder)
    assert line == f"warning: a previous run (pid {killed.pid}) was killed; its lock on this folder was removed"
    assert lock_names(folder) == []
    assert read_runs(folder) == [this_run()]


def test_a_live_runs_lock_is_kept_and_this_run_noted_beside_it(tmp_path, sleeper):
    live = live_run(sleeper)
    killed = dead_run()
    folder = locked_folder(tmp_path, [live, killed])
    assert release_stale_lock(folder) is None
    assert lock_names(folder) == ["0.input.lock", "0.output.lock"]
    # never over the live run: when this run has gone and the live one is killed, the lock is stale
    assert read_runs(folder) == [live, killed, this_run()]


def test_a_run_beside_a_live_one_stops_with_one_line_naming_it_and_no_unlock_advice(tmp_path, sleeper):
    live = Run(sleeper.pid, socket.gethostname(), process_start(sleeper.pid), since="2026-11-25T19:20:03")
    for locks in (True, False):  # held, or removed by an --unlock given while it runs
        folder = locked_folder(tmp_path / str(locks), [live])
        if not locks:
            for path in (folder / "locks").iterdir():
                path.unlink()
        line = live_run_line(folder)
        assert line == (f"error: another run is working in this folder (pid {sleeper.pid}, started 2026-11-25 "
                        "19:20:03); wait for it to end, then run again: its rows are kept. Do not --unlock while "
                        "it runs")


def test_a_dead_run_or_this_run_lets_the_run_go_on(tmp_path):
    assert live_run_line(locked_folder(tmp_path / "a", [dead_run()])) is None
    assert live_run_line(locked_folder(tmp_path / "b", [this_run()])) is None
    assert live_run_line(locked_folder(tmp_path / "c", None)) is None


def test_another_hosts_run_holding_the_lock_is_named_with_when_to_unlock(tmp_path):
    remote = Run(4242, "gpu-node-7", None, since="2026-11-25T08:00:00")
    line = live_run_line(locked_folder(tmp_path / "a", [remote]))
    assert line.startswith("error: a run on host gpu-node-7 (pid 4242, started 2026-11-25 08:00:00) holds this folder")
    assert "gone for good" in line
    # without a lock it holds nothing: its run ended
    folder = locked_folder(tmp_path / "b", [remote])
    for path in (folder / "locks").iterdir():
        path.unlink()
    assert live_run_line(folder) is None


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="a zombie is told by its state in /proc")
def test_a_killed_process_not_yet_reaped_is_dead(sleeper):
    run = live_run(sleeper)
    assert is_alive(run)
    os.kill(sleeper.pid, signal.SIGKILL)  # not reaped: Popen.poll() would reap it
    deadline = time.monotonic() + 10
    while is_alive(run) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not is_alive(run)
    os.kill(sleeper.pid, 0)  # the pid still exists, as a zombie


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="process start times come from /proc")
def test_a_reused_pid_is_not_the_run_noted():
    me = this_run()
    assert is_alive(me)
    assert not is_alive(Run(pid=me.pid, host=me.host, started=str(int(me.started) - 1)))


@pytest.mark.parametrize("runs", [None, [], [Run(pid=1, host="another-host")]],
                         ids=["no record", "empty record", "another host"])
def test_a_lock_of_an_unknown_or_unseen_run_is_kept(tmp_path, runs):
    if runs:
        runs = [*runs, dead_run()]
    folder = locked_folder(tmp_path, runs)
    assert release_stale_lock(folder) is None
    assert lock_names(folder) == ["0.input.lock", "0.output.lock"]


def test_without_a_lock_only_live_runs_stay_noted(tmp_path, sleeper):
    live = live_run(sleeper)
    folder = tmp_path / ".snakemake"
    write_runs(folder, [dead_run(), live, Run(pid=1, host="another-host")])
    assert release_stale_lock(folder) is None
    assert read_runs(folder) == [live, this_run()]


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {str(path.relative_to(folder)): (path.read_bytes(), path.stat().st_mtime_ns)
            for path in sorted(folder.rglob("*")) if path.is_file()}


def test_a_dry_run_changes_nothing_and_says_what_the_run_will_do(tmp_path):
    killed = dead_run()
    folder = locked_folder(tmp_path, [killed])
    before = snapshot(folder)
    line = release_stale_lock(folder, dry_run=True)
    assert line and line.startswith(f"warning: a previous run (pid {killed.pid}) was killed; the real run will remove")
    assert snapshot(folder) == before
    # nor does a dry run in a folder Snakemake has not made yet
    fresh = tmp_path / "fresh/.snakemake"
    assert release_stale_lock(fresh, dry_run=True) is None
    assert not fresh.parent.exists()


def incomplete_outputs(repo: Path) -> set[str]:
    """The outputs Snakemake had marked as being made: .snakemake/incomplete/ holds one file per
    output, named by the base64 of its path (split into folders prefixed '@' where too long)."""
    incomplete = repo / ".snakemake/incomplete"
    outputs = set()
    for path in incomplete.rglob("*") if incomplete.exists() else []:
        if path.is_file() and path.name != "migration_underway":
            encoded = "".join(part.lstrip("@") for part in path.relative_to(incomplete).parts)
            outputs.add(urlsafe_b64decode(encoded).decode())
    return outputs


@pytest.mark.pipeline
def test_one_plain_snakemake_resumes_after_a_kill(tmp_path):
    repo = copy_repo(tmp_path / "repo")
    env = snakemake_env(repo)
    with open(tmp_path / "killed.log", "w") as output:
        # output to a file: jobs that outlive the kill may keep writing to it
        run = subprocess.Popen(snakemake_command(1), cwd=repo, env=env, stdout=output, stderr=output)
        deadline = time.monotonic() + 300
        while len(cell_rows(repo)) < 3 and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert run.poll() is None, (tmp_path / "killed.log").read_text()[-3000:]
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
    assert (repo / ".snakemake/locks").exists() and list((repo / ".snakemake/locks").iterdir())
    # the rows whose jobs Snakemake saw finish; a job running at the kill is run again
    finished = {name: path for name, path in cell_rows(repo).items() if name not in incomplete_outputs(repo)}
    assert len(finished) >= 2
    before = {name: (path.read_bytes(), path.stat().st_mtime_ns) for name, path in finished.items()}

    plan = snakemake(repo, 1, "--dry-run")
    assert f"warning: a previous run (pid {run.pid}) was killed; the real run will remove" in plan.stderr
    assert list((repo / ".snakemake/locks").iterdir())  # the dry run removed nothing

    resumed = subprocess.run(snakemake_command(1), cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    warning = f"warning: a previous run (pid {run.pid}) was killed; its lock on this folder was removed"
    assert warning in resumed.stderr.splitlines(), resumed.stderr[-3000:]
    assert {name: (path.read_bytes(), path.stat().st_mtime_ns) for name, path in finished.items()} == before
    assert (repo / RESULTS / "summary.csv").exists()
    assert "Nothing to be done" in snakemake(repo, 1, "--dry-run").stdout
