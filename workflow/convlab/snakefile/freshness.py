"""Outputs checked by what they were made from, not by file times or Snakemake's metadata.

A family's slice of the summary and the summary itself stand for the cell rows: each holds the
row check of every row it was made from. Snakemake trusts their times and its own records; a
slice put back from a copy (`cp -p` keeps its old time), or one below an ancient() input, is not
checked on its own merits. So each run compares the checks, which costs reading one line of each
cell's row, and removes each output that disagrees, with the summary made from it: both are
targets of the run, which then makes them again.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from convlab.snakefile.rowbytes import ROW_BYTES


@dataclass(frozen=True)
class Stale:
    """An output that no longer stands for what it was made from, and why."""

    path: Path
    why: str

    def line(self, dry_run: bool) -> str:
        return f"{self.path}: {self.why}; {'a real run makes it again' if dry_run else 'removed, and made again'}"


def cell_row_check(path: str | Path) -> str | None:
    """The row check of a cell's row file (its last column), or None where there is no readable row."""
    try:
        lines = ROW_BYTES.read(path).decode("utf-8", "replace").strip().splitlines()
    except OSError:
        return None
    if len(lines) < 2:
        return None
    return lines[-1].rsplit(",", 1)[-1].strip() or None


def table_row_checks(path: str | Path) -> list[str] | None:
    """The row checks a summary or a slice holds (None where it cannot be read)."""
    try:
        with open(path, newline="") as handle:
            rows = csv.reader(handle)
            header = next(rows, [])
            at = header.index("row_check") if "row_check" in header else len(header)
            return [row[at] if at < len(row) else "" for row in rows if row]
    except (OSError, UnicodeDecodeError, csv.Error):
        return None


def _disagreement(held: list[str] | None, made_from: list[str]) -> str | None:
    if held is None:
        return "cannot be read"
    if sorted(held) != sorted(made_from):
        return (f"holds other rows than it is made from ({len(held)} rows, {len(made_from)} made from, "
                f"{len(set(made_from) - set(held))} of those not in it: a restored or edited copy)")
    return None


def stale_summaries(results: str | Path, family_cells: Mapping[str, Sequence[str]]) -> list[Stale]:
    """The slices (results/<device>/summary/<family>.csv) whose rows are not the family's cell rows
    as they are now, and the summary where it is not its slices. A family with a cell whose row is
    missing is left to Snakemake, which measures that cell and then makes the slice again."""
    results = Path(results)
    summary = results / "summary.csv"
    stale: list[Stale] = []
    slice_checks: list[str] = []
    complete = True  # every slice there, made from rows that are all there
    for family, cells in family_cells.items():
        path = results / "summary" / f"{family}.csv"
        checks = [cell_row_check(cell) for cell in cells]
        if not path.is_file() or any(check is None for check in checks):
            # Snakemake makes such a slice only where the summary needs it
            if summary.is_file() and not path.is_file() and all(check is not None for check in checks):
                stale.append(Stale(path, "missing"))
            complete = False
            continue
        why = _disagreement(table_row_checks(path), checks)
        if why:
            stale.append(Stale(path, why))
        slice_checks += checks
    if complete and not stale and summary.is_file():
        why = _disagreement(table_row_checks(summary), slice_checks)
        if why:
            stale.append(Stale(summary, why))
    return stale


def remove_stale(stale: list[Stale], summary: Path, dry_run: bool) -> list[str]:
    """Remove each stale output and the summary made from it (not in a dry run); their lines."""
    if stale and summary.is_file() and summary not in [entry.path for entry in stale]:
        stale = [*stale, Stale(summary, "made from a slice that is made again")]
    if not dry_run:
        for entry in stale:
            entry.path.unlink(missing_ok=True)
    return [entry.line(dry_run) for entry in stale]


def row_fields(path: str | Path, *names: str) -> tuple[str | None, ...]:
    """The values a cell's row records in columns ``names`` (None for one it has not: a row written
    before rows recorded it, or no readable row)."""
    try:
        row = ROW_BYTES.columns(path)
    except OSError:
        row = None
    return tuple((row.get(name) or None) if row is not None else None for name in names)


def row_spec_hash(path: str | Path) -> str | None:
    """The settings hash a cell's row records (``spec_hash``), or None where it has none."""
    return row_fields(path, "spec_hash")[0]


def rows_of_other_settings(cells: Iterable[tuple[str, str]]) -> list[Path]:
    """The rows (of ``cells``: each row's path and the settings hash the config gives its cell now)
    measured with other settings: Snakemake re-measures them only where its records of the rule's
    params survive."""
    return [Path(path) for path, wanted in cells if (recorded := row_spec_hash(path)) and recorded != wanted]


def rows_of_other_code(paths: Iterable[str], code_version: str, convlab_version: str) -> list[Path]:
    """The rows (of ``paths``) that another measurement code measured than this run's: another
    convlab, or an edit of the code that measures (their ``convlab_version``, ``code_version``).
    Snakemake re-measures them only where its records of the rule's params survive; a row put back
    from a copy, or made consistent by hand, would otherwise stand for its cell for good."""
    stale = []
    for path in paths:
        code, version = row_fields(path, "code_version", "convlab_version")
        if (code and code != code_version) or (version and version != convlab_version):
            stale.append(Path(path))
    return stale


def remove_rows_of_other_code(rows: list[Path], dry_run: bool) -> list[str]:
    """Remove those rows, so that this run measures their cells (a recorded row stays in the results
    database); one line for all."""
    if not rows:
        return []
    said = (f"{len(rows)} rows were measured by other measurement code than this convlab's (another version, or "
            f"an edit of the code that measures; the first: {rows[0]})")
    if dry_run:
        return [f"{said}; a real run measures them again"]
    for row in rows:
        row.unlink(missing_ok=True)
    return [f"{said}; measured again"]


def remove_rows_of_other_settings(rows: list[Path], dry_run: bool) -> list[str]:
    """Remove those rows, as Snakemake removes a job's output before it runs again (a recorded
    row stays in the results database, an unrecorded one in its run's journal), so that this run
    measures their cells; one line for all."""
    if not rows:
        return []
    if dry_run:
        return [f"{len(rows)} rows were measured with other settings than the config gives their cells now "
                f"(the first: {rows[0]}); a real run measures them again"]
    for row in rows:
        row.unlink(missing_ok=True)
    return [f"{len(rows)} rows were measured with other settings than the config gives their cells now "
            f"(the first: {rows[0]}); measured again"]


def dated_after(row: str | Path, files: Iterable[str | Path]) -> bool:
    """Whether a row file is dated after every one of ``files`` there is (Snakemake's times then keep it)."""
    try:
        dated = Path(row).stat().st_mtime
    except OSError:
        return False
    times = []
    for path in files:
        try:
            times.append(Path(path).stat().st_mtime)
        except OSError:
            continue
    return bool(times) and all(dated >= time for time in times)


def remove_rows_of_edited_kernels(rows: list[str], hidden: list[str], dry_run: bool) -> list[str]:
    """Remove the rows measured on other kernel files than those on disk now, so that this run
    measures their cells (each stays in the results database); one line for those whose times hid
    the edit (``hidden``): the others Snakemake would measure again by their times too."""
    said = (f"{len(hidden)} rows are dated after their kernel's files but were measured on other files (a clock "
            f"ahead, a copied row; the first: {hidden[0]})") if hidden else ""
    if not dry_run:
        for row in rows:
            Path(row).unlink(missing_ok=True)
    if not said:
        return []
    return [f"{said}; a real run measures them again" if dry_run else f"{said}; measured again"]


# How far ahead of this host's clock a file's date may lie before it is taken for another clock's (a
# network file system's server, a node, an archive): a few seconds of drift are common.
AHEAD_SLACK_S = 60.0


def files_dated_ahead(folders: Iterable[str | Path], now: float, rows: Iterable[str] = ()) -> list[Path]:
    """The files under ``folders`` and of ``rows`` dated more than AHEAD_SLACK_S after ``now``. The
    walk leaves out the jobs' logs (no rule reads them, so no time of theirs is compared) and the
    cell rows' folders, as many as the rows: each row of ``rows`` (the grid's) is looked at by its
    path instead, and a row outside the grid is in no job of the run."""
    ahead: list[Path] = []

    def look(path: str, status: os.stat_result) -> None:
        if status.st_mtime > now + AHEAD_SLACK_S:
            ahead.append(Path(path))

    pending = [str(folder) for folder in folders]
    while pending:
        try:
            entries = list(os.scandir(pending.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in ("logs", "cells"):
                        pending.append(entry.path)
                else:
                    look(entry.path, entry.stat(follow_symlinks=False))
            except OSError:
                continue
    for row in rows:
        try:
            look(row, os.stat(row, follow_symlinks=False))
        except OSError:
            continue
    return sorted(ahead)


def date_now(files: list[Path], now: float, dry_run: bool) -> list[str]:
    """Date ``files`` ``now``, so that Snakemake's comparison of an output's time with its inputs' holds
    (a summary made now would otherwise be older than its rows, and the run stop); one line for all.
    What a file stands for is checked by its content, not by this date."""
    if not files:
        return []
    said = (f"{len(files)} files are dated in the future by another clock (a copy, a cluster node; the first: "
            f"{files[0]})")
    if dry_run:
        return [f"{said}; a real run dates them now"]
    for path in files:
        try:
            os.utime(path, (now, now), follow_symlinks=False)
        except OSError:
            continue
    return [f"{said}; dated now"]
