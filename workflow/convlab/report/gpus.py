"""The report page that compares every device whose results are under results/ with each other
and with the seeds' GPUs: results/gpus.html.

Each device is a folder results/<label>/ with its summary.csv (see convlab.plan.devicelabel). Pairs
are compared cell by cell with convlab.history.compare's verdicts; the seeds' GPUs through each label's
seed comparison (results/<label>/seeds/comparison.csv), where that label's report was built.
"""

from __future__ import annotations

import html
import itertools
import json
from pathlib import Path

import pandas as pd

from convlab.atomicfile import write_text_atomically
from convlab.history.compare import CompareError, compare_sets, kernel_lines
from convlab.history.summary import read_summary
from convlab.history.verdictpolicy import DRIFT_FLOOR
from convlab.history.verdictrule import geomean

VERDICTS = ("FASTER", "SLOWER", "SAME", "UNCLEAR")


def device_summaries(results: str | Path) -> dict[str, Path]:
    """label -> its summary.csv, for every device folder under ``results``."""
    return {path.parent.name: path for path in sorted(Path(results).glob("*/summary.csv"))}


def _values(frame: pd.DataFrame, column: str) -> str:
    if column not in frame:
        return ""
    return ", ".join(sorted({str(v) for v in frame[column].dropna() if str(v)}))


def _bandwidth(folder: Path) -> str:
    records = sorted(folder.glob("device/*_copy_bandwidth.json"))
    if not records:
        return ""
    record = json.loads(records[0].read_text())
    return f"{float(record['copy_gbps']):.0f} GB/s"


def device_table(summaries: dict[str, Path]) -> pd.DataFrame:
    """One line per device folder: what ran there and how it went."""
    lines = []
    for label, path in summaries.items():
        frame = read_summary(path)
        throttled = int((frame["throttled"].astype(str) == "yes").sum()) if "throttled" in frame else 0
        lines.append({"label": label, "device": _values(frame, "device"), "backend": _values(frame, "backend"),
                      "cells": len(frame), "ok": int((frame["status"] == "ok").sum()),
                      "throttled cells": throttled, "copy bandwidth": _bandwidth(path.parent),
                      "commit": _values(frame, "git_commit"), "code version": _values(frame, "code_version")})
    return pd.DataFrame(lines)


def pair_table(summaries: dict[str, Path]) -> tuple[pd.DataFrame, dict[tuple[str, str], list[str]]]:
    """Every pair of devices: the geometric mean of B/A over the cells both ran, and the verdicts;
    and per pair, the per-kernel lines."""
    frames = {label: read_summary(path) for label, path in summaries.items()}
    lines, per_kernel = [], {}
    for a, b in itertools.combinations(frames, 2):
        try:
            table = compare_sets(frames[a], frames[b], DRIFT_FLOOR)
        except CompareError:  # e.g. a cpu grid beside a GPU grid with no size in common
            lines.append({"A": a, "B": b, "cells compared": 0})
            continue
        timed = table[table["verdict"].isin(VERDICTS)]
        counts = timed["verdict"].value_counts()
        lines.append({"A": a, "B": b, "cells compared": len(timed),
                      "geomean B/A": geomean(timed["ratio"]) if len(timed) else float("nan"),
                      **{verdict: int(counts.get(verdict, 0)) for verdict in VERDICTS}})
        per_kernel[(a, b)] = kernel_lines(table)
    return pd.DataFrame(lines), per_kernel


SPEED_RATIO = "median speed ratio (seed time / this time; > 1: faster here)"


def seed_table(summaries: dict[str, Path]) -> pd.DataFrame:
    """Per device and seed table: the seeds' GPU, how many numbers were compared, and the median
    of their ratios, each this device's speed over the seed GPU's (the seed's time / this time; this
    GFLOPS / the seed's): > 1 is faster here."""
    lines = []
    for label, path in summaries.items():
        comparison = path.parent / "seeds" / "comparison.csv"
        if not comparison.is_file():
            continue
        frame = pd.read_csv(comparison, dtype={"seed": str})
        frame = frame[pd.to_numeric(frame["ratio"], errors="coerce").notna()]
        for (seed, gpu, unit), group in frame.groupby(["seed", "seed_gpu", "unit"]):
            lines.append({"label": label, "seed": seed, "seed GPU": gpu, "unit": unit, "numbers": len(group),
                          SPEED_RATIO: float(pd.to_numeric(group["ratio"]).median())})
    return pd.DataFrame(lines)


def _html_table(frame: pd.DataFrame) -> str:
    if frame.empty:
        return "<p>None.</p>"
    return frame.to_html(index=False, escape=True, border=0, na_rep="", float_format=lambda v: f"{v:.3g}")


def gpus_html(results: str | Path) -> str:
    summaries = device_summaries(results)
    devices = device_table(summaries)
    pairs, per_kernel = pair_table(summaries)
    seeds = seed_table(summaries)
    parts = ["<h2>Devices under results/</h2>",
             f"<p>{len(summaries)} device folder(s). Each pair is compared on the cells both ran: the ratio is "
             "B's median kernel time over A's (below 1: B is faster), with a verdict per cell from the "
             "recorded spread (python -m convlab compare A B gives the cell by cell table).</p>",
             _html_table(devices), "<h3>Pairs</h3>"]
    if len(summaries) < 2:
        parts.append("<p>Only one device has results here: run another GPU (or the cpu backend) into this "
                     "checkout's results/ to compare.</p>")
    else:
        parts.append(_html_table(pairs))
        for (a, b), lines in per_kernel.items():
            parts.append(f"<h4>{html.escape(b)} / {html.escape(a)}, per kernel</h4><ul>"
                         + "".join(f"<li>{html.escape(line)}</li>" for line in lines) + "</ul>")
    parts.append("<h3>Against the seeds' GPUs</h3>")
    parts.append(_html_table(seeds) if not seeds.empty else
                 "<p>No device here has a seed comparison yet (it is made with each device's report).</p>")
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Devices compared</title>\n<style>"
            "body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;margin:1em 0}"
            "td,th{padding:.25em .6em;border-bottom:1px solid #ddd;text-align:left}</style></head><body>\n"
            + "\n".join(parts) + "\n</body></html>\n")


def write_gpus_page(results: str | Path, out: str | Path) -> Path:
    write_text_atomically(out, gpus_html(results))
    return Path(out)
