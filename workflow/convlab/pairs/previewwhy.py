"""A preview's why, said after its verdicts (convlab watch): the preview begins both versions'
profile (convlab.pairs.whyprofile) and says its verdicts at once, as without a why; Nsight Compute
profiles meanwhile in its own process, and the watch's next request (`preview --collect-why`) waits
for it and says each kernel's why. So a why never delays a save's verdict.

The device's worker keeps one profiler per backend (its standby waits for the next save's pairs)
and at most one why not yet collected: a new preview drops an unread one, and the worker's end
stops it.
"""

from __future__ import annotations

import atexit
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convlab.atomicfile import write_text_atomically
from convlab.history.pairfile import PairRow
from convlab.history.verdictpolicy import VerdictPolicy
from convlab.history.verdicts import CellVerdict, csv_text, judge, why_lines
from convlab.pairs.whyprofile import Profiling, WhyProfiler, rows_with_why

PROFILERS: dict[str, WhyProfiler] = {}


def why_profiler(backend: str) -> WhyProfiler:
    """This process's profiler for ``backend``, its standby ended when the process ends."""
    if backend not in PROFILERS:
        PROFILERS[backend] = WhyProfiler(backend)
        atexit.register(PROFILERS[backend].close)
    return PROFILERS[backend]


@dataclass
class PendingWhy:
    """A preview's why being profiled: what to judge again with it, and where its files are."""

    backend: str
    profiling: Profiling
    chosen: list[PairRow]  # the pairs explained, in the profile's order
    # each measured pair as judged: the new row's fields, the previous measurement and its pair
    judged: list[tuple[Mapping[str, Any], Any, PairRow]]
    verdicts: list[CellVerdict]  # every verdict the preview said, paired or not
    threshold: float
    scratch: Path  # the preview's copies of the versions, which the replay reads
    details: Path | None = None

    def drop(self) -> None:
        self.profiling.cancel()
        shutil.rmtree(self.scratch, ignore_errors=True)


PENDING: list[PendingWhy] = []  # at most one


def drop_pending() -> None:
    """A why not collected (its watch left before it asked) stopped and its files removed."""
    while PENDING:
        PENDING.pop().drop()


atexit.register(drop_pending)


def warm_up(config: Mapping[str, Any], backend: str) -> None:
    """Where the config asks for whys: the standby started (a watch's first request, before any save)."""
    if VerdictPolicy.from_config(config).why:
        why_profiler(backend).ready()


def begin_why(pending: PendingWhy) -> None:
    """``pending`` kept for the next collect_why (an unread one before it dropped)."""
    drop_pending()
    PENDING.append(pending)


def owns(scratch: Path) -> bool:
    """Whether a why not yet collected still reads the preview's folder ``scratch``."""
    return any(pending.scratch == scratch for pending in PENDING)


def collect_why(say: Callable[[str], None]) -> None:
    """The why of the last preview, once its profile has ended: each kernel's line (and the reasons
    none was read), said; its details CSV written again with the whys. Nothing where none is pending."""
    if not PENDING:
        return
    pending = PENDING.pop()
    try:
        profiler = why_profiler(pending.backend)
        explained = profiler.collect(pending.profiling)
        rows = rows_with_why([pair for _, _, pair in pending.judged], pending.chosen, explained)
        again = {row.cell: judge(new, previous, pair=row, threshold=pending.threshold)
                 for (new, previous, _), row in zip(pending.judged, rows)}
        verdicts = [again.get(v.cell, v) for v in pending.verdicts]
        lines = why_lines(verdicts)
        if any(not line.lstrip().startswith("why: not read") for line in lines):
            say(f"preview why, from both versions' hardware counts (Nsight Compute, {explained.seconds:.1f} s):")
        for line in lines:
            say(line)
        if pending.details:
            write_text_atomically(pending.details, csv_text(verdicts))
        profiler.ready()  # for the next save
    finally:
        pending.drop()
