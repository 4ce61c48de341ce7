"""The grid a run planned, as its jobs read it: the validated config and one device label's cells,
written once as the run starts (convlab.snakefile.runlife). A job that needs the whole grid (the
pair, record, counters and compile-ahead steps) works on the cells the DAG was built from, not on a
grid rebuilt from kernel descriptions that may have been edited since.

The file is named by its content, so a changed grid is a new file, and the jobs' params, which name
it, change with it (Snakemake's params trigger re-runs them as it did for the config itself)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from convlab.atomicfile import write_text_atomically
from convlab.plan.cell import Cell
from convlab.status import UserError

# Beside Snakemake's own bookkeeping of the run, not among the results: a run's working file.
GRID_DIR = ".snakemake/convlab/grids"
# Grid files of other runs kept beside this one's: a run started alongside (another --config) still
# reads its own; older ones go.
OTHERS_KEPT = 8


@dataclass(frozen=True)
class PlannedGrid:
    """A run's validated config and the cells of one device label."""

    config: dict[str, Any]
    cells: list[Cell]


def grid_text(config: dict[str, Any], cells: list[Cell]) -> str:
    """The grid file's content: one JSON object, sorted keys, one cell a line."""
    cell_lines = ",\n".join(json.dumps({f.name: getattr(cell, f.name) for f in fields(cell)}, sort_keys=True)
                            for cell in cells)
    return f'{{"config": {json.dumps(config, sort_keys=True)},\n"cells": [\n{cell_lines}\n]}}\n'


def grid_path(label: str, text: str) -> str:
    """Where the grid of ``text`` lives: named by the device label and the content's hash."""
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return f"{GRID_DIR}/{label}-{digest}.json"


def write_grid(path: str | Path, text: str) -> None:
    """Write the grid unless that file holds it already (its content decides, not its name); drop
    the oldest grid files of other runs beyond OTHERS_KEPT."""
    path = Path(path)
    try:
        whole = path.read_text(encoding="utf-8") == text
    except (OSError, UnicodeDecodeError):
        whole = False
    if not whole:
        write_text_atomically(path, text, durable=False)
    others = sorted((p for p in path.parent.glob("*.json") if p != path), key=lambda p: p.stat().st_mtime,
                    reverse=True)
    for stale in others[OTHERS_KEPT:]:
        stale.unlink(missing_ok=True)


def read_grid(path: str | Path) -> PlannedGrid:
    """The grid a run wrote; UserError with one line where it is missing or not whole."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return PlannedGrid(dict(data["config"]), [Cell(**cell) for cell in data["cells"]])
    except FileNotFoundError:
        raise UserError(f"{path}: the run's grid file is missing (removed while the run went on?): run snakemake "
                        "again, which writes it as it starts") from None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UserError(f"{path}: the run's grid file cannot be read ({error}): run snakemake again, which "
                        "writes it as it starts") from None


def save_grid(config: dict[str, Any], cells: list[Cell], label: str, root: str | Path = ".") -> Path:
    """Write the grid of ``cells`` (one device label's) under ``root``; its path."""
    text = grid_text(config, cells)
    path = Path(root) / grid_path(label, text)
    write_grid(path, text)
    return path
