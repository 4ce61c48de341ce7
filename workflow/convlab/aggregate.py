"""Collect every cell's row into one summary table."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from convlab.row import COLUMNS


def aggregate(cell_csvs: list[str | Path], out: str | Path) -> pd.DataFrame:
    frames = [pd.read_csv(path) for path in cell_csvs]
    for path, frame in zip(cell_csvs, frames):
        if list(frame.columns) != COLUMNS or len(frame) != 1:
            raise ValueError(f"{path}: not a one-row result in the current row format; delete it and re-run")
    summary = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
    summary = summary.sort_values(["experiment", "kernel", "variant", "H", "stride", "filter_size"], kind="stable")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    summary.to_csv(out, index=False)
    return summary
