"""Why a kernel is fast or slow, from its hardware counters (results/<device>/counters.csv): each
cell's measured traffic against the fewest bytes its problem needs, the share of the measured copy
bandwidth and SGEMM ceiling it reaches, its top warp stall; one finding per kernel and size that
names the bottleneck, and a roofline at the measured arithmetic intensity beside the analytic one.

The time is the cell's own timed median (kernel_ms, at the clocks it ran at); the bytes are the
profiler's DRAM traffic (dram_traffic_bytes: every byte read, every byte written), from a replayed
launch.
"""

from __future__ import annotations

import html
import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from convlab.atomicfile import write_text_atomically
from convlab.history.summary import read_summary
from convlab.measure.ncureport import speaking_cells
from convlab.plan.families import FAMILIES, problem_key
from convlab.report.familydisplay import DISPLAYS
from convlab.report.kernelcolors import group_color, kernel_group
from convlab.report.logaxes import log_axis
from convlab.report.pages import html_page
from convlab.report.plotting import new_figure, note_figure_object, save_figure
from convlab.report.roofline import load_device

# A kernel that reaches this share of the measured copy bandwidth is memory-bound; one that moves
# at most AT_LIMIT_BYTES x the fewest bytes is then at the limit. One at COMPUTE_SHARE of the SGEMM
# ceiling is compute-bound. Below both it is bound by neither: by latency, its top stall says which.
MEMORY_SHARE = 0.6
AT_LIMIT_BYTES = 1.25
COMPUTE_SHARE = 0.6
STALL_WORDS = {"long_scoreboard": "global memory (long scoreboard)",
               "short_scoreboard": "shared memory or special math (short scoreboard)",
               "mio_throttle": "the memory instruction queue (MIO throttle)",
               "lg_throttle": "the global load/store queue (LG throttle)",
               "math_pipe_throttle": "a busy math pipe", "barrier": "__syncthreads barriers",
               "wait": "fixed-latency dependencies (wait)", "not_selected": "the scheduler: warps ready, one issued at a time (not selected)",
               "no_instruction": "instruction fetch", "branch_resolving": "branches", "dispatch_stall": "dispatch",
               "drain": "draining memory writes at exit", "membar": "memory barriers", "tex_throttle": "the texture unit",
               "imc_miss": "the constant cache", "sleeping": "sleeping warps"}


def load_counters(summary_csv: str | Path, counters_csv: str | Path) -> pd.DataFrame:
    """The summary's ok rows with their counters (joined by the row's check), and the derived
    traffic columns: measured bytes, their ratio to the fewest bytes, the achieved bandwidth."""
    summary = read_summary(summary_csv)
    counters = pd.read_csv(counters_csv, dtype={"row_check": str, "counters_reason": str}, keep_default_na=False)
    keep = ["row_check", *(c for c in counters.columns if c not in summary.columns)]
    table = summary[summary["status"] == "ok"].merge(counters[keep], on="row_check", how="left")
    numeric = ["dram_read_bytes", "dram_write_bytes", "l2_write_bytes", "dram_traffic_bytes", "l2_hit_pct",
               "achieved_occupancy_pct", "sm_throughput_pct", "dram_throughput_pct", "fma_pipe_pct",
               "smem_bank_conflicts", "top_stall_ratio"]
    for column in numeric:
        table[column] = pd.to_numeric(table.get(column, np.nan), errors="coerce")
    table["measured_bytes"] = table["dram_traffic_bytes"]
    table["bytes_ratio"] = table["measured_bytes"] / pd.to_numeric(table["bytes"], errors="coerce")
    seconds = pd.to_numeric(table["kernel_ms"], errors="coerce") / 1e3
    table["measured_gbps"] = table["measured_bytes"] / seconds / 1e9
    table["measured_intensity"] = pd.to_numeric(table["flops"], errors="coerce") / table["measured_bytes"]
    table["analytic_intensity"] = (pd.to_numeric(table["flops"], errors="coerce")
                                   / pd.to_numeric(table["bytes"], errors="coerce"))
    return table


def finding(row: pd.Series, copy_gbps: float, sgemm_gflops: float) -> str:
    """One cell's finding: its traffic, the share of each roof it reaches, and its bottleneck."""
    where = f"{row['kernel']} ({row['variant']}) at {_place(row)}"
    memory = row["measured_gbps"] / copy_gbps if copy_gbps else math.nan
    compute = float(row["gflops"]) / sgemm_gflops if sgemm_gflops else math.nan
    text = (f"{where} moves {row['bytes_ratio']:.2f} × the fewest bytes at {memory:.0%} of copy bandwidth "
            f"and {compute:.0%} of the SGEMM ceiling")
    if memory >= MEMORY_SHARE:
        bound = ("memory-bound, at the limit" if row["bytes_ratio"] <= AT_LIMIT_BYTES
                 else f"memory-bound, on {row['bytes_ratio']:.1f} × the traffic it needs: fewer bytes would be faster")
    elif compute >= COMPUTE_SHARE:
        bound = "compute-bound"
    else:
        bound = "bound by neither roof: latency"
    stall = STALL_WORDS.get(str(row.get("top_stall")), "")
    if stall:
        bound += f"; its warps wait most on {stall}"
    if math.isfinite(row["smem_bank_conflicts"]) and row["smem_bank_conflicts"] > 0:
        bound += f"; {row['smem_bank_conflicts']:.3g} shared-memory bank conflicts, FMA pipe {row['fma_pipe_pct']:.0f} % busy"
    return f"{text}: {bound}."


def _place(row: pd.Series) -> str:
    """Where in its family's grid a cell is: a convolution's image size and stride, a GEMM's size."""
    family, display = FAMILIES.get(row["experiment"]), DISPLAYS.get(row["experiment"])
    if family is not None and "stride" not in family.problem_columns and "filter_size" in family.problem_columns:
        return f"{int(row['size'])}², {int(row['filter_size'])}×{int(row['filter_size'])} filter"
    if display is None or display.convolves:
        return f"{int(row['size'])}², stride {int(row['stride'])}"
    return f"{int(row['size'])}³"


def findings_lines(table: pd.DataFrame, copy_gbps: float, sgemm_gflops: float) -> list[str]:
    """One finding per experiment, kernel and size: its fastest measured variant at its smallest stride."""
    timed = table[table["measured_bytes"].notna() & (table["measured_bytes"] > 0)]
    chosen = timed.iloc[speaking_cells(timed.to_dict("records"), problem_key)] if not timed.empty else timed
    return [finding(row, copy_gbps, sgemm_gflops) for _, row in chosen.iterrows()]


def seed_traffic_lines(table: pd.DataFrame, copy_gbps: float, sgemm_gflops: float) -> list[tuple[str, list[str]]]:
    """For each family whose seed argues about traffic: the argument, and each kernel's finding at
    the family's largest size and filter (its fastest variant)."""
    out = []
    arguments = {name: entry.traffic_argument for name, entry in DISPLAYS.items() if entry.traffic_argument}
    for experiment, argument in arguments.items():
        timed = table[(table["experiment"] == experiment) & table["measured_bytes"].notna()
                      & (table["measured_bytes"] > 0)]
        if timed.empty:
            continue
        chosen = timed.iloc[speaking_cells(timed.to_dict("records"), problem_key)]
        largest = chosen[pd.to_numeric(chosen["size"]) == pd.to_numeric(chosen["size"]).max()]
        filters = pd.to_numeric(largest["filter_size"])
        largest = largest[filters == filters.max()]
        out.append((argument, [finding(row, copy_gbps, sgemm_gflops) for _, row in largest.iterrows()]))
    return out


def measured_roofline(table: pd.DataFrame, copy_gbps: float, sgemm_gflops: float, device: str) -> Figure:
    """Each cell with counters at its measured arithmetic intensity (filled) and its analytic one
    (hollow), joined, under the measured copy bandwidth and SGEMM ceiling."""
    points = table[table["measured_intensity"].notna() & (table["measured_intensity"] > 0)]
    if points.empty:
        return note_figure_object(f"{device}: measured roofline", "no cell has hardware counters (counters.csv says why)")
    figure, axes = new_figure(1, 1, width=7.5, height=5.0, legend_width=2.6)
    ax = axes[0][0]
    groups = sorted({kernel_group(k) for k in points["kernel"]})
    colors = {group: group_color(part["kernel"]) for group, part in points.groupby(points["kernel"].map(kernel_group))}
    # one collection per group and kind of mark: an artist per point costs the layout and the draw each
    # (the default conv2d grid has over a thousand cells with counters)
    for group, rows in points.groupby(points["kernel"].map(kernel_group)):
        color = colors[group]
        analytic, measured = rows["analytic_intensity"].to_numpy(float), rows["measured_intensity"].to_numpy(float)
        y = rows["gflops"].to_numpy(float)
        ax.add_collection(LineCollection([[(a, g), (m, g)] for a, m, g in zip(analytic, measured, y)], colors=[color],
                                         linewidths=0.6, alpha=0.5))
        ax.scatter(analytic, y, s=14, facecolors="none", edgecolors=[color], lw=0.7)
        ax.scatter(measured, y, s=14, color=[color])
    # past the ridge point too, so that the flat SGEMM roof shows
    ridge = sgemm_gflops / copy_gbps if copy_gbps and sgemm_gflops else 0.0
    xs = np.logspace(np.log10(min(points["measured_intensity"].min(), points["analytic_intensity"].min()) / 2),
                     np.log10(max(points["measured_intensity"].max(), points["analytic_intensity"].max(), ridge) * 2),
                     200)
    if copy_gbps and sgemm_gflops:
        ax.plot(xs, np.minimum(xs * copy_gbps, sgemm_gflops), color="black", lw=1.2)
    log_axis(ax, "x")
    log_axis(ax, "y")
    ax.set_xlabel("arithmetic intensity (FLOP / byte): filled measured DRAM bytes, hollow the fewest bytes")
    ax.set_ylabel("GFLOP/s (timed)")
    ax.set_title(f"{device}: measured roofline ({len(points)} cells with counters)")
    handles = [Line2D([], [], marker="o", ls="", color=colors[g], label=g) for g in groups]
    figure.legend(handles=handles, loc="center right", frameon=False, fontsize=8)
    return figure


def counters_page(table: pd.DataFrame, lines: list[str], device: str,
                  seeds: list[tuple[str, list[str]]] | None = None) -> str:
    reasons = table["counters_reason"].fillna("").astype(str) if "counters_reason" in table else pd.Series(dtype=str)
    missing = reasons[reasons != ""].value_counts()
    head = ("kernel", "variant", "size", "stride", "ms", "measured MB", "× fewest bytes", "GB/s", "L2 hit %",
            "occupancy %", "SM %", "DRAM %", "top stall", "reason")
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in (
            r["kernel"], r["variant"], r["size"], r["stride"], f"{float(r['kernel_ms']):.4g}",
            _fmt(r["measured_bytes"] / 1e6), _fmt(r["bytes_ratio"]), _fmt(r["measured_gbps"]), _fmt(r["l2_hit_pct"]),
            _fmt(r["achieved_occupancy_pct"]), _fmt(r["sm_throughput_pct"]), _fmt(r["dram_throughput_pct"]),
            r.get("top_stall") or "", r.get("counters_reason") or "")) + "</tr>"
        for _, r in table.sort_values(["experiment", "kernel", "size", "stride"]).iterrows())
    body = (f"<h1>{html.escape(device)}: why each kernel is as fast as it is</h1>"
            + "<h2>Findings</h2><ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in lines) + "</ul>"
            + "".join("<h2>Where a seed argues about traffic</h2>" + f"<p>{html.escape(argument)}</p><ul>"
                      + "".join(f"<li>{html.escape(line)}</li>" for line in found) + "</ul>"
                      for argument, found in seeds or [])
            + "".join(f"<p>{n} cells have no counters: {html.escape(why)}</p>" for why, n in missing.items())
            + "<h2>Every ok cell</h2><table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>" + rows
            + "</table>")
    return html_page(f"{device}: hardware counters", "body{font-family:sans-serif;margin:1.5em}table{border-collapse:"
                     "collapse}td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px}th{background:#f0f0f0}", body)


def _fmt(value: object) -> str:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""
    return "" if not math.isfinite(number) else f"{number:.3g}"


def render_counters(summary_csv: str | Path, counters_csv: str | Path, bandwidth_json: str | Path,
                    ceiling_json: str | Path, figure_out: str | Path, page_out: str | Path,
                    ) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """The measured roofline and the counters page; the findings, and where a seed argues about
    traffic its argument and findings, as printed."""
    table = load_counters(summary_csv, counters_csv)
    copy_gbps = float(load_device(bandwidth_json).get("copy_gbps") or 0)
    sgemm_gflops = float(load_device(ceiling_json).get("sgemm_gflops") or 0)
    device = Path(summary_csv).parent.name
    lines = findings_lines(table, copy_gbps, sgemm_gflops)
    save_figure(measured_roofline(table, copy_gbps, sgemm_gflops, device), Path(figure_out))
    seeds = seed_traffic_lines(table, copy_gbps, sgemm_gflops)
    write_text_atomically(page_out, counters_page(table, lines, device, seeds))
    return lines, seeds
