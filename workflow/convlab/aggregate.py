"""Collect every cell's row into one summary table."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pandas as pd

from convlab.row import COLUMNS


def read_rows(cell_csvs: list[str | Path]) -> list[list[str]]:
    """Each file's one row, checked against the row contract. Read with the csv module and parsed
    by pandas once: a thousand pd.read_csv calls took seconds."""
    rows = []
    for path in cell_csvs:
        with open(path, newline="") as handle:
            records = list(csv.reader(handle))
        if len(records) != 2 or records[0] != COLUMNS or len(records[1]) != len(COLUMNS):
            raise ValueError(f"{path}: not a one-row result in the current row format; delete it and re-run")
        rows.append(records[1])
    return rows


def aggregate(cell_csvs: list[str | Path], out: str | Path) -> pd.DataFrame:
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(read_rows(cell_csvs))
    text.seek(0)
    summary = pd.read_csv(text)
    summary = summary.sort_values(["experiment", "kernel", "variant", "H", "stride", "filter_size"], kind="stable")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    summary.to_csv(out, index=False)
    return summary
