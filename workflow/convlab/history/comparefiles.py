"""Where `compare` writes: a file name for each pair of sides, so that comparing other folders
writes other files."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Protocol


class Side(Protocol):
    """A compared side as naming needs it (convlab.history.compare.ResultSet)."""

    path: Path
    label: str


def default_out(a: Side, b: Side) -> Path:
    """compare_<A>_vs_<B>.csv beside A's summary (for a side read from the results database,
    in results/<device>/compare/)."""
    first, second = side_names(a, b)
    folder = a.path.parent / "compare" if a.path.suffix == ".sqlite" else a.path.parent
    return folder / f"compare_{safe_name(first)}_vs_{safe_name(second)}.csv"


def _label_folders(side: Side) -> list[str]:
    """The folder names above a side's label, nearest first: results_a for
    results_a/h200/summary.csv (labelled h200), run2 for run2/old.csv (labelled old)."""
    path = side.path.resolve()
    above = path.parent.parent if path.name == "summary.csv" else path.parent
    return [part.name for part in (above, *above.parents) if part.name]


def side_names(a: Side, b: Side) -> tuple[str, str]:
    """Names for the two sides in the output's file name, so that comparing other folders writes
    other files: their labels (h100, a100) where the sides sit in one folder; else each label
    prefixed with the nearest folder above it whose name differs between the sides
    (results_a-h200, results_b-h200; x-h100, y-a100). Where nothing tells two sides of one label
    apart, a short hash of both paths does."""
    for mine, theirs in zip(_label_folders(a), _label_folders(b)):
        if mine != theirs:
            return f"{mine}-{a.label}", f"{theirs}-{b.label}"
    if a.label != b.label:
        return a.label, b.label
    digest = hashlib.sha256(f"{a.path.resolve()}\n{b.path.resolve()}".encode()).hexdigest()[:8]
    return f"{a.label}-a", f"{b.label}-b-{digest}"


def safe_name(label: str) -> str:
    """A label as a file-name part: '@previous (run 2026...)' -> 'previous-run-2026...'."""
    return "-".join(filter(None, re.split(r"[^A-Za-z0-9._~-]+", label))) or "set"
