"""Resume after a killed run with a plain `snakemake`: a lock on the folder that a killed run left
behind is removed, and a live run's lock never is (standard library only: it runs while
Snakemake reads the Snakefile, before it takes its own lock).

Snakemake writes its lock files into .snakemake/locks/ and removes them when it exits; a run
killed with SIGKILL leaves them, and every later run refuses to start until `--unlock`. So
each run notes its pid and host in .snakemake/convlab-run.json before Snakemake locks. The
record keeps every run that may hold a lock: a second run started beside a live one is noted
beside it, never over it, so that the live run keeps its lock whichever of the two fails.
Lock files are stale only when every run noted is of this host and dead.

A run started while another one of this folder is alive stops before Snakemake's lock does, with
one line naming the live run: Snakemake's own refusal ends with advice to `--unlock`, which,
followed while that run is working, makes both runs fail.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from convlab.atomicfile import write_text_atomically

RECORD_NAME = "convlab-run.json"
# Taken around each read-change-write of the record, so that two runs starting together both
# end up in it. Not in locks/: Snakemake removes that folder when it unlocks.
GUARD_NAME = "convlab-run.guard"


@dataclass(frozen=True)
class Run:
    """One snakemake process: its pid, its host, and when it started (to tell a reused pid; and
    ``since``, the wall-clock time, to name it to a person)."""

    pid: int
    host: str
    started: str | None = None
    since: str | None = field(default=None, compare=False)


def process_start(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, from /proc), or None where there is
    no /proc. Paired with the pid, it names one process: a later process given the same pid
    started later."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces; field 22 is the start
    fields = stat[stat.rindex(")") + 2 :].split()
    return fields[19]


def process_state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()[0]


def this_run() -> Run:
    return Run(pid=os.getpid(), host=socket.gethostname(), started=process_start(os.getpid()),
               since=dt.datetime.now().isoformat(timespec="seconds"))


def is_alive(run: Run) -> bool:
    """Whether ``run`` (a process on this host) is still running. A killed process that its parent
    has not reaped yet (a zombie) runs no more; a pid now used by a later process is not ``run``."""
    try:
        os.kill(run.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    if process_state(run.pid) == "Z":
        return False
    if run.started is not None:
        started = process_start(run.pid)
        if started is not None and started != run.started:
            return False
    return True


def lock_files(snakemake_dir: Path) -> list[Path]:
    """Snakemake's lock files of this folder (0.input.lock, 0.output.lock, ...)."""
    locks = snakemake_dir / "locks"
    return sorted(path for path in locks.glob("*.lock") if path.is_file())


def read_runs(snakemake_dir: Path) -> list[Run] | None:
    """The runs noted in the record; None when there is no record or it cannot be read (then
    nothing is known about who holds a lock)."""
    try:
        noted = json.loads((snakemake_dir / RECORD_NAME).read_text())
        return [Run(pid=int(run["pid"]), host=str(run["host"]), started=run.get("started"), since=run.get("since"))
                for run in noted["runs"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_runs(snakemake_dir: Path, runs: list[Run]) -> None:
    text = json.dumps({"runs": [asdict(run) for run in runs]}, indent=1) + "\n"
    write_text_atomically(snakemake_dir / RECORD_NAME, text)


@contextmanager
def guarded(snakemake_dir: Path) -> Iterator[None]:
    snakemake_dir.mkdir(parents=True, exist_ok=True)
    with open(snakemake_dir / GUARD_NAME, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def stale_lock_owner(locks: list[Path], runs: list[Run] | None, host: str) -> Run | None:
    """The killed run whose lock ``locks`` is, or None when the lock may be live: no lock, no
    record, a run of another host (its processes cannot be seen from here), or one run alive.
    The owner is the first run noted: later ones were noted while its lock was already held."""
    if not locks or not runs:
        return None
    if any(run.host != host for run in runs) or any(is_alive(run) for run in runs):
        return None
    return runs[0]


def live_run_line(snakemake_dir: Path = Path(".snakemake"), me: Run | None = None) -> str | None:
    """The `error:` line for a run started while another run of this folder is alive (one of this
    host that is running; or one of another host while a lock is held, since its processes cannot
    be seen from here); None when this run may go on."""
    me = me or this_run()
    locks = lock_files(snakemake_dir)
    for run in read_runs(snakemake_dir) or []:
        if run == me:
            continue
        since = f", started {run.since.replace('T', ' ')}" if run.since else ""
        if run.host == me.host and is_alive(run):
            return (f"error: another run is working in this folder (pid {run.pid}{since}); wait for it to end, "
                    "then run again: its rows are kept. Do not --unlock while it runs")
        if run.host != me.host and locks:
            return (f"error: a run on host {run.host} (pid {run.pid}{since}) holds this folder; wait for it to end. "
                    "Only if that run is gone for good (its host went down), remove its lock with --unlock")
    return None


def release_stale_lock(snakemake_dir: Path = Path(".snakemake"), dry_run: bool = False) -> str | None:
    """Called by the run the user started, before Snakemake takes its lock. Removes the lock that
    a killed run left and returns the `warning:` line saying so, or None when there was none.
    Notes this run in the record, as one that may hold the lock. A dry run changes nothing on
    disk: its line says what the real run will do."""
    me = this_run()
    if dry_run:
        owner = stale_lock_owner(lock_files(snakemake_dir), read_runs(snakemake_dir), me.host)
        if owner is None:
            return None
        return (f"warning: a previous run (pid {owner.pid}) was killed; the real run will remove its lock on "
                "this folder (a dry run changes nothing)")
    with guarded(snakemake_dir):
        locks = lock_files(snakemake_dir)
        runs = read_runs(snakemake_dir)
        owner = stale_lock_owner(locks, runs, me.host)
        if owner is not None:
            for path in locks:
                path.unlink(missing_ok=True)
            locks = []
        if locks and not runs:
            # a lock of a run that noted nothing: noting this run alone would later make that
            # lock look like this run's, and stale once this run has gone
            return None
        others = [run for run in runs or [] if run != me]
        if not locks:
            # no lock held: only live runs of this host may still take one
            others = [run for run in others if run.host == me.host and is_alive(run)]
        write_runs(snakemake_dir, [*others, me])
    if owner is None:
        return None
    return f"warning: a previous run (pid {owner.pid}) was killed; its lock on this folder was removed"


# Left by the last run that ended with every job done.
CLEAN_NAME = "convlab-clean.json"


def forget_clean_run(snakemake_dir: Path = Path(".snakemake")) -> None:
    """A run starts: until it ends cleanly, the folder may hold outputs it meant to make again."""
    (snakemake_dir / CLEAN_NAME).unlink(missing_ok=True)


def note_clean_run(snakemake_dir: Path = Path(".snakemake")) -> None:
    """The run ended with every job done: nothing it planned is left older than its inputs."""
    write_text_atomically(snakemake_dir / CLEAN_NAME,
                          json.dumps({"ended": dt.datetime.now().isoformat(timespec="seconds")}) + "\n")


def follows_clean_run(made_before: bool, snakemake_dir: Path = Path(".snakemake")) -> bool:
    """Whether this run follows one that ended cleanly (or, with nothing ``made_before``, starts
    from nothing): then no output can be older than its inputs without a job of this run re-making
    those inputs."""
    return (snakemake_dir / CLEAN_NAME).is_file() or not made_before


def mark_report_stage(suspect_file: Path, suspect: bool) -> None:
    """``suspect``: write something new into ``suspect_file`` (Snakemake takes a small input
    whose content is unchanged for unchanged, whatever its time), so that the job made from it, and
    everything below it, runs again. Otherwise only make sure it exists, older than anything that
    job made."""
    suspect_file.parent.mkdir(parents=True, exist_ok=True)
    if suspect:
        write_text_atomically(suspect_file, f"{dt.datetime.now().isoformat()} {os.getpid()}\n")
    elif not suspect_file.exists():
        write_text_atomically(suspect_file, "\n")
        os.utime(suspect_file, (0, 0))
