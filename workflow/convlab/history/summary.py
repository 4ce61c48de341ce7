"""The one reader of a summary (results/<device>/summary.csv, a family's slice of it, or rows of the results
database): every column typed as the row contract types it (convlab.measure.row.TYPES), numbers as numbers (NaN
where empty) and everything else as its text ('' where empty). Every page, figure and comparison reads a summary
through it, so that a column reads the same everywhere.

Older summaries still read: one without experiment, size or batch (before the families) gets the default
family, the image size and batch 1; one without a column the contract has since gained (precision, say) simply
lacks it, and its readers fall back where they need one (convlab.report.precision: the kernel's description).

Here, below the report, because ``compare`` (convlab.history.compare) reads summaries too.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from convlab.measure.row import NUMBER, TYPES, WHOLE
from convlab.plan.families import DEFAULT_FAMILY
from convlab.status import UserError

# The row contract's columns that hold numbers: whole numbers read as floats too, so that an empty one is NaN.
NUMERIC = tuple(name for name, kind in TYPES.items() if kind in (NUMBER, WHOLE))


class SummaryError(UserError, ValueError):
    """A file that cannot be read as a summary."""


def read_text_csv(path: str | Path) -> pd.DataFrame:
    """A CSV with every value as its text (empty where empty). Its text columns are Python strings in one block,
    not one array each: a report selects rows hundreds of times, and each selection copies every array."""
    return pd.read_csv(path, dtype=object, keep_default_na=False)


def typed(frame: pd.DataFrame, numeric: Iterable[str]) -> pd.DataFrame:
    """``frame`` with its ``numeric`` columns as numbers (text that is none: NaN), its columns in two blocks."""
    for column in numeric:
        if column in frame.columns:
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
    return frame.copy()  # one block of text and one of numbers: each selection copies two arrays, not sixty


def typed_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Summary rows held as text (a summary CSV's, or the results database's rows) typed as the row contract
    types them, with an older summary's missing columns filled (see the module docstring)."""
    frame = frame.copy()
    text = [column for column in frame.columns if column not in NUMERIC]
    frame[text] = frame[text].fillna("").astype(str)
    if "experiment" not in frame.columns:
        frame["experiment"] = DEFAULT_FAMILY
    for column in ("size", "batch", "gemm_m"):
        if column not in frame.columns:
            frame[column] = ""
    if "H" in frame.columns:
        frame["size"] = frame["size"].where(frame["size"].astype(str) != "", frame["H"])
    frame["batch"] = frame["batch"].where(frame["batch"].astype(str) != "", "1")
    return typed(frame, NUMERIC)


def read_summary(path: str | Path) -> pd.DataFrame:
    """The summary CSV at ``path``, typed (typed_summary). A header-only summary reads as no rows. Raises
    SummaryError, in one line, for a file that is missing or not a CSV."""
    try:
        frame = read_text_csv(path)
    except FileNotFoundError:
        raise SummaryError(f"{path}: no such summary") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, OSError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise SummaryError(f"{path} is not a summary CSV ({reason})") from None
    return typed_summary(frame)
