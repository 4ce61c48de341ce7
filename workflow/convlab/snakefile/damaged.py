"""Find damaged cell rows before a run and move them aside, so that the run measures those cells
again (standard library only: it runs while Snakemake builds the DAG).

A damaged row (cut, emptied, overwritten: see convlab.measure.row) is never read as a result, and never
deleted: it goes to results/damaged/, where it can be looked at, with a line in its log.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path

from convlab.measure.row import DamagedRow, OtherFormat, read_row_file


@dataclass(frozen=True)
class MovedRow:
    path: Path
    moved_to: Path
    reason: str
    dry_run: bool = False

    def line(self) -> str:
        if self.dry_run:
            return (f"damaged row: {self.path} ({self.reason}); the real run will move it to {self.moved_to.parent}/ "
                    "and measure its cell again (a dry run changes nothing)")
        return f"damaged row: {self.path} ({self.reason}); moved to {self.moved_to}, its cell will be measured again"


def damage_of(path: Path) -> str | None:
    """Why the row file at ``path`` is damaged; None when it is whole (or absent, or a whole row
    of another format, which its params re-measure)."""
    try:
        read_row_file(path)
    except FileNotFoundError:
        return None
    except DamagedRow as damaged:
        return str(damaged)
    except OtherFormat:
        return None
    return None


def move_damaged_rows(paths: list[str], results_dir: str | Path = "results", dry_run: bool = False) -> list[MovedRow]:
    """Move every damaged file of ``paths`` into ``results_dir``/damaged/, under its own path
    with the time appended, and log why in results/damaged/damaged.log. ``dry_run``: only say
    which files would move."""
    results_dir = Path(results_dir)
    moved = []
    stamp = dt.datetime.now().strftime("%Y%m%dT%H%M%S")
    for name in paths:
        path = Path(name)
        if not path.exists():
            continue
        reason = damage_of(path)
        if reason is None:
            continue
        try:
            relative = path.resolve().relative_to(results_dir.resolve())
        except ValueError:
            relative = Path(path.name)
        target = results_dir / "damaged" / relative.parent / f"{relative.stem}.{stamp}{relative.suffix}"
        if dry_run:
            moved.append(MovedRow(path, target, reason, dry_run=True))
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)
        record = MovedRow(path, target, reason)
        with open(results_dir / "damaged" / "damaged.log", "a") as log:
            log.write(f"{dt.datetime.now().isoformat(timespec='seconds')} {record.line()}\n")
        moved.append(record)
    return moved
