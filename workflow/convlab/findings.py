"""Findings computed from the summary and the seed comparison, never written by hand: the fastest kernel of
each problem and its speed-up over cuDNN (or cuBLAS), which cells failed and why, and how this device
compares with the seeds' GPUs. Written as one HTML page for the Snakemake report."""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from convlab.aggregate import mixed_code_note
from convlab.atomicfile import write_text_atomically
from convlab.roofline import load_device
from convlab.seedcompare import NEVER_RAN, load_summary, read_comparison
from convlab.status import OK

# Per experiment: the problem columns, and the library kernels the fastest kernel is compared with
# (strict-fp32 first; the first one with a time is used).
PROBLEMS = {
    "conv2d": (["filter_size", "size", "stride"], ["cudnn", "cudnn_nchw", "cudnn_tf32", "cudnn_tf32_nchw"]),
    "tiling": (["filter_size", "size"], []),
    "winograd_layers": (["C_in", "H", "W", "C_out", "batch"], ["cudnn_nchw", "cudnn_tf32_nchw"]),
    "gemm": (["size"], ["cublas"]),
}
TITLES = {"conv2d": "2-D convolution (seeds 000, 001)", "tiling": "tiling strategies (seed 002)",
          "winograd_layers": "CNN layers (seed 004)", "gemm": "GEMM (seed 003)"}


def fastest(summary: pd.DataFrame, experiment: str) -> pd.DataFrame:
    """Per problem: the fastest ok kernel (its best variant), the runner-up, and the speed-up over the library."""
    keys, libraries = PROBLEMS[experiment]
    rows = summary[(summary["experiment"] == experiment) & (summary["status"] == OK) & summary["kernel_ms"].notna()]
    if experiment == "gemm":
        rows = rows.assign(size=rows["gemm_m"].where(rows["gemm_m"].notna(), rows["size"]))
    out = []
    for problem, part in rows.groupby(keys, sort=True):
        best = part.sort_values("kernel_ms").drop_duplicates("kernel")
        first = best.iloc[0]
        record = dict(zip(keys, problem if isinstance(problem, tuple) else (problem,)))
        record.update(fastest=first["kernel"], variant=first["variant"], fastest_ms=first["kernel_ms"],
                      runner_up=best.iloc[1]["kernel"] if len(best) > 1 else "",
                      runner_up_ms=best.iloc[1]["kernel_ms"] if len(best) > 1 else float("nan"),
                      library="", library_ms=float("nan"))
        for library in libraries:
            hit = best[best["kernel"] == library]
            if not hit.empty:
                record.update(library=library, library_ms=hit.iloc[0]["kernel_ms"])
                break
        record["speedup_over_library"] = record["library_ms"] / record["fastest_ms"]
        out.append(record)
    return pd.DataFrame(out)


def failures(summary: pd.DataFrame) -> pd.DataFrame:
    failed = summary[summary["status"] != OK]
    if failed.empty:
        return pd.DataFrame(columns=["experiment", "kernel", "variant", "status", "reason", "cells"])
    return (failed.groupby(["experiment", "kernel", "variant", "status", "reason"]).size().rename("cells")
            .reset_index().sort_values(["experiment", "kernel", "variant"]))


def gpu_comparison(comparison: pd.DataFrame) -> pd.DataFrame:
    """Per seed: the median, min and max of this run's speed ratio over the seed's numbers without a defect."""
    usable = comparison[(comparison["defect"] == "") & comparison["ratio"].notna()]
    out = []
    for seed, part in comparison.groupby("seed"):
        ratios = usable[usable["seed"] == seed]["ratio"]
        out.append({"seed": seed, "seed_gpu": ", ".join(sorted(set(part["seed_gpu"].replace("unnamed", "GPU not named")))),
                    "this_gpu": next((g for g in part["this_gpu"] if g), ""), "numbers": len(part),
                    "compared": len(ratios), "defects": int((part["defect"] != "").sum()),
                    "median_ratio": ratios.median(), "min_ratio": ratios.min(), "max_ratio": ratios.max()})
    return pd.DataFrame(out)


def _num(value: float, digits: int = 3) -> str:
    if value != value:
        return ""
    return f"{value:,.0f}" if abs(value) >= 10 ** digits else f"{value:.{digits}g}"


def _problem_text(row: pd.Series, keys: list[str]) -> str:
    if keys == ["filter_size", "size", "stride"]:
        return f"{row['size']:g}² stride {row['stride']:g} ({row['filter_size']:g}x{row['filter_size']:g})"
    if keys == ["filter_size", "size"]:
        return f"{row['size']:g}² with a {row['filter_size']:g}x{row['filter_size']:g} filter"
    if keys == ["size"]:
        return f"M = N = K = {row['size']:g}"
    return f"layer C={row['C_in']:g} {row['H']:g}x{row['W']:g} K={row['C_out']:g}, batch {row['batch']:g}"


def _sentences(table: pd.DataFrame, experiment: str) -> list[str]:
    keys = PROBLEMS[experiment][0]
    lines = []
    wins = table["fastest"].value_counts()
    lines.append(f"<b>{html.escape(wins.index[0])}</b> is the fastest kernel in {wins.iloc[0]} of {len(table)} "
                 f"problems" + (f"; also fastest: {', '.join(f'{k} ({n})' for k, n in wins.iloc[1:].items())}."
                                if len(wins) > 1 else "."))
    largest = table.iloc[-1] if experiment != "conv2d" else table.sort_values(["size", "stride"], ascending=[False, True]
                                                                              ).iloc[0]
    text = (f"At {_problem_text(largest, keys)} the fastest is <b>{html.escape(largest['fastest'])}</b> "
            f"({html.escape(largest['variant'])}) at {_num(largest['fastest_ms'], 4)} ms")
    if largest["library"]:
        text += (f", {_num(largest['speedup_over_library'])}x the speed of {html.escape(largest['library'])} "
                 f"({_num(largest['library_ms'], 4)} ms)")
    lines.append(text + ".")
    speedups = table["speedup_over_library"].dropna()
    if not speedups.empty:
        library = table["library"].replace("", pd.NA).dropna().mode().iloc[0]
        lines.append(f"Speed-up of the fastest kernel over {html.escape(library)}: median {_num(speedups.median())}x, "
                     f"from {_num(speedups.min())}x to {_num(speedups.max())}x over {len(speedups)} problems.")
    return lines


def _table_html(frame: pd.DataFrame) -> str:
    shown = frame.copy()
    for column in shown.columns:
        if shown[column].dtype.kind == "f":
            shown[column] = shown[column].map(lambda v: _num(v, 4))
    return shown.to_html(index=False, escape=True, border=0, na_rep="")


def findings_html(summary: pd.DataFrame, comparison: pd.DataFrame, bandwidth: dict, ceiling: dict) -> str:
    devices = sorted(set(summary["device"]) - {""}) if "device" in summary.columns else []
    parts = [f"<h2>Findings: {html.escape(', '.join(devices) or 'no device')}</h2>",
             f"<p>{len(summary)} cells; {int((summary['status'] == OK).sum())} ok. Measured device-to-device copy "
             f"bandwidth: {_num(bandwidth.get('copy_gbps', float('nan')), 4)} GB/s; FP32 SGEMM ceiling: "
             f"{_num(ceiling.get('sgemm_gflops', float('nan')), 4)} GFLOP/s"
             f"{' (' + html.escape(str(ceiling.get('math'))) + ')' if ceiling.get('math') else ''}. "
             "Every sentence below is computed from results/summary.csv and the seed comparison.</p>"]
    mixed = mixed_code_note(summary)
    if mixed:
        parts.append(f"<p><strong>Warning:</strong> {html.escape(mixed)}. Run snakemake without "
                     "--rerun-triggers to measure every cell with the current code.</p>")
    for experiment, title in TITLES.items():
        table = fastest(summary, experiment)
        parts.append(f"<h3>Fastest kernel: {html.escape(title)}</h3>")
        if table.empty:
            parts.append("<p>Not run in this configuration (no ok cell).</p>")
            continue
        parts.append("<ul>" + "".join(f"<li>{s}</li>" for s in _sentences(table, experiment)) + "</ul>")
        parts.append(_table_html(table))
    failed = failures(summary)
    parts.append("<h3>Cells that failed, and why</h3>")
    if failed.empty:
        parts.append(f"<p>None: all {len(summary)} cells passed verification.</p>")
    else:
        by_status = failed.groupby("status")["cells"].sum()
        parts.append("<p>" + ", ".join(f"{n} {html.escape(s)}" for s, n in by_status.items())
                     + f" of {len(summary)} cells.</p>")
        parts.append(_table_html(failed))
    parts.append("<h3>This device against the seeds' GPUs</h3>")
    gpus = gpu_comparison(comparison)
    items = []
    for row in gpus.itertuples():
        if row.compared:
            items.append(f"Seed {row.seed} ({html.escape(row.seed_gpu)}): {html.escape(row.this_gpu)} ran at "
                         f"{_num(row.median_ratio)}x the seed's speed (median of {row.compared} numbers, "
                         f"{_num(row.min_ratio)}x to {_num(row.max_ratio)}x); {row.defects} seed numbers with a "
                         "known defect left out.")
        else:
            items.append(f"Seed {row.seed} ({html.escape(row.seed_gpu)}): nothing comparable in this run "
                         f"({row.numbers} seed numbers).")
    parts.append("<ul>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>")
    never = comparison[comparison["defect"].isin(NEVER_RAN)]
    if not never.empty:
        statuses = never["this_status"].value_counts()
        parts.append(f"<p>{len(never)} seed numbers come from launches that never ran; this run recorded them as "
                     + ", ".join(f"{html.escape(s)} ({n})" for s, n in statuses.items()) + ".</p>")
    parts.append(_table_html(gpus))
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Findings</title>\n<style>"
            "body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;margin-bottom:1em}"
            "th,td{border:1px solid #ccc;padding:3px 6px;text-align:left}th{background:#f0f0f0}"
            "</style></head>\n<body>\n" + "\n".join(parts) + "\n</body></html>\n")


def write_findings(summary_csv: str | Path, comparison_csv: str | Path, bandwidth_json: str | Path,
                   ceiling_json: str | Path, out_html: str | Path) -> Path:
    summary = load_summary(summary_csv)
    comparison = read_comparison(comparison_csv)
    out_html = Path(out_html)
    out_html.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(out_html, findings_html(summary, comparison, load_device(bandwidth_json),
                                                  load_device(ceiling_json)))
    return out_html

