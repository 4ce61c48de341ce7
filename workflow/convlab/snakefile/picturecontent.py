"""The pictures the cells read, judged by their content: the cell rule takes its picture as an
ancient() input (its file's time decides nothing), and a row is kept while the results database
recorded, for its measurement, the picture that is on disk now.

A picture that is missing (data/ deleted, say) where rows were measured on it is made again before
the DAG, from the source as its rule would make it (ffmpeg's scaling is deterministic), so that
Snakemake does not measure those cells again merely because it made the file: the rows measured on
the same picture stay, the others are measured again. So are the pictures made by other code than
this checkout's (the source's record names it): Snakemake, which makes them again by its params
trigger, would not look at the cells below an ancient() input it re-makes."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from convlab.history.store import database_path
from convlab.pictures.source import downscale, generate_source, import_source, made_by_other_code, picture_hash
from convlab.plan.cell import Cell
from convlab.snakefile.database import recorded_hashes

# the downscale rule's output: the size is the picture's edge
DOWNSCALED = re.compile(r"^data/input_(\d+)\.png$")


@dataclass
class PictureRows:
    """The rows on disk measured on one picture, and what the database recorded of each's picture."""

    picture: str
    rows: list[str]
    recorded: dict[str, str]

    def other(self, content: str | None, vouched_only: bool) -> list[str]:
        """The rows not measured on a picture of ``content``: recorded with another; with
        ``vouched_only``, also those the database cannot tell."""
        return [row for row in self.rows
                if (row in self.recorded and self.recorded[row] != content) or (vouched_only and row not in self.recorded)]


def rows_by_picture(cells: Iterable[Cell], untouched: bool) -> list[PictureRows]:
    """Each downscaled picture the cells read that has rows on disk, with their recorded pictures."""
    by_picture: dict[tuple[str, str], list[str]] = {}
    for cell in cells:
        if cell.image and DOWNSCALED.match(cell.image) and Path(cell.path).is_file():
            by_picture.setdefault((cell.image, cell.device), []).append(cell.path)
    found: dict[str, PictureRows] = {}
    for (picture, device), rows in sorted(by_picture.items()):
        recorded = recorded_hashes(rows, database_path(f"results/{device}"), "input_hash", untouched)
        entry = found.setdefault(picture, PictureRows(picture, [], {}))
        entry.rows += rows
        entry.recorded.update(recorded)
    return list(found.values())


def make_picture(picture: str, source: str, source_size: int, user_image: str | None,
                 warn: Callable[[str], None]) -> None:
    """Make ``picture`` as the source and downscale rules would: the source first where it is missing."""
    if not Path(source).is_file():
        if user_image:
            import_source(user_image, source, source_size, warn=warn)
        else:
            generate_source(source, source_size, warn=warn)
    match = DOWNSCALED.match(picture)
    if match:
        downscale(source, picture, int(match.group(1)), warn=warn)


def remake_aside(pictures: list[str], source: str, source_size: int, user_image: str | None,
                 warn: Callable[[str], None]) -> None:
    """Make the source and ``pictures`` again beside the old ones, and put them in their place only
    once every one of them is made: where one cannot be (no ffmpeg on this machine, say), the old
    pictures stay as they were."""
    with tempfile.TemporaryDirectory(prefix=".remade-", dir=Path(source).parent) as scratch:
        aside = Path(scratch)
        made_source = str(aside / Path(source).name)
        for picture in pictures:
            make_picture(str(aside / Path(picture).name), made_source, source_size, user_image, warn)
        for made in sorted(aside.iterdir()):
            os.replace(made, Path(source).parent / made.name)


def check_pictures(cells: Iterable[Cell], source: str, source_size: int, user_image: str | None,
                   dry_run: bool) -> list[str]:
    """Make the pictures that rows were measured on where they are missing or were made by other
    code (the source's record says), and remove the rows measured on another picture than the one
    on disk then (not in a dry run); the lines to say."""
    entries = rows_by_picture(cells, untouched=dry_run)
    lines: list[str] = []
    if entries and Path(source).is_file() and made_by_other_code(source):
        names = ", ".join(entry.picture for entry in entries)
        if dry_run:
            return [f"{source} was made by other picture code: a real run makes it again with {names} before its "
                    "jobs, and keeps the rows measured on the same pictures"]
        warnings: list[str] = []
        try:
            remake_aside([entry.picture for entry in entries], source, source_size, user_image, warnings.append)
        except Exception as error:  # noqa: BLE001 - whatever it is, the pictures stay as they are
            return [f"warning: {source} was made by other picture code and could not be made again here "
                    f"({error}); the pictures as they are stay, with their rows"]
        lines += [f"warning: {warning}" for warning in warnings]
        lines.append(f"{source} was made by other picture code: made again, with {names}")
    for entry in entries:
        missing = not Path(entry.picture).is_file()
        if missing and dry_run:
            lines.append(f"{entry.picture} is missing: a real run makes it again before its jobs and keeps the "
                         f"{len(entry.rows)} rows measured on the same picture (this dry run lists their cells)")
            continue
        if missing:
            warnings = []
            try:
                make_picture(entry.picture, source, source_size, user_image, warnings.append)
            except Exception as error:  # noqa: BLE001 - whatever it is, the picture's rule says it in its log
                # left to the rules, as without this check: the picture's job makes it (or fails with
                # its one line), and the cells that read it are measured again on it
                Path(entry.picture).unlink(missing_ok=True)
                lines.append(f"{entry.picture} is missing and could not be made again before the run ({error}): "
                             f"its rule makes it, and the {len(entry.rows)} cells that read it are measured again")
                continue
            lines += [f"warning: {warning}" for warning in warnings]
        other = entry.other(picture_hash(entry.picture), vouched_only=missing)
        if not dry_run:
            for row in other:
                Path(row).unlink(missing_ok=True)
        if missing:
            kept = len(entry.rows) - len(other)
            again = f"; {len(other)} measured again (measured on another picture, or none recorded)" if other else ""
            lines.append(f"{entry.picture} was missing: made again; the {kept} rows measured on the same picture "
                         f"are kept{again}")
        elif other:
            what = "a real run measures them again" if dry_run else "measured again"
            lines.append(f"{entry.picture}: {len(other)} rows were measured on another picture than this one; {what}")
    return lines
