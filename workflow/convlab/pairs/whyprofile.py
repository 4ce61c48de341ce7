"""Why a pair's verdict is FASTER or SLOWER: both versions of the cell's kernel profiled by Nsight
Compute on the same problem and launch (convlab.run.whyreplay inside `ncu`, kernel replay), their
counts set side by side (convlab.measure.whycounters) and the line that names what moved most
(convlab.history.whyline).

Off the timed path: it runs after the pairs' rounds, in a process of its own that takes the
device's lock, so a profiled launch never feeds a timing. Opt-in (config `verdicts.why`), as it
costs a profiled process per pair step or preview.
"""

from __future__ import annotations

import json
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
from convlab.run.nsightprofile import run_profiled
from convlab.run.whyreplay import PairToExplain, Version, range_index


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


def explain(pairs: list[PairToExplain], backend: str) -> Explanations:
    """Both versions of each pair profiled in one process under Nsight Compute, and each pair's why."""
    if not pairs:
        return Explanations({})
    if backend != "cuda":
        return Explanations({}, f"no hardware counters on the {backend} backend")
    with tempfile.TemporaryDirectory(prefix="convlab-why-") as scratch:
        plan, reasons = Path(scratch) / "plan.json", Path(scratch) / "reasons.json"
        plan.write_text(json.dumps([pair.to_json() for pair in pairs]))
        profiled = run_profiled([sys.executable, "-m", "convlab", "why-replay", "--plan", str(plan), "--reasons",
                                 str(reasons)], Path(scratch), WHY_METRICS, replay="kernel")
        if profiled.reason:
            return Explanations({}, profiled.reason, profiled.seconds)
        failed = {int(k): v for k, v in json.loads(reasons.read_text()).items()} if reasons.is_file() else {}
    ranges = by_cell(profiled.launches)
    explained = {}
    for index in range(len(pairs)):
        if index in failed:
            explained[index] = Explained(reason=failed[index])
            continue
        previous, new = (side_counts(ranges.get(range_index(index, side), [])) for side in (0, 1))
        if not (previous and new):
            explained[index] = Explained(reason="a version's kernels were not profiled")
            continue
        explained[index] = Explained(why_line(previous, new), previous, new)
    return Explanations(explained, "", profiled.seconds)


def called(row: PairRow, threshold: float) -> bool:
    """Whether the pair's interval calls its cell FASTER or SLOWER (what a why explains)."""
    return row.measured and row.ratio.rounds != 0 and verdict_of_interval(
        row.ratio.low, row.ratio.high, threshold) in (FASTER, SLOWER)  # type: ignore[arg-type]


def with_why(rows: list[PairRow], versions: dict[str, PairToExplain], backend: str, threshold: float) -> tuple[list[PairRow], Explanations]:
    """The pair rows, each FASTER or SLOWER one with its why: its line and both sides' counts, or
    "why: not read: …" (the one reason the profile gave none, or the pair's own). ``versions``: each
    cell's pair to profile (by cell path), its previous and new versions as the pair ran them."""
    chosen = [row for row in rows if called(row, threshold) and row.cell in versions]
    explained = explain([versions[row.cell] for row in chosen], backend)
    by_cell = {}
    for index, row in enumerate(chosen):
        item = explained.pairs.get(index, Explained(reason=explained.reason))
        if item.line:
            by_cell[row.cell] = replace(row, why=item.line, why_previous=item.previous, why_new=item.new)
        else:
            by_cell[row.cell] = replace(row, why=NOT_READ + (item.reason or "no count moved"))
    return [by_cell.get(row.cell, row) for row in rows], explained


def pair_to_explain(cell: Cell, previous: KernelSpec, new: KernelSpec, registered_new: bool) -> PairToExplain:
    """A pair as the replay reads it: the cell, its picture and both versions by their folders."""
    return PairToExplain(cell, cell.image or None, Version.of(previous, registered=False),
                         Version.of(new, registered=registered_new))
