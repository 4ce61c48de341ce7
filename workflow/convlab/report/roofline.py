"""Roofline of the GPU (or CPU) that ran: every ok cell's achieved GFLOP/s and GB/s against its arithmetic
intensity (flops / bytes), under the measured copy bandwidth and the measured FP32 SGEMM ceiling.

Both roofs are measurements, not peaks: a point above one is ringed and the figure says why."""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter

from convlab.history.summary import read_summary
from convlab.report.codelabels import TWIN_BACKENDS, code_identity, code_labels
from convlab.report.familydisplay import DISPLAYS
from convlab.report.kernelcolors import group_color, kernel_group
from convlab.report.logaxes import plain_tick
from convlab.report.plotting import (
    new_figure,
    note_figure_object,
    report_style,
    save_figure,
)
from convlab.report.precision import row_precisions
from convlab.status import OK

ABOVE_COLOR = "#b2182b"
RING_SIZE = 90  # points squared: the ring around a point above a roof
RING_GID, COUNT_GID = "above-roof-ring", "above-roof-count"  # its artists, for the tests to read back
def _marker(experiment: str) -> str:
    return DISPLAYS[experiment].marker if experiment in DISPLAYS else "o"


def load_device(path: str | Path) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}


def roofline_points(summary: pd.DataFrame) -> pd.DataFrame:
    """Every ok cell with flops and bytes: its intensity, achieved GFLOP/s and GB/s, and the kernel group shown in
    the legend. On a twin backend the group is the twin that ran (every kernel that ran it named), never the GPU
    library the kernel is named after."""
    rows = summary[(summary["status"] == OK) & (summary["flops"] > 0) & (summary["bytes"] > 0)
                   & (summary["kernel_ms"] > 0)].copy()
    rows["intensity"] = rows["flops"] / rows["bytes"]
    rows["achieved_gflops"] = rows["flops"] / rows["kernel_ms"] / 1e6
    rows["achieved_gbps"] = rows["bytes"] / rows["kernel_ms"] / 1e6
    rows["group"] = rows["kernel"].map(kernel_group)
    codes = code_identity(rows)
    twin = codes.str.startswith("impl:")
    if twin.any():
        rows.loc[twin, "group"] = codes[twin].map(code_labels(rows[twin]))
    return rows


def _finite(value: object) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number if math.isfinite(number) and number > 0 else math.nan


def above_roofs(points: pd.DataFrame, bandwidth: dict, ceiling: dict) -> tuple[pd.Series, pd.Series]:
    """Masks of the points above the measured FP32 ceiling and above the measured copy bandwidth (the slope of
    the compute roof is the same bandwidth: GFLOP/s > intensity x GB/s exactly when GB/s > copy GB/s)."""
    peak, copy = _finite(ceiling.get("sgemm_gflops")), _finite(bandwidth.get("copy_gbps"))
    over_peak = points["achieved_gflops"] > peak if peak == peak else pd.Series(False, index=points.index)
    over_copy = points["achieved_gbps"] > copy if copy == copy else pd.Series(False, index=points.index)
    return over_peak, over_copy


def roof_notes(points: pd.DataFrame, bandwidth: dict, ceiling: dict) -> list[str]:
    """Why points lie above a roof drawn from a measurement, one sentence per roof; empty when none does.
    The figure and the findings page print these same sentences."""
    over_peak, over_copy = above_roofs(points, bandwidth, ceiling)
    notes = []
    if over_peak.any():
        above = points[over_peak]
        peak = _finite(ceiling.get("sgemm_gflops"))
        text = (f"{len(above)} of {len(points)} cells ran above the measured FP32 SGEMM ceiling ({peak:,.3g} GFLOP/s; "
                f"highest {above['achieved_gflops'].max():,.3g} GFLOP/s).")
        size = ceiling.get("size")
        measured = f"one timing of {ceiling.get('math') or 'SGEMM'}" + (f" at {size}x{size}" if size else "")
        backends = set(above["backend"]) if "backend" in above.columns else set()
        if (ceiling.get("backend") or "") in TWIN_BACKENDS or backends & set(TWIN_BACKENDS):
            text += (f" That ceiling is {measured} (median of a few runs of a multi-threaded BLAS), not the CPU's "
                     "peak: it can read low when other jobs shared the cores while it was measured, and smaller problems "
                     "that stay in cache run faster.")
        else:
            text += f" That ceiling is {measured}, not the GPU's peak."
        kernels = above["kernel"].astype(str)
        if (row_precisions(above) == "tf32").any():
            text += " TF32 cuDNN plans use tensor cores, which an FP32 SGEMM does not."
        if kernels.str.startswith(("fft", "winograd")).any():
            text += (" FFT and Winograd cells are credited with a direct convolution's FLOP count but do fewer "
                     "multiplications.")
        notes.append(text)
    if over_copy.any():
        copy = _finite(bandwidth.get("copy_gbps"))
        notes.append(f"{int(over_copy.sum())} of {len(points)} cells moved their bytes faster than the measured copy "
                     f"bandwidth ({copy:,.3g} GB/s): their input, weights and output fit in cache and are read from it "
                     "on every repeat, while the copy is measured on arrays far larger than the caches.")
    return notes


def spots(ax: Axes, xs: np.ndarray, ys: np.ndarray, reach_pt: float) -> list[list[int]]:
    """The points (data coordinates of ``ax``, its scales and limits set) grouped by where they are drawn: each
    group's points lie within ``reach_pt`` points of its first one, so one marker there covers them all."""
    pixels = ax.transData.transform(np.column_stack([xs, ys]))
    reach = reach_pt * ax.figure.dpi / 72
    groups: list[list[int]] = []
    for index, (x, y) in enumerate(pixels):
        near = next((group for group in groups if math.dist((x, y), pixels[group[0]]) < reach), None)
        if near is None:
            groups.append([index])
        else:
            near.append(index)
    return groups


def ring_above(ax: Axes, xs: np.ndarray, ys: np.ndarray) -> None:
    """A red ring on every spot where points above a roof are drawn, and beside a ring that covers several of them
    their number: cells of one code and problem size lie on top of each other, and a ring per cell would show fewer
    rings than the note counts."""
    for group in spots(ax, xs, ys, math.sqrt(RING_SIZE) / 2):  # within a ring's radius: inside the ring
        x, y = math.exp(np.log(xs[group]).mean()), math.exp(np.log(ys[group]).mean())  # its middle, on log axes
        ax.scatter([x], [y], s=RING_SIZE, facecolor="none", edgecolor=ABOVE_COLOR, linewidth=1.2, zorder=5,
                   gid=RING_GID)
        if len(group) > 1:
            ax.annotate(str(len(group)), (x, y), xytext=(7, 0), textcoords="offset points", va="center", fontsize=8,
                        fontweight="bold", color=ABOVE_COLOR, zorder=6, gid=COUNT_GID)


def roofline_figure(summary: pd.DataFrame, bandwidth: dict, ceiling: dict) -> Figure:
    """The roofline as a Figure (render_roofline() saves it)."""
    points = roofline_points(summary)
    device = ceiling.get("device") or bandwidth.get("device") or next(iter(summary.get("device", [])), "?")
    title = f"Roofline of {device} (backend {bandwidth.get('backend') or ceiling.get('backend') or '?'})"
    if points.empty:
        return note_figure_object(title, "no ok cell with flops and bytes in this run")
    copy_gbps = _finite(bandwidth.get("copy_gbps"))
    peak = _finite(ceiling.get("sgemm_gflops"))
    over_peak, over_copy = above_roofs(points, bandwidth, ceiling)
    over = over_peak | over_copy
    groups = sorted(points["group"].unique())
    palette = {group: group_color(part["kernel"]) for group, part in points.groupby("group")}
    with report_style():
        figure, axes = new_figure(1, 2, width=5.8, height=4.8, legend_width=3.4, share=False)
        low, high = points["intensity"].min() / 2, points["intensity"].max() * 2
        if copy_gbps == copy_gbps and peak == peak:
            low, high = min(low, peak / copy_gbps / 4), max(high, peak / copy_gbps * 4)
        grid = np.geomspace(low, high, 200)
        for ax, y, ylabel in ((axes[0][0], "achieved_gflops", "achieved throughput (GFLOP/s)"),
                              (axes[0][1], "achieved_gbps", "achieved bandwidth (GB/s, bytes / kernel time)")):
            for (experiment, name), part in points.groupby(["experiment", "group"]):
                ax.scatter(part["intensity"], part[y], s=22, alpha=0.75, color=palette[name],
                           marker=_marker(experiment), edgecolor="none")
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
            if over.any():  # ring the points that lie above a roof: the note under the panels says why
                ring_above(ax, points.loc[over, "intensity"].to_numpy(float), points.loc[over, y].to_numpy(float))
        axes[0][0].set_title("compute: min(intensity x copy GB/s, SGEMM ceiling)", fontsize=10)
        axes[0][1].set_title("memory: measured copy bandwidth as the roof", fontsize=10)
        handles = [Line2D([], [], color=palette[n], marker="o", linestyle="none", label=textwrap.fill(n, 44))
                   for n in groups]
        handles += [Line2D([], [], color="black", markerfacecolor="white", marker=_marker(e), linestyle="none",
                           label=f"{e} cells")
                    for e in sorted(points["experiment"].unique())]
        if copy_gbps == copy_gbps:
            handles.append(Line2D([], [], color="black", linewidth=2,
                                  label=f"copy bandwidth {copy_gbps:,.3g} GB/s (measured)"))
        if peak == peak:
            handles.append(Line2D([], [], color="black", linestyle=":",
                                  label=f"FP32 SGEMM {peak:,.3g} GFLOP/s (measured,\n{ceiling.get('math', '')})"))
        if over.any():
            handles.append(Line2D([], [], marker="o", markerfacecolor="none", markeredgecolor=ABOVE_COLOR,
                                  linestyle="none", markersize=9,
                                  label=f"above a measured roof: {int(over.sum())} cell{'s' if over.sum() > 1 else ''}"
                                        "\n(a number: the cells one ring covers;\nsee the note below)"))
        figure.legend(handles=handles, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False, fontsize=9)
        notes = roof_notes(points, bandwidth, ceiling)
        if notes:
            figure.text(0.01, -0.01, "\n".join(textwrap.fill(note, 150) for note in notes), ha="left", va="top",
                        fontsize=9, color=ABOVE_COLOR)
        figure.suptitle(f"{title}: {len(points)} ok cells")
        return figure


def render_roofline(summary_csv: str | Path, bandwidth_json: str | Path, ceiling_json: str | Path,
                    out_png: str | Path) -> Path:
    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    with report_style():
        figure = roofline_figure(read_summary(summary_csv), load_device(bandwidth_json), load_device(ceiling_json))
        return save_figure(figure, out_png)
