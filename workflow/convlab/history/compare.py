"""Compare two result sets cell by cell: two GPUs, two commits, or a rerun of the same code.

``python -m convlab compare A B`` reads two summaries (a summary CSV, or a folder holding
``summary.csv``), matches their cells on what was measured (experiment, kernel, variant and the
problem: size, batch, H, W, C_in, C_out, filter_size, stride, padding, gemm_m/n/k; not the
backend, so that a GPU can be compared with another GPU or with the cpu twins), and gives each
cell the ratio B/A of its median time ``kernel_ms`` and a verdict.

The verdict rule is convlab.history.verdictrule's, against the drift floor (``--floor``;
convlab.history.verdictpolicy). Cells in one set only are MISSING; cells that are not ``ok`` in both
sets get their statuses as the verdict (e.g. ``ok/wrong``), never a ratio.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from convlab.atomicfile import write_text_atomically
from convlab.history.comparefiles import default_out
from convlab.history.summary import SummaryError, read_summary
from convlab.history.verdictpolicy import LAUNCH_BOUND_FLOOR, LAUNCH_BOUND_MS
from convlab.history.verdictrule import (
    FASTER,
    MISSING,
    SAME,
    SLOWER,
    TIMED_VERDICTS,
    UNCLEAR,
    geomean,
    number,
    verdict,
)
from convlab.history.vouching import why_unvouched
from convlab.status import UserError

# The columns that say which cell a row measured, whatever the backend that measured it.
KEY_COLUMNS = ("experiment", "kernel", "variant", "size", "batch", "H", "W", "C_in", "C_out", "filter_size",
               "stride", "padding", "gemm_m", "gemm_n", "gemm_k")
# What a file must have to be read as a summary.
NEEDED_COLUMNS = ("experiment", "kernel", "variant", "status", "kernel_ms")

# Up to this many cells the whole table is printed; above it only the cells that are not SAME,
# at most MAX_PRINTED of them (every cell is in the CSV).
PRINT_ALL_UP_TO = 30
MAX_PRINTED = 60


class CompareError(UserError, ValueError):
    """An input that cannot be compared: not a summary, or no cell in common."""


@dataclass(frozen=True)
class ResultSet:
    """One side of a comparison: its label, the summary file it came from, and its rows."""

    label: str
    path: Path
    rows: pd.DataFrame


def summary_path(path: str | Path) -> Path:
    """The summary CSV that ``path`` names: the file itself, or a folder's summary.csv."""
    path = Path(path)
    if path.is_dir():
        path = path / "summary.csv"
        if not path.is_file():
            raise CompareError(f"{path.parent} holds no summary.csv")
    elif not path.exists():
        raise CompareError(f"{path}: no such file or folder")
    return path


def set_label(path: Path) -> str:
    """A short name for a summary: its folder's name for summary.csv (results/<label>/), else the file's."""
    path = path.resolve()
    return path.parent.name if path.name == "summary.csv" else path.stem


def load_set(path: str | Path) -> ResultSet:
    """Read one side. Raises CompareError for a missing file or one that is not a summary."""
    file = summary_path(path)
    try:
        rows = read_summary(file)
    except SummaryError as error:
        raise CompareError(str(error)) from None
    lacking = [name for name in NEEDED_COLUMNS if name not in rows.columns]
    if lacking:
        raise CompareError(f"{file} is not a summary CSV (no column {', '.join(lacking)})")
    if rows.empty:
        raise CompareError(f"{file} has no rows")
    return ResultSet(set_label(file), file, rows)


def _key_text(value: object) -> str:
    """One key value as text, so that 64, 64.0 and '64' match and empty matches NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        return text
    return str(int(number)) if number.is_integer() else text


def _keyed(rows: pd.DataFrame, keys: list[str], label: str) -> pd.DataFrame:
    keyed = rows.copy()
    for column in keys:
        keyed[column] = keyed[column].map(_key_text) if column in keyed else ""
    repeated = keyed[keyed.duplicated(keys, keep=False)]
    if not repeated.empty:
        first = repeated.iloc[0]
        cell = " ".join(f"{k}={first[k]}" for k in keys if first[k] != "")
        raise CompareError(f"{label} has {len(repeated)} rows for {repeated.groupby(keys).ngroups} cells measured "
                           f"more than once (e.g. {cell}); compare one backend's summary at a time")
    return keyed


def _neighboured(row: pd.Series) -> bool:
    """Whether another process used the GPU while either side of the cell was timed."""
    return any(number(row[f"gpu_neighbours_{side}"]) > 0 for side in ("a", "b"))


# The columns of a side that say whether the lab can vouch for its time (convlab.history.vouching).
VOUCH_COLUMNS = ("backend", "throttled", "gpu_neighbours", "phase_ms")
# What a side of the results database ran: the cell's path and its kernel files' hash (empty for a
# summary file's side), by which compare --why restores each version (convlab.pairs.comparewhy).
VERSION_COLUMNS = ("cell", "kernel_hash")


def unconfirmed_note(row: pd.Series, word: str, labels: tuple[str, str]) -> str:
    """Why a FASTER or SLOWER between the two sides cannot be confirmed ('' where both are vouched
    for): the reason, with the side it holds for where only one does."""
    reasons = [why_unvouched({column: row[f"{column}_{side}"] for column in VOUCH_COLUMNS}) for side in ("a", "b")]
    if not any(reasons):
        return ""
    if reasons[0] == reasons[1]:
        return f"unconfirmed {word}: {reasons[0]}"
    label, reason = next((label, reason) for label, reason in zip(labels, reasons) if reason)
    return f"unconfirmed {word}: {label} measured while {reason}"


def _timed(row: pd.Series, side: str) -> bool:
    ms = number(row[f"kernel_ms_{side}"])
    return row[f"status_{side}"] == "ok" and math.isfinite(ms) and ms > 0


def compare_sets(a: pd.DataFrame, b: pd.DataFrame, floor: float,
                 labels: tuple[str, str] = ("A", "B")) -> pd.DataFrame:
    """One row per cell of either set: the key, both statuses and times, the ratio B/A and the
    verdict against the drift ``floor``. Raises CompareError when the sets have no cell in common."""
    if not 0 < floor < 1:
        raise CompareError(f"--floor {floor:g}: give a fraction between 0 and 1 (e.g. 0.08 for 8 %)")
    keys = [k for k in KEY_COLUMNS if k in a.columns and k in b.columns]  # an older summary may lack some
    values = ["status", "kernel_ms", "kernel_ms_iqr", "reps", *VOUCH_COLUMNS, *VERSION_COLUMNS]
    sides = []
    for rows, label in ((a, labels[0]), (b, labels[1])):
        keyed = _keyed(rows, keys, label)
        for column in values:
            if column not in keyed:
                keyed[column] = math.nan
        sides.append(keyed[keys + values])
    table = sides[0].merge(sides[1], on=keys, how="outer", suffixes=("_a", "_b"), indicator=True)
    if not (table["_merge"] == "both").any():
        raise CompareError(f"{labels[0]} ({len(a)} rows) and {labels[1]} ({len(b)} rows) have no cell in common")
    results = []
    for _, row in table.iterrows():
        if row["_merge"] != "both":
            results.append((MISSING, math.nan, math.nan, math.nan,
                            f"only in {labels[0] if row['_merge'] == 'left_only' else labels[1]}"))
        elif _timed(row, "a") and _timed(row, "b"):
            word, ratio, applied, noise = verdict(number(row["kernel_ms_a"]), number(row["kernel_ms_iqr_a"]),
                                                  number(row["kernel_ms_b"]), number(row["kernel_ms_iqr_b"]), floor)
            note = unconfirmed_note(row, word, labels) if word in (FASTER, SLOWER) else ""
            if note:
                word = UNCLEAR
            results.append((word, ratio, applied, noise, note))
        else:
            statuses = [str(row[f"status_{s}"]) if _timed(row, s) or row[f"status_{s}"] != "ok" else "ok without a time"
                        for s in ("a", "b")]
            results.append(("/".join(statuses), math.nan, math.nan, math.nan, "not timed in both"))
    table[["verdict", "ratio", "floor", "noise", "note"]] = pd.DataFrame(results, index=table.index)
    table["neighboured"] = [row["_merge"] == "both" and _neighboured(row) for _, row in table.iterrows()]
    # where a rerun with nothing changed would put the ratio: the floor each side of it
    table["ratio_low"] = table["ratio"] / (1 + table["floor"])
    table["ratio_high"] = table["ratio"] * (1 + table["floor"])
    table = table.drop(columns="_merge")
    for side in ("a", "b"):
        table[f"reps_{side}"] = pd.to_numeric(table[f"reps_{side}"], errors="coerce").round().astype("Int64")
        table[f"spread_{side}"] = table[f"kernel_ms_iqr_{side}"].map(number) / table[f"kernel_ms_{side}"].map(number)
    for column in VERSION_COLUMNS:
        for side in ("a", "b"):
            table[f"{column}_{side}"] = table[f"{column}_{side}"].fillna("").astype(str)
    order = keys + ["status_a", "status_b", "kernel_ms_a", "kernel_ms_b", "spread_a", "spread_b", "reps_a", "reps_b",
                    "ratio", "ratio_low", "ratio_high", "floor", "noise", "verdict", "note", "neighboured",
                    *(f"{column}_{side}" for column in VERSION_COLUMNS for side in ("a", "b"))]
    return table[order].sort_values(keys, kind="stable", key=_natural).reset_index(drop=True)


def _natural(column: pd.Series) -> pd.Series:
    """Numbers sort as numbers (size 96 before 128), text as text."""
    numbers = pd.to_numeric(column.replace("", math.nan), errors="coerce")
    return numbers if numbers.notna().any() or (column == "").all() else column


def _counts_text(cells: pd.DataFrame, name: str) -> str:
    timed = cells[cells["ratio"].notna()]
    counts = cells["verdict"].value_counts()
    mean = geomean(timed["ratio"])
    text = (f"{name}: geomean B/A {mean:.2f} over {len(timed)} cells; "
            if len(timed) else f"{name}: no cell timed in both; ")
    text += ", ".join(f"{int(counts.get(word, 0))} {word}" for word in TIMED_VERDICTS)
    missing = int(counts.get(MISSING, 0))
    not_ok = len(cells) - len(timed) - missing
    extra = [f"{missing} MISSING"] * bool(missing) + [f"{not_ok} not ok"] * bool(not_ok)
    return text + ("; " + ", ".join(extra) if extra else "")


def kernel_lines(table: pd.DataFrame) -> list[str]:
    """One line per kernel, grouped by experiment, then one for every cell."""
    lines = [_counts_text(cells, f"{experiment} {kernel}")
             for (experiment, kernel), cells in table.groupby(["experiment", "kernel"], sort=True)]
    return lines + [_counts_text(table, "overall")]


def _values(rows: pd.DataFrame, column: str) -> str:
    """A column's values in one set, most rows first (mixed sets name every value)."""
    if column not in rows:
        return "(not recorded)"
    values = rows[column]
    counts = values.where(values.notna() & (values.astype(str) != ""), "unknown").astype(str).value_counts()
    if len(counts) == 1:
        return str(counts.index[0])
    return ", ".join(f"{value} ({n} rows)" for value, n in counts.items())


def describe(result_set: ResultSet, name: str) -> list[str]:
    """Header lines naming one set: where it came from, and the device, backend and code it ran."""
    rows = result_set.rows
    return [f"{name} = {result_set.label}: {result_set.path} ({len(rows)} rows)",
            f"    device {_values(rows, 'device')}; backend {_values(rows, 'backend')}",
            f"    git_commit {_values(rows, 'git_commit')}; code_version {_values(rows, 'code_version')}"]


def _boards(rows: pd.DataFrame) -> set[str]:
    if "gpu_uuid" not in rows:
        return set()
    return {str(u) for u in rows["gpu_uuid"].dropna() if str(u).strip()}


def boards_line(a: ResultSet, b: ResultSet) -> list[str]:
    """Whether A and B ran on the same GPU boards. Two boards of one model can differ by more
    than the noise (cooling, clocks, memory parts), so a rerun on another node of a partition is
    not a rerun on the same GPU."""
    a_boards, b_boards = _boards(a.rows), _boards(b.rows)
    if not a_boards or not b_boards:
        return []
    if a_boards == b_boards:
        return [f"A and B ran on the same GPU board{'s' if len(a_boards) > 1 else ''}: {', '.join(sorted(a_boards))}"]
    if a_boards.isdisjoint(b_boards):
        return [f"A and B ran on different GPU boards ({', '.join(sorted(a_boards))} vs {', '.join(sorted(b_boards))}): "
                "a difference may be the boards', not the code's"]
    return [f"A and B share some GPU boards, not all: A {', '.join(sorted(a_boards))}; B {', '.join(sorted(b_boards))}"]


def cell_names(table: pd.DataFrame) -> pd.Series:
    """Each cell as short text: experiment, kernel, variant and the problem columns that vary
    within its experiment (those that do not add nothing to tell cells apart)."""
    names = pd.Series("", index=table.index)
    problem = [k for k in KEY_COLUMNS[3:] if k in table]
    for _, cells in table.groupby("experiment", sort=False):
        varying: list[str] = []
        for k in problem:  # H and W repeat size on square problems, gemm_m does on gemm: name it once
            if cells[k].nunique() > 1 and not any(cells[k].equals(cells[shown]) for shown in varying):
                varying.append(k)
        varying = varying or [k for k in ("size",) if k in cells]
        for index, row in cells.iterrows():
            parts = [row["experiment"], row["kernel"], row["variant"]]
            parts += [f"{k}={row[k]}" for k in varying if row[k] != ""]
            names[index] = " ".join(parts)
    return names


def ms_text(value: float) -> str:
    return "" if not math.isfinite(number(value)) else f"{number(value):.4g}"


def percent_text(value: float) -> str:
    return "" if not math.isfinite(number(value)) else f"{100 * number(value):.0f}%"


def _ratio_text(row: pd.Series) -> str:
    if math.isnan(row["ratio"]):
        return ""
    return f"{row['ratio']:.3f} [{row['ratio_low']:.3f}, {row['ratio_high']:.3f}]"


def cell_table_lines(table: pd.DataFrame, labels: tuple[str, str]) -> list[str]:
    """The per-cell table as text: every cell when there are few, else those that are not SAME."""
    shown = table if len(table) <= PRINT_ALL_UP_TO else table[table["verdict"] != SAME]
    names = cell_names(table)
    header = ("verdict", "B/A [interval]", f"A ms ({labels[0]})", "spread", f"B ms ({labels[1]})", "spread", "cell")
    rows = [(row["verdict"], _ratio_text(row), ms_text(row["kernel_ms_a"]),
             percent_text(row["spread_a"]), ms_text(row["kernel_ms_b"]), percent_text(row["spread_b"]), names[index])
            for index, row in shown.head(MAX_PRINTED).iterrows()]
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header) - 1)]
    lines = ["  ".join(str(v).ljust(w) for v, w in zip(r, widths)) + "  " + r[-1] for r in [header, *rows]]
    hidden_same = len(table) - len(shown)
    if len(shown) > MAX_PRINTED:
        lines.append(f"... and {len(shown) - MAX_PRINTED} more cells that are not SAME")
    if hidden_same:
        lines.append(f"({hidden_same} SAME cells not shown)")
    return lines


@dataclass(frozen=True)
class Comparison:
    """What compare found: its per-cell table, the lines it prints, and the CSV it wrote."""

    table: pd.DataFrame
    header: list[str]  # the two sides, the boards, the rule's floor
    cells: list[str]  # the cell table as text
    summary: list[str]  # one line per kernel, and the overall line
    title: str
    out: Path  # the CSV

    @property
    def text(self) -> str:
        return "\n".join([*self.header, "", *self.cells, "", *self.summary])

    @property
    def slower(self) -> int:
        return int((self.table["verdict"] == SLOWER).sum())

    @property
    def neighboured(self) -> int:
        """Cells timed beside another process's work on the GPU, on either side."""
        return int(self.table["neighboured"].sum())


def same_measurements(a: pd.DataFrame, b: pd.DataFrame) -> set[str]:
    """Row checks present on both sides: one measurement, not two to compare."""
    if "row_check" not in a or "row_check" not in b:
        return set()
    return (set(a["row_check"].dropna().astype(str)) & set(b["row_check"].dropna().astype(str))) - {""}


def compare_result_sets(a: ResultSet, b: ResultSet, out: str | Path | None, floor: float) -> Comparison:
    """Compare two result sets against the drift ``floor`` and write the CSV. A cell whose row is
    the same measurement on both sides (two states of the results database) is left out and
    counted. The page is convlab.report.comparepage's."""
    labels = (a.label, b.label) if a.label != b.label else (f"A ({a.label})", f"B ({b.label})")
    shared = same_measurements(a.rows, b.rows)
    a_rows = a.rows[~a.rows["row_check"].astype(str).isin(shared)] if shared else a.rows
    b_rows = b.rows[~b.rows["row_check"].astype(str).isin(shared)] if shared else b.rows
    if shared and (a_rows.empty or b_rows.empty):
        raise CompareError(f"{a.label} and {b.label} are the same measurements of every cell they share "
                           f"({len(shared)} rows): nothing was re-measured between them")
    table = compare_sets(a_rows, b_rows, floor, labels)
    out = Path(out) if out else default_out(a, b)
    header = [*describe(a, "A"), *describe(b, "B"), *boards_line(a, b),
              f"ratio B/A of kernel_ms (median); floor {floor:.0%}, at least {LAUNCH_BOUND_FLOOR:.0%} under "
              f"{LAUNCH_BOUND_MS:g} ms; {len(table)} cells"]
    if shared:
        header.append(f"{len(shared)} cells are the same measurement on both sides and are left out")
    write_text_atomically(out, table.to_csv(index=False))
    return Comparison(table, header, cell_table_lines(table, labels), kernel_lines(table),
                      f"convlab compare: {a.label} vs {b.label}", out)
