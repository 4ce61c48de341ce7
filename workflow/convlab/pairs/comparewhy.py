"""Why compare's FASTER and SLOWER cells changed (`convlab compare A B --why`): for each such cell
of two states of one board's results database, the kernel versions A and B measured, restored from
the database (convlab.history.kernelversions), profiled on this machine's GPU on the cell's problem
(convlab.pairs.whyprofile), and the line that names what moved most.

Only a source kernel's versions run again; a cell whose versions cannot (a library kernel, a
version recorded before kernel files were kept, a cell not in the config's grid) gets the reason
instead, in the same "why: not read: …" words as a run's verdict.
"""

from __future__ import annotations

import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from convlab.backends.choice import choose_backend
from convlab.history.kernelversions import VersionUnavailable, restore_kernel_version
from convlab.history.verdictrule import FASTER, SLOWER
from convlab.history.whyline import NOT_READ, columns
from convlab.pairs.selfcheck import measured_config
from convlab.pairs.whyprofile import Explained, WhyProfiler
from convlab.plan.cell import Cell
from convlab.plan.grid import build_cells
from convlab.run.whyreplay import PairToExplain, Version

SIDES = ("a", "b")
WHY_COLUMNS = ("why", *columns({}, {}, SIDES))


@dataclass(frozen=True)
class ComparisonWhy:
    """Each explained cell's why by its row in compare's table, and the seconds the profile took."""

    by_row: dict[int, Explained]
    seconds: float = 0.0

    @property
    def explained(self) -> int:
        return sum(bool(item.line) for item in self.by_row.values())


def configured_grid(configfiles: list[str], folder: Path) -> tuple[dict[str, Cell], str]:
    """The cells by path, and their backend, of the config that measured them: ``configfiles``
    over config/config.yaml, or the config of the run that recorded last in the device's ``folder``."""
    config = measured_config(configfiles, folder)
    backend = choose_backend(config["backend"]).backend
    return {cell.path: cell for cell in build_cells(config, backend, folder.name)}, backend


def restored(connection: sqlite3.Connection, kernel: str, kernel_hash: str, scratch: Path) -> Version:
    """A side's kernel version, written from the database into a folder of its own."""
    if not kernel_hash:
        raise VersionUnavailable(f"{kernel}: a side's row names no kernel version")
    folder = scratch / f"{kernel}@{kernel_hash}"
    # a cpu twin's too: its backend then says it has no counters to read
    return Version(restore_kernel_version(connection, kernel, kernel_hash, folder, twins=True), str(folder))


def explain_comparison(table: pd.DataFrame, connection: sqlite3.Connection, grid: dict[str, Cell],
                       profiler: WhyProfiler) -> ComparisonWhy:
    """The why of each FASTER or SLOWER row of compare's ``table`` (its cell_a/b and kernel_hash_a/b
    columns name the versions; ``grid``: the config's cells by path, which give the problem)."""
    reasons: dict[int, str] = {}
    pairs: dict[int, PairToExplain] = {}
    with tempfile.TemporaryDirectory(prefix="convlab-compare-why-") as scratch:
        for index, row in table[table["verdict"].isin([FASTER, SLOWER])].iterrows():
            cell = grid.get(str(row.get("cell_b") or row.get("cell_a") or ""))
            if cell is None:
                reasons[index] = "the cell is not in the config's grid (give the --configfile that measured it)"
            else:
                try:
                    versions = [restored(connection, cell.kernel, str(row.get(f"kernel_hash_{side}") or ""),
                                         Path(scratch)) for side in SIDES]
                except VersionUnavailable as why:
                    reasons[index] = " ".join(str(why).split())
                    continue
                pairs[index] = PairToExplain(cell, cell.image or None, *versions)
        explanations = profiler.explain(list(pairs.values()))
    by_row = {index: Explained(reason=reason) for index, reason in reasons.items()}
    for position, index in enumerate(pairs):
        by_row[index] = explanations.pairs.get(position, Explained(reason=explanations.reason))
    return ComparisonWhy(by_row, explanations.seconds)


def with_why_columns(table: pd.DataFrame, found: ComparisonWhy) -> pd.DataFrame:
    """compare's table with the why of each explained row and both sides' counts (why_<count>_a/_b)."""
    values: dict[str, list[object]] = {name: [""] * len(table) for name in WHY_COLUMNS}
    for position, index in enumerate(table.index):
        item = found.by_row.get(index)
        if item is None:
            continue
        values["why"][position] = item.line or NOT_READ + (item.reason or "no count moved")
        if item.line:
            for name, value in columns(item.previous, item.new, SIDES).items():
                values[name][position] = "" if value is None else value
    table = table.copy()
    for name, column in values.items():
        table[name] = pd.Series(column, index=table.index, dtype=object)
    return table
