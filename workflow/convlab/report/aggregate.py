"""Collect every cell's row into one summary table, or one family's cells into its slice of it (the report's jobs
read the narrowest of the two they need, so that a change to one family's rows redraws only what reads them)."""

from __future__ import annotations

import csv
import io
from collections import Counter
from pathlib import Path

import pandas as pd

from convlab.atomicfile import write_text_atomically
from convlab.measure.row import COLUMNS, DamagedRow, OtherFormat, read_row_file, row_check
from convlab.status import UserError


class RowRefused(UserError, ValueError):
    """A cell's file is not a whole row of the current format: the summary is not written."""


def read_rows(cell_csvs: list[str | Path]) -> list[list[str]]:
    """Each file's one row, checked (see convlab.measure.row). Parsed by the csv module and handed to
    pandas once: a thousand pd.read_csv calls took seconds."""
    rows = []
    for path in cell_csvs:
        try:
            rows.append(read_row_file(path))
        except DamagedRow as damaged:
            raise RowRefused(f"{path} is damaged ({damaged}); run snakemake again: it moves the file to "
                             "results/<device>/damaged/ and measures the cell again") from None
        except OtherFormat as other:
            raise RowRefused(f"{path} is a row of another convlab version ({other}); run snakemake again: it moves "
                             "the file to results/<device>/damaged/ and measures the cell again") from None
    return rows


def read_slices(slice_csvs: list[str | Path]) -> list[list[str]]:
    """The rows of families' slices (write_slice), each checked again against its row check: a slice is the
    cells' rows as they wrote them, so the summary joined from the slices is the summary of the cells."""
    rows = []
    for path in slice_csvs:
        with open(path, newline="", encoding="utf-8") as handle:
            header, *records = csv.reader(handle)
        if header != COLUMNS:
            raise RowRefused(f"{path} is not a family's slice of this summary format (its columns differ); "
                             "delete it and run snakemake again")
        for number, values in enumerate(records, start=2):
            if len(values) != len(COLUMNS) or values[-1] != row_check(values[:-1]):
                raise RowRefused(f"{path}: line {number} is damaged (its check does not match its values); delete "
                                 "the file and run snakemake again")
        rows += records
    return rows


ORDER = ["experiment", "kernel", "variant", "H", "stride", "filter_size"]


def _frame(rows: list[list[str]]) -> pd.DataFrame:
    """The rows as the summary types them (pandas reads the columns' text), in the summary's order."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(rows)
    text.seek(0)
    return pd.read_csv(text).sort_values(ORDER, kind="stable")


def write_slice(cell_csvs: list[str | Path], out: str | Path) -> dict[str, int]:
    """One family's slice of the summary (results/<device>/summary/<family>.csv): its cells' rows, checked, as
    the cells wrote them (the summary types every column over all rows, which a slice cannot), in the summary's
    order; written in one step. Returns the number of rows."""
    rows = read_rows(cell_csvs)
    order = _frame(rows).index if rows else []
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(rows[i] for i in order)
    write_text_atomically(out, text.getvalue())
    status = COLUMNS.index("status")
    return dict(Counter(row[status] for row in rows).most_common())


def code_versions(summary: pd.DataFrame) -> dict[str, int]:
    """Rows per measurement-code version, most rows first."""
    if "code_version" not in summary:
        return {}
    counts = summary["code_version"].fillna("unknown").astype(str).value_counts()
    return {str(version): int(n) for version, n in counts.items()}


def mixed_code_note(summary: pd.DataFrame) -> str | None:
    """One sentence when the rows were measured by more than one version of the code, else None."""
    versions = code_versions(summary)
    if len(versions) < 2:
        return None
    listed = ", ".join(f"{version} ({n} rows)" for version, n in versions.items())
    return (f"these results mix {len(versions)} versions of the measurement code: {listed}; "
            "their numbers may not be comparable")


def aggregate(cell_csvs: list[str | Path], out: str | Path, slices: bool = False) -> tuple[pd.DataFrame, list[str]]:
    """The summary of ``cell_csvs`` (with ``slices``: of families' slices, write_slice), written to ``out`` in one
    step (a refused row leaves the previous summary as it was), and its warnings (mixed code versions, a throttled
    GPU) for the caller to show wherever the command's output goes."""
    summary = _frame(read_slices(cell_csvs) if slices else read_rows(cell_csvs))
    write_text_atomically(out, summary.to_csv(index=False))
    notes = [note for note in (mixed_code_note(summary), throttled_note(summary)) if note]
    return summary, [f"warning: {out}: {note}" for note in notes]


def throttled_note(summary: pd.DataFrame) -> str | None:
    """One sentence when cells were timed while the GPU was throttled, else None."""
    if "throttled" not in summary:
        return None
    throttled = summary[summary["throttled"].astype(str) == "yes"]
    if throttled.empty:
        return None
    reasons = sorted({reason for text in throttled["throttle_reasons"].fillna("").astype(str)
                      for reason in text.split(";") if reason})
    return (f"{len(throttled)} of {len(summary)} cells were timed while the GPU was throttled "
            f"({', '.join(reasons) or 'SM clock below 75 % of its default'}); their times are slower than the "
            "GPU can run (column throttled)")
