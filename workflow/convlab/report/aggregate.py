"""Collect every cell's row into one summary table."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pandas as pd

from convlab.atomicfile import write_text_atomically
from convlab.measure.row import COLUMNS, DamagedRow, OtherFormat, read_row_file
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
            raise RowRefused(f"{path} was {other}; run snakemake again (without --rerun-triggers) to "
                             "measure it again") from None
    return rows


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


def aggregate(cell_csvs: list[str | Path], out: str | Path) -> tuple[pd.DataFrame, list[str]]:
    """The summary of ``cell_csvs``, written to ``out`` in one step (a refused row leaves the
    previous summary as it was), and its warnings (mixed code versions, a throttled GPU) for the
    caller to show wherever the command's output goes."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(read_rows(cell_csvs))
    text.seek(0)
    summary = pd.read_csv(text)
    summary = summary.sort_values(["experiment", "kernel", "variant", "H", "stride", "filter_size"], kind="stable")
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
