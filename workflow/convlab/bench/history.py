"""The history benchmark: what a year of kept measurements costs the runs after it.

Two copies of a checkout make the same first run. One copy's results database is then grown to
a year's worth of rows, each run's rows copied under new run ids, so that every cell has as long
a history as a lab used daily would give it. Then, in rounds that alternate which copy goes first,
both get the same one-kernel edit and are timed side by side: the run after the edit, `convlab
history` and `convlab compare @previous @latest`. Standard library only.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from convlab.bench.pipeline import PipelineFailed, configfile_in, copy_checkout, snakemake_env, timed_snakemake
from convlab.history import store

# What each round times, in order, and how each is called in the copy.
STEPS = ("the run after the edit", "convlab history", "convlab compare @previous @latest")
SIDES = ("fresh", "grown")
# The most a grown database may add to a step's time, as the target: within 10 %.
TARGET_RATIO = 1.10


@dataclass
class Timings:
    """Each step's times (seconds) on each side, one per round."""

    seconds: dict[tuple[str, str], list[float]] = field(default_factory=dict)

    def add(self, side: str, step: str, value: float) -> None:
        self.seconds.setdefault((side, step), []).append(value)

    def median(self, side: str, step: str) -> float:
        return statistics.median(self.seconds[(side, step)])


@dataclass(frozen=True)
class Grown:
    """The grown copy's database: its rows and runs, and bytes on disk a row."""

    rows: int
    runs: int
    bytes_per_row: float


def grow_database(path: Path, rows: int) -> Grown:
    """Copy the database's runs, rows and all, under new run ids (run ids and row checks with a
    suffix: new keys) until it holds at least ``rows`` rows."""
    connection, _ = store.open_for_writing(path)
    try:
        originals = [run for (run,) in connection.execute("SELECT run_id FROM runs ORDER BY rowid")]
        per_copy = connection.execute("SELECT count(*) FROM measurements").fetchone()[0]
        if not per_copy:
            raise PipelineFailed(f"{path}: the first run kept no rows to grow the database from")
        copied = [column for column in store.STORED_COLUMNS if column not in ("row_check", "run_id")]
        columns = ", ".join(["row_check", "run_id", *copied])
        with connection:
            for copy in range(1, -(-max(rows - per_copy, 0) // per_copy) + 1):
                for run in originals:
                    new_run = f"{run}-copy{copy}"
                    connection.execute("INSERT INTO runs SELECT ?, recorded_at, git_commit, host, rows_added FROM runs "
                                       "WHERE run_id = ?", (new_run, run))
                    connection.execute(f"INSERT INTO measurements ({columns}) SELECT row_check || ?, ?, "
                                       f"{', '.join(copied)} FROM measurements WHERE run_id = ?",
                                       (f"-copy{copy}", new_run, run))
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        kept = connection.execute("SELECT count(*) FROM measurements").fetchone()[0]
        runs = connection.execute("SELECT count(*) FROM runs").fetchone()[0]
    finally:
        connection.close()
    return Grown(kept, runs, path.stat().st_size / kept)


def edit_kernel(copy: Path, kernel: str, number: int) -> None:
    """An edit of the kernel's description that changes its files' hash and nothing it does."""
    description = copy / "kernels" / f"{kernel}.yaml"
    if not description.is_file():
        raise PipelineFailed(f"no kernels/{kernel}.yaml in {copy} to edit")
    with open(description, "a") as handle:
        handle.write(f"# benchmark edit {number}\n")


def timed_command(copy: Path, arguments: Sequence[str], log: Path) -> float:
    """`python -m convlab ARGUMENTS` in ``copy``: its seconds. PipelineFailed naming the log if it fails."""
    with open(log, "wb") as output:
        started = time.perf_counter()
        code = subprocess.run([sys.executable, "-m", "convlab", *arguments], cwd=copy, env=snakemake_env(),
                              stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT).returncode
        seconds = time.perf_counter() - started
    if code != 0:
        raise PipelineFailed(f"convlab {' '.join(arguments)} failed in {copy} (exit {code}); log: {log}")
    return seconds


def benchmark_history(checkout: Path, configfile: str, kernel: str, rows: int, rounds: int, cores: int,
                      scratch: Path, say: Callable[[str], None] = lambda line: None) -> tuple[Timings, Grown]:
    """The first run in ``scratch``/fresh, its copy ``scratch``/grown with its database grown to
    ``rows``, then ``rounds`` rounds of the edit and the three steps on both; logs in ``scratch``/logs."""
    fresh, grown, logs = scratch / "fresh", scratch / "grown", scratch / "logs"
    say(f"copied {copy_checkout(checkout, fresh)} files of {checkout} to {fresh}")
    options = ["--cores", str(cores), "--configfile", configfile_in(fresh, checkout, configfile)]
    say(f"first run: snakemake {' '.join(options)} (log: {logs / 'first.log'})")
    timed_snakemake(fresh, options, logs / "first.log")
    shutil.copytree(fresh, grown, symlinks=True)
    databases = sorted((grown / "results").glob(f"*/{store.DATABASE_NAME}"))
    if len(databases) != 1:
        raise PipelineFailed(f"expected one results database under {grown / 'results'}, found {len(databases)}")
    say(f"growing {databases[0]} to {rows} rows")
    size = grow_database(databases[0], rows)
    timings = Timings()
    for number in range(1, rounds + 1):
        order = SIDES if number % 2 else tuple(reversed(SIDES))
        for side in order:
            copy = scratch / side
            edit_kernel(copy, kernel, number)
            run = timed_snakemake(copy, options, logs / f"{side}-{number}-run.log")
            timings.add(side, STEPS[0], run.finished - run.started)
            timings.add(side, STEPS[1], timed_command(copy, ["history"], logs / f"{side}-{number}-history.log"))
            timings.add(side, STEPS[2], timed_command(copy, ["compare", "@previous", "@latest"],
                                                      logs / f"{side}-{number}-compare.log"))
        say(f"round {number} of {rounds} done")
    return timings, size


def format_table(timings: Timings, grown: Grown, heading: str) -> str:
    """Each step's median on both sides and their ratio, against the target."""
    lines = [heading, f"grown database: {grown.rows} rows of {grown.runs} runs, {grown.bytes_per_row:.0f} bytes a row "
             "on disk", f"{'':36} {'fresh':>9} {'grown':>9} {'grown/fresh':>12}"]
    for step in STEPS:
        fresh, grown_s = timings.median("fresh", step), timings.median("grown", step)
        ratio = grown_s / fresh
        verdict = "met" if ratio <= TARGET_RATIO else "not met"
        lines.append(f"{step:36} {fresh:8.2f}s {grown_s:8.2f}s {ratio:12.2f}  {verdict} (≤ {TARGET_RATIO:.2f})")
    rounds = len(timings.seconds[("fresh", STEPS[0])])
    lines.append(f"medians of {rounds} rounds, the two copies alternating which goes first")
    return "\n".join(lines)
