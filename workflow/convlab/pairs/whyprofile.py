"""Why a pair's verdict is FASTER or SLOWER: both versions of the cell's kernel profiled by Nsight
Compute on the same problem and launch (convlab.run.whyreplay inside `ncu`, kernel replay), their
counts set side by side (convlab.measure.whycounters) and the line that names what moved most
(convlab.history.whyline).

Off the timed path: it runs after the pairs' rounds, in a process of its own that takes the
device's lock, so a profiled launch never feeds a timing. Opt-in (config `verdicts.why`), as it
costs a profiled process per pair step or preview.

Nsight Compute's start and the replay's imports take seconds whatever is profiled, so a
WhyProfiler starts them ahead (a standby), while the pairs are measured or between a watch's saves:
the replay waits for its plan before it touches the GPU, and holds no context there meanwhile, so
no pair's rounds see it as a neighbour. A pair then costs only its replay and the report's page.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from convlab.history.pairfile import PairRow
from convlab.history.verdictrule import FASTER, SLOWER, verdict_of_interval
from convlab.history.whyline import NOT_READ, why_line
from convlab.measure.ncureport import by_cell
from convlab.measure.whycounters import WHY_METRICS, side_counts
from convlab.plan.cell import Cell
from convlab.plan.registry import KernelSpec
from convlab.run.nsightprofile import Profiled, ProfiledProcess, finish_profiled, start_profiled
from convlab.run.whyreplay import PairToExplain, Version, range_index, ready_marker


@dataclass(frozen=True)
class Explained:
    """One pair's why: its line and both sides' counts, or why it has none (``reason``)."""

    line: str = ""
    previous: dict = field(default_factory=dict)
    new: dict = field(default_factory=dict)
    reason: str = ""


@dataclass(frozen=True)
class Explanations:
    """Each pair's Explained by its position, and why none was read at all ('' where some were)."""

    pairs: dict[int, Explained]
    reason: str = ""
    seconds: float = 0.0


PLAN, REASONS = "plan.json", "reasons.json"
STOP_WAIT_S = 5.0  # how long a standby's Nsight Compute is given to end before it is killed


@dataclass
class Standby:
    """A replay started under Nsight Compute before its plan, in a folder of its own."""

    process: ProfiledProcess
    folder: Path

    def ready(self) -> bool:
        """Whether it waits for its plan now (its imports done)."""
        return self.process.running() and ready_marker(self.folder / PLAN).is_file()


@dataclass
class Profiling:
    """Pairs being profiled (WhyProfiler.begin): how many, and the process replaying them, or the
    Profiled that says why none does."""

    count: int
    started: Standby | Profiled

    def cancel(self) -> None:
        """The profile ended unread (its pairs are no longer asked about)."""
        if isinstance(self.started, Standby):
            ended(self.started)


def ended(standby: Standby) -> None:
    """A profiled process stopped, whatever it was doing, and its folder removed."""
    process = standby.process.process
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process.stdout is not None:
        process.stdout.close()
    shutil.rmtree(standby.folder, ignore_errors=True)


class WhyProfiler:
    """Explains pairs by both versions' counts (explain), each time in a replay under Nsight
    Compute that was started ahead (ready) where one is ready, else in one started then. One
    profiler per process that asks (the pair step, a device's worker); close() ends its standby."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.standby: Standby | None = None

    def ready(self) -> None:
        """A standby started, unless one is running or none can be (no GPU counters to read here:
        the explanation then says why)."""
        if self.backend != "cuda" or (self.standby is not None and self.standby.process.running()):
            return
        self.close()
        started = self._start(wait=True)
        self.standby = started if isinstance(started, Standby) else None

    def begin(self, pairs: list[PairToExplain]) -> Profiling:
        """Both versions of each pair set to be profiled, in one process under Nsight Compute: the
        standby where one runs (given its plan, it replays at once), else one started now.
        collect() waits for it and reads the counts; meanwhile the caller may go on (a preview says
        its verdicts)."""
        if not pairs:
            return Profiling(0, Profiled())
        if self.backend != "cuda":
            return Profiling(len(pairs), Profiled(reason=f"no hardware counters on the {self.backend} backend"))
        standby, self.standby = self.standby, None
        if standby is not None and standby.process.running():
            write_plan(standby.folder / PLAN, pairs)
            return Profiling(len(pairs), standby)
        if standby is not None:
            ended(standby)
        return Profiling(len(pairs), self._start(wait=False, pairs=pairs))

    def collect(self, profiling: Profiling) -> Explanations:
        """Each pair's why, once their profile has ended (or the one reason none was read)."""
        started = profiling.started
        if isinstance(started, Profiled):
            return Explanations({}, started.reason, started.seconds)
        try:
            profiled = finish_profiled(started.process)
            reasons = started.folder / REASONS
            failed = {int(k): v for k, v in json.loads(reasons.read_text()).items()} if reasons.is_file() else {}
        finally:
            shutil.rmtree(started.folder, ignore_errors=True)
        if profiled.reason:
            return Explanations({}, profiled.reason, profiled.seconds)
        return Explanations(explained_pairs(profiling.count, profiled, failed), "", profiled.seconds)

    def explain(self, pairs: list[PairToExplain]) -> Explanations:
        """Both versions of each pair profiled in one process under Nsight Compute, and each pair's why."""
        return self.collect(self.begin(pairs))

    def close(self) -> None:
        """The standby ended (its replay leaves once its Nsight Compute has: convlab.run.whyreplay)."""
        standby, self.standby = self.standby, None
        if standby is not None:
            ended(standby)

    def _start(self, wait: bool, pairs: list[PairToExplain] = ()) -> Standby | Profiled:
        folder = Path(tempfile.mkdtemp(prefix="convlab-why-"))
        plan = folder / PLAN
        argv = [sys.executable, "-m", "convlab", "why-replay", "--plan", str(plan), "--reasons", str(folder / REASONS)]
        if wait:
            argv += ["--wait-for-plan", "--parent", str(os.getpid())]
        else:
            write_plan(plan, list(pairs))
        started = start_profiled(argv, folder, WHY_METRICS, replay="kernel")
        if isinstance(started, Profiled):
            shutil.rmtree(folder, ignore_errors=True)
            return started
        return Standby(started, folder)


def write_plan(path: Path, pairs: list[PairToExplain]) -> None:
    """The pairs to replay, written whole at once: a waiting replay reads the file once it exists."""
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps([pair.to_json() for pair in pairs]))
    os.replace(partial, path)


def explained_pairs(count: int, profiled: Profiled, failed: dict[int, str]) -> dict[int, Explained]:
    """Each pair's why from the profile's kernels (by the ranges of its two sides), or its reason."""
    ranges = by_cell(profiled.launches)
    explained = {}
    for index in range(count):
        if index in failed:
            explained[index] = Explained(reason=failed[index])
            continue
        previous, new = (side_counts(ranges.get(range_index(index, side), [])) for side in (0, 1))
        if not (previous and new):
            explained[index] = Explained(reason="a version's kernels were not profiled")
            continue
        explained[index] = Explained(why_line(previous, new), previous, new)
    return explained


def explain(pairs: list[PairToExplain], backend: str) -> Explanations:
    """Both versions of each pair profiled in one process started now under Nsight Compute."""
    return WhyProfiler(backend).explain(pairs)


def called(row: PairRow, threshold: float) -> bool:
    """Whether the pair's interval calls its cell FASTER or SLOWER (what a why explains)."""
    return row.measured and row.ratio.rounds != 0 and verdict_of_interval(
        row.ratio.low, row.ratio.high, threshold) in (FASTER, SLOWER)  # type: ignore[arg-type]


def to_explain(rows: list[PairRow], versions: dict[str, PairToExplain], threshold: float) -> list[PairRow]:
    """The pair rows a why explains: those FASTER or SLOWER whose versions are known (``versions``:
    each cell's pair to profile, by cell path, its versions as the pair ran them)."""
    return [row for row in rows if called(row, threshold) and row.cell in versions]


def rows_with_why(rows: list[PairRow], chosen: list[PairRow], explained: Explanations) -> list[PairRow]:
    """The pair rows, each of ``chosen`` (in the profile's order) with its why: its line and both
    sides' counts, or "why: not read: …" (the one reason the profile gave none, or the pair's own)."""
    changed = {}
    for index, row in enumerate(chosen):
        item = explained.pairs.get(index, Explained(reason=explained.reason))
        if item.line:
            changed[row.cell] = replace(row, why=item.line, why_previous=item.previous, why_new=item.new)
        else:
            changed[row.cell] = replace(row, why=NOT_READ + (item.reason or "no count moved"))
    return [changed.get(row.cell, row) for row in rows]


def with_why(rows: list[PairRow], versions: dict[str, PairToExplain], profiler: WhyProfiler,
             threshold: float) -> tuple[list[PairRow], Explanations]:
    """The pair rows, each FASTER or SLOWER one with its why (rows_with_why), profiled now."""
    chosen = to_explain(rows, versions, threshold)
    explained = profiler.explain([versions[row.cell] for row in chosen])
    return rows_with_why(rows, chosen, explained), explained


def pair_to_explain(cell: Cell, previous: KernelSpec, new: KernelSpec, registered_new: bool) -> PairToExplain:
    """A pair as the replay reads it: the cell, its picture and both versions by their folders."""
    return PairToExplain(cell, cell.image or None, Version.of(previous, registered=False),
                         Version.of(new, registered=registered_new))
