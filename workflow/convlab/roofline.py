"""Roofline of the GPU (or CPU) that ran: every ok cell's achieved GFLOP/s and GB/s against its arithmetic
intensity (flops / bytes), under the measured copy bandwidth and the measured FP32 SGEMM ceiling."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter

from convlab.figures import note_figure, plain_tick, save_figure
from convlab.seedcompare import load_summary
from convlab.seedfigures import seed_figure
from convlab.status import OK

MARKERS = {"conv2d": "o", "tiling": "s", "winograd_layers": "^", "gemm": "D"}
# Kernel name prefix -> family shown in the legend (first match wins); anything else is its own family.
FAMILIES = [("im2col_gemm", "im2col + own GEMM"), ("im2col_cublas", "im2col + cuBLAS"), ("cudnn", "cuDNN"),
            ("winograd", "Winograd"), ("tiled", "tiled (shared memory)"), ("direct", "direct"),
            ("conv_naive", "direct"), ("sgemm", "own SGEMM"), ("cublas", "cuBLAS"), ("fft", "FFT"),
            ("ndimage", "ndimage"), ("conv_floor", "copy floor kernel")]


def family(kernel: str) -> str:
    for prefix, name in FAMILIES:
        if kernel.startswith(prefix):
            return name
    return kernel


def load_device(path: str | Path) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}


def roofline_points(summary: pd.DataFrame) -> pd.DataFrame:
    rows = summary[(summary["status"] == OK) & (summary["flops"] > 0) & (summary["bytes"] > 0)
                   & (summary["kernel_ms"] > 0)].copy()
    rows["intensity"] = rows["flops"] / rows["bytes"]
    rows["achieved_gflops"] = rows["flops"] / rows["kernel_ms"] / 1e6
    rows["achieved_gbps"] = rows["bytes"] / rows["kernel_ms"] / 1e6
    rows["family"] = rows["kernel"].map(family)
    return rows


def render_roofline(summary_csv: str | Path, bandwidth_json: str | Path, ceiling_json: str | Path,
                    out_png: str | Path) -> Path:
    summary = load_summary(summary_csv)
    points = roofline_points(summary)
    bandwidth, ceiling = load_device(bandwidth_json), load_device(ceiling_json)
    device = ceiling.get("device") or bandwidth.get("device") or next(iter(summary.get("device", [])), "?")
    title = f"Roofline of {device} (backend {bandwidth.get('backend') or ceiling.get('backend') or '?'})"
    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    if points.empty:
        return note_figure(out_png, title, "no ok cell with flops and bytes in this run")
    copy_gbps = float(bandwidth.get("copy_gbps") or np.nan)
    peak = float(ceiling.get("sgemm_gflops") or np.nan)
    families = sorted(points["family"].unique())
    palette = dict(zip(families, sns.color_palette("tab10" if len(families) <= 10 else "husl", len(families))))
    with sns.axes_style("whitegrid"), sns.plotting_context("notebook"):
        figure, axes = seed_figure(1, 2, width=5.8, height=4.8, legend_width=3.4, share=False)
        low, high = points["intensity"].min() / 2, points["intensity"].max() * 2
        if copy_gbps == copy_gbps and peak == peak:
            low, high = min(low, peak / copy_gbps / 4), max(high, peak / copy_gbps * 4)
        grid = np.geomspace(low, high, 200)
        for ax, y, ylabel in ((axes[0][0], "achieved_gflops", "achieved throughput (GFLOP/s)"),
                              (axes[0][1], "achieved_gbps", "achieved bandwidth (GB/s, bytes / kernel time)")):
            for (experiment, name), part in points.groupby(["experiment", "family"]):
                ax.scatter(part["intensity"], part[y], s=22, alpha=0.75, color=palette[name],
                           marker=MARKERS.get(experiment, "o"), edgecolor="none")
            if y == "achieved_gflops":
                if copy_gbps == copy_gbps:
                    roof = np.minimum(grid * copy_gbps, peak) if peak == peak else grid * copy_gbps
                    ax.plot(grid, roof, color="black", linewidth=2)
                if peak == peak:
                    ax.axhline(peak, color="black", linestyle=":", linewidth=1)
            elif copy_gbps == copy_gbps:
                ax.axhline(copy_gbps, color="black", linewidth=2)
            ax.set_xscale("log")
            ax.set_yscale("log")
            roof = peak if y == "achieved_gflops" else copy_gbps
            top = np.nanmax([points[y].max(), roof if roof == roof else np.nan])
            ax.set_ylim(points[y].min() / 2, top * 2.5)
            ax.set_xlim(low, high)
            ax.xaxis.set_major_formatter(FuncFormatter(plain_tick))
            ax.yaxis.set_major_formatter(FuncFormatter(plain_tick))
            ax.set_xlabel("arithmetic intensity (FLOP / byte moved)")
            ax.set_ylabel(ylabel)
        axes[0][0].set_title("compute: min(intensity x copy GB/s, SGEMM ceiling)", fontsize=10)
        axes[0][1].set_title("memory: measured copy bandwidth as the roof", fontsize=10)
        handles = [Line2D([], [], color=palette[n], marker="o", linestyle="none", label=n) for n in families]
        handles += [Line2D([], [], color="black", markerfacecolor="white", marker=MARKERS.get(e, "o"), linestyle="none",
                           label=f"{e} cells")
                    for e in sorted(points["experiment"].unique())]
        if copy_gbps == copy_gbps:
            handles.append(Line2D([], [], color="black", linewidth=2,
                                  label=f"copy bandwidth {copy_gbps:,.0f} GB/s (measured)"))
        if peak == peak:
            handles.append(Line2D([], [], color="black", linestyle=":",
                                  label=f"FP32 SGEMM {peak:,.0f} GFLOP/s (measured,\n{ceiling.get('math', '')})"))
        figure.legend(handles=handles, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False, fontsize=9)
        figure.suptitle(f"{title}: {len(points)} ok cells")
        return save_figure(figure, out_png)
