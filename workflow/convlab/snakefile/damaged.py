"""Find damaged cell rows before a run and move them aside, so that the run measures those cells
again (standard library only: it runs while Snakemake builds the DAG).

A damaged row (cut, emptied, overwritten, a directory in its place: see convlab.measure.row) is
never read as a result, and never deleted: it goes to results/damaged/, where it can be looked at,
with a line in its log. So does a whole row written by another convlab version (other columns): it
cannot be read as a result either, and its cell's params do not always re-measure it (a file
copied in by hand).
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path

from convlab.measure.row import DamagedRow, OtherFormat, parse_row
from convlab.snakefile.rowbytes import ROW_BYTES

DAMAGED = "damaged row"
OTHER_VERSION = "row of another convlab version"
PLURAL = {DAMAGED: "damaged rows", OTHER_VERSION: "rows of another convlab version"}
# More rows than this of one kind moved in one run are told in one line (an upgrade that changes
# the columns moves every row); the log keeps each one's line.
MAX_LINES = 5


@dataclass(frozen=True)
class MovedRow:
    path: Path
    moved_to: Path
    reason: str
    dry_run: bool = False
    kind: str = DAMAGED

    def line(self) -> str:
        if self.dry_run:
            return (f"{self.kind}: {self.path} ({self.reason}); the real run will move it to {self.moved_to.parent}/ "
                    "and measure its cell again (a dry run changes nothing)")
        return f"{self.kind}: {self.path} ({self.reason}); moved to {self.moved_to}, its cell will be measured again"


def damage_of(path: Path) -> tuple[str, str] | None:
    """What kind of row the file at ``path`` is that cannot be read as a result (DAMAGED or
    OTHER_VERSION) and why; None when it is whole, or absent."""
    # as convlab.measure.row.read_row_file reads a row, from the bytes the run's checks share
    try:
        parse_row(ROW_BYTES.read(path).decode("utf-8"))
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        return DAMAGED, "a directory, not a row file"
    except UnicodeDecodeError:
        return DAMAGED, "not text"
    except DamagedRow as damaged:
        return DAMAGED, str(damaged)
    except OtherFormat as other:
        return OTHER_VERSION, str(other)
    except OSError as error:
        return DAMAGED, f"cannot be read: {error.strerror or error}"
    return None


def moved_lines(moved: list[MovedRow], results_dir: str | Path = "results") -> list[str]:
    """The terminal's lines for the rows moved: one each, or one for all of a kind past MAX_LINES."""
    lines = []
    for kind in (DAMAGED, OTHER_VERSION):
        rows = [row for row in moved if row.kind == kind]
        if len(rows) <= MAX_LINES:
            lines += [row.line() for row in rows]
            continue
        folder = Path(results_dir) / "damaged"
        if rows[0].dry_run:
            lines.append(f"{PLURAL[kind]}: {len(rows)}; the real run will move them to {folder}/ and measure their cells "
                         "again (a dry run changes nothing)")
        else:
            lines.append(f"{PLURAL[kind]}: {len(rows)} moved to {folder}/ (each one's path and why: {folder}/damaged.log), "
                         "their cells will be measured again")
    return lines


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
        found = damage_of(path)
        if found is None:
            continue
        kind, reason = found
        try:
            relative = path.resolve().relative_to(results_dir.resolve())
        except ValueError:
            relative = Path(path.name)
        target = results_dir / "damaged" / relative.parent / f"{relative.stem}.{stamp}{relative.suffix}"
        number = 1
        while target.exists():  # the same cell moved twice within a second keeps both
            number += 1
            target = target.with_name(f"{relative.stem}.{stamp}-{number}{relative.suffix}")
        if dry_run:
            moved.append(MovedRow(path, target, reason, dry_run=True, kind=kind))
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)
        record = MovedRow(path, target, reason, kind=kind)
        with open(results_dir / "damaged" / "damaged.log", "a") as log:
            log.write(f"{dt.datetime.now().isoformat(timespec='seconds')} {record.line()}\n")
        moved.append(record)
    return moved
