"""The seeds' numbers next to this run's: join config/seeds/seed_tables.csv with the summary through
config/seeds/method_map.yaml into one tidy table, one row per seed number.

``ratio`` is this run's speed relative to the seed's, so > 1 means this run was faster: seed_ms /
this_ms for times, this / seed for GFLOPS and for speed-ups ("x"). It is left empty where the seed's
number is a launch that never ran (its defect says so) or where this run has no ok cell.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from convlab.history.summary import read_summary, read_text_csv, typed
from convlab.plan.families import FAMILIES
from convlab.report.codelabels import kernel_labels, ran_label, shared_code
from convlab.report.familydisplay import display
from convlab.status import OK, UserError

NOT_RUN = "not_run"  # this run has no cell for the seed's problem (family, size or kernel not configured)
UNMAPPED = "unmapped"  # no pipeline cell reproduces the seed's number (method_map's `unmapped`)
SAME_CODE = "same_code"  # a speed-up of one kernel over another that ran the very same code: not formed
NOTHING_COMPARABLE = "nothing comparable in this run"
# Defects whose seed number is not a measurement of the kernel at all: no ratio is formed with them.
NEVER_RAN = {"block64_launch_failed", "block_over_1024_launch_failed"}
DEFECT_NOTES = {
    "block64_launch_failed": "seed's 64x64 block (4096 threads) was refused by CUDA: the kernel never ran; "
                             "its ~0.003 ms is not a time",
    "block_over_1024_launch_failed": "seed's N x N block is over 1024 threads: the kernel never ran, only the "
                                     "copy of C was timed",
    "search_timed": "seed timed cuDNN's algorithm search together with the convolution",
    "weights_bug": "seed's kernel copied the same weight slice for every output channel",
    "stride_ignored": "seed's direct kernel launched a thread per input position and ignored the stride",
}
COLUMNS = ["seed", "table", "method", "experiment", "kernel", "variant", "size", "stride", "filter_size", "block",
           "layer", "seed_gpu", "unit", "seed_value", "this_gpu", "this_value", "ratio", "this_status",
           "this_reason", "defect", "defect_note", "note", "ran_as"]
# What picking a seed number's cell reads of the summary (_problem, _pick, _this_value, ran_label).
PICK_COLUMNS = ("experiment", "kernel", "variant", "status", "reason", "implementation", "backend", "kernel_ms",
                "gflops", "gemm_m", "size", "stride", "filter_size")
def _gpu_name(name: str) -> str:
    return "GPU not named" if name == "unnamed" else name


def gpu_names(rows: pd.DataFrame) -> tuple[str, str]:
    """The seed's GPU(s) and this run's GPU of some rows of the comparison, as figures and pages name them."""
    seed_gpu = ", ".join(sorted(set(rows["seed_gpu"].map(_gpu_name)))) or "?"
    this_gpu = next((g for g in rows["this_gpu"] if g), "") or "this run"
    return seed_gpu, this_gpu


# ---- this run against a seed: one reading of "comparable", used by every figure and page


@dataclass(frozen=True)
class SeedRatios:
    """This run's speed ratios over seed numbers: those without a defect are compared, the rest left out."""

    compared: int
    left_out: int
    median: float
    low: float
    high: float


def seed_ratios(rows: pd.DataFrame) -> SeedRatios:
    """The ratios a page may quote: a ratio against a seed number with a known defect (the seed timed the
    algorithm search, used one weight slice, ...) is left out, on every page alike."""
    ratios = rows["ratio"].dropna() if "ratio" in rows.columns else pd.Series(dtype=float)
    clean = ratios[rows.loc[ratios.index, "defect"] == ""]
    return SeedRatios(compared=len(clean), left_out=len(ratios) - len(clean), median=float(clean.median()),
                      low=float(clean.min()), high=float(clean.max()))


def ratio_text(rows: pd.DataFrame) -> str:
    """The one sentence fragment every figure and page uses for this run against a seed."""
    stats = seed_ratios(rows)
    left = (f"{stats.left_out} ratio{'s' if stats.left_out != 1 else ''} against seed numbers with a known "
            "defect left out") if stats.left_out else ""
    if not stats.compared:
        return NOTHING_COMPARABLE + (f" ({left})" if left else "")
    return f"median speed ratio this/seed {stats.median:.3g}x (n={stats.compared}" + (f"; {left})" if left else ")")


def load_seeds(seed_csv: str | Path) -> pd.DataFrame:
    seeds = pd.read_csv(seed_csv, dtype=str, keep_default_na=False)
    seeds["value"] = pd.to_numeric(seeds["value"])
    return seeds


def load_map(map_yaml: str | Path) -> dict:
    return yaml.safe_load(Path(map_yaml).read_text())


def _num(text: str) -> float:
    return float(text) if text not in ("", None) else math.nan


def problem_sizes(rows: pd.DataFrame, experiment: str) -> pd.Series:
    """Each row's problem size as its family names it: the family's size column where filled, else size."""
    column = display(experiment).size_column
    return rows[column].where(rows[column].notna(), rows["size"])


def _problem(rows: pd.DataFrame, experiment: str, seed_row: pd.Series) -> pd.DataFrame:
    """This run's cells of the seed row's problem (size, and a convolution's stride and filter), whatever
    their variant."""
    rows = rows[problem_sizes(rows, experiment) == _num(seed_row["size"])]
    if not display(experiment).convolves:
        return rows
    stride = _num(seed_row["stride"])
    rows = rows[rows["stride"] == (1.0 if math.isnan(stride) else stride)]
    filter_size = _num(seed_row["filter_size"])
    if not math.isnan(filter_size):
        rows = rows[rows["filter_size"] == filter_size]
    return rows


def _fastest(rows: pd.DataFrame) -> pd.Series | None:
    """The fastest ok row, or else the first failed one (so its status and reason show)."""
    if rows.empty:
        return None
    ok = rows[(rows["status"] == OK) & rows["kernel_ms"].notna()]
    if not ok.empty:
        return ok.sort_values("kernel_ms").iloc[0]
    return rows.sort_values("variant").iloc[0]


def _pick(rows: pd.DataFrame, match: dict, seed_row: pd.Series) -> pd.Series | None:
    """The cell that reproduces the seed number, by method_map's `match` rule."""
    if rows.empty:
        return None
    wanted = None
    if match.get("block") == "from_seed" and seed_row["block"]:
        wanted = f"block~{seed_row['block']}"
    elif match.get("threads") == "from_seed" and seed_row["block"]:
        wanted = f"threads~{seed_row['block']}"
    elif match.get("variant") not in (None, "best"):
        wanted = match["variant"]
    if wanted is None:
        return _fastest(rows)
    chosen = rows[rows["variant"] == wanted]
    if chosen.empty and set(rows["variant"]) == {"default"}:
        chosen = rows  # a twin without the tunable (e.g. the cpu backend) runs it as `default`
    return _fastest(chosen)


def _speedup(summary: pd.DataFrame, entry: dict) -> tuple[float, str, str]:
    """Geometric mean over this run's layers and batches of baseline_ms / kernel_ms (seed 004)."""
    shared = shared_code(summary, entry["experiment"], entry["kernel"], entry["baseline"])
    if shared:
        return math.nan, SAME_CODE, (f"{entry['kernel']} and {entry['baseline']} both ran {shared}: "
                                     "no speed-up of the same code over itself")
    table = layer_speedups(summary, entry["kernel"], entry["baseline"], entry["experiment"])
    if table.empty:
        return math.nan, NOT_RUN, f"no ok {entry['kernel']} and {entry['baseline']} cells of the same layer"
    value = float(np.exp(np.log(table["speedup"]).mean()))
    return value, OK, f"geometric mean over {len(table)} layer x batch cells"


def layer_speedups(summary: pd.DataFrame, kernel: str, baseline: str, experiment: str) -> pd.DataFrame:
    """baseline_ms / kernel_ms per layer (C_in, H, W, C_out) and batch of ``experiment``, fastest ok variant of
    each; empty where the two kernels ran the same code (the ratio would be timing noise)."""
    rows = summary[(summary["experiment"] == experiment) & (summary["status"] == OK) & summary["kernel_ms"].notna()]
    keys = ["C_in", "H", "W", "C_out", "batch"]
    best = rows.groupby(["kernel", *keys])["kernel_ms"].min()
    if shared_code(summary, experiment, kernel, baseline) or kernel not in best.index.get_level_values(0) or baseline not in best.index.get_level_values(0):
        return pd.DataFrame(columns=[*keys, "kernel_ms", "baseline_ms", "speedup"])
    table = pd.concat({"kernel_ms": best.loc[kernel], "baseline_ms": best.loc[baseline]}, axis=1).dropna()
    table["speedup"] = table["baseline_ms"] / table["kernel_ms"]
    return table.reset_index()


def _this_value(unit: str, row: pd.Series) -> float:
    if row is None or row["status"] != OK:
        return math.nan
    return float(row["kernel_ms"] if unit == "ms" else row["gflops"])


def _ratio(unit: str, seed_value: float, this_value: float) -> float:
    if not (this_value > 0 and seed_value > 0):
        return math.nan
    return seed_value / this_value if unit == "ms" else this_value / seed_value


def compare(seeds: pd.DataFrame, method_map: dict, summary: pd.DataFrame, device: str = "") -> pd.DataFrame:
    """One row per seed number: the seed's value, this run's in the same unit, and their ratio. ``device`` names
    this run's device where no row of ``summary`` does (a family that did not run)."""
    entries = {(m["seed"], str(m["table"]), m["method"]): m for m in method_map.get("mappings", [])}
    unmapped = {(u["seed"], str(u["table"]), u["method"]): u["reason"] for u in method_map.get("unmapped", [])}
    devices = summary["device"].replace("", np.nan).dropna() if "device" in summary.columns else pd.Series()
    this_gpu = devices.mode().iloc[0] if not devices.empty else device
    out = []
    labels = {experiment: kernel_labels(part) for experiment, part in summary.groupby("experiment")}
    # Each kernel's rows once, in the few columns a pick reads: every selection copies each column it keeps,
    # and a seed table of hundreds of numbers selects several times per number.
    picking = summary[[column for column in PICK_COLUMNS if column in summary.columns]]
    by_kernel = dict(tuple(picking.groupby(["experiment", "kernel"], sort=False)))
    no_rows = picking.iloc[:0]
    for _, seed_row in seeds.iterrows():
        key = (seed_row["seed"], seed_row["table"], seed_row["method"])
        entry = entries.get(key)
        record = {"seed": seed_row["seed"], "table": seed_row["table"], "method": seed_row["method"],
                  "size": _num(seed_row["size"]), "stride": _num(seed_row["stride"]),
                  "filter_size": _num(seed_row["filter_size"]), "block": seed_row["block"],
                  "layer": seed_row.get("layer", ""), "seed_gpu": seed_row["gpu"], "unit": seed_row["unit"],
                  "seed_value": seed_row["value"], "this_gpu": this_gpu, "defect": seed_row["defect"],
                  "defect_note": DEFECT_NOTES.get(seed_row["defect"], seed_row["defect"]),
                  "experiment": "", "kernel": "", "variant": "", "this_value": math.nan,
                  "this_status": "", "this_reason": "", "note": "", "ran_as": ""}
        if entry is None:
            record.update(this_status=UNMAPPED, this_reason=unmapped.get(key, "no entry in method_map.yaml"))
            out.append(record)
            continue
        record.update(experiment=entry["experiment"], kernel=entry["kernel"], note=entry.get("note", ""))
        if seed_row["unit"] == "x":
            value, status, reason = _speedup(summary, entry)
            named = labels.get(entry["experiment"], {})
            record.update(variant="fastest", this_value=value, this_status=status, this_reason=reason,
                          kernel=f"{entry['kernel']} / {entry['baseline']}",
                          ran_as=f"{named.get(entry['kernel'], entry['kernel'])} / "
                                 f"{named.get(entry['baseline'], entry['baseline'])}" if status == OK else "")
        else:
            rows = by_kernel.get((entry["experiment"], entry["kernel"]), no_rows)
            cell = _pick(_problem(rows, entry["experiment"], seed_row), entry.get("match", {}), seed_row)
            if cell is None:
                record.update(this_status=NOT_RUN, this_reason="no cell of this problem in this run's grid")
            else:
                record.update(variant=cell["variant"], this_status=cell["status"], this_reason=cell["reason"],
                              this_value=_this_value(seed_row["unit"], cell),
                              ran_as=ran_label(cell["kernel"], cell.get("implementation", ""),
                                               cell.get("backend", "")))
        if seed_row["defect"] not in NEVER_RAN:
            record["ratio"] = _ratio(seed_row["unit"], record["seed_value"], record["this_value"])
        out.append(record)
    table = pd.DataFrame(out, columns=COLUMNS)
    table["ratio"] = pd.to_numeric(table["ratio"])
    return table


def comparison_from_files(seed_csv: str | Path, map_yaml: str | Path, summary_csv: str | Path,
                          family: str | None = None, device_json: str | Path | None = None) -> pd.DataFrame:
    """The comparison of the seeds with the summary; with ``family``, of the seeds that family reproduces only
    (its slice of the summary is all they read). ``device_json``: the device's copy bandwidth record, whose
    device names this run where the summary has no row."""
    seeds = load_seeds(seed_csv)
    if family is not None:
        if family not in FAMILIES:
            raise UserError(f"no experiment family {family!r}: the families are {', '.join(FAMILIES)}")
        seeds = seeds[seeds["seed"].isin(display(family).seeds)]
    device = ""
    if device_json is not None:
        try:
            device = json.loads(Path(device_json).read_text()).get("device") or ""
        except (OSError, ValueError):
            device = ""
    return compare(seeds, load_map(map_yaml), read_summary(summary_csv), device=device)


def join_comparisons(part_csvs: list[str | Path]) -> str:
    """The families' comparisons (comparison_from_files with a family) as one comparison's CSV text, in the
    seed table's order (each seed is one family's), every value as its part wrote it."""
    parts = [pd.read_csv(path, dtype=str, keep_default_na=False) for path in part_csvs]
    table = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=COLUMNS)
    return table.sort_values("seed", kind="stable").to_csv(index=False)


def read_comparison(path: str | Path) -> pd.DataFrame:
    """The comparison CSV as written by ``compare``, with its numbers as numbers."""
    frame = read_text_csv(path)
    if "ran_as" not in frame.columns:  # written before the column existed
        frame["ran_as"] = ""
    return typed(frame, ("size", "stride", "filter_size", "seed_value", "this_value", "ratio"))
