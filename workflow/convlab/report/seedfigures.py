"""The seed figures of the seed table (convlab.report.seeds): the seed's numbers (dashed, open markers)
next to this run's (solid, filled), both GPUs named, with the median ratio.

Every figure is drawn whatever ran: a family with no rows in this run still shows the seed's
numbers, and says "not run in this configuration". This run's side is named by what ran (on the cpu
backend, the kernel's twin), and its ratio sentence is seedcompare.ratio_text(), the findings page's own.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from convlab.report.codelabels import ran_labels
from convlab.report.familydisplay import seed_family
from convlab.report.logaxes import log_y_axis
from convlab.report.plotting import (
    natural_order,
    new_figure,
    palette_colors,
    report_style,
    save_figure,
)
from convlab.report.seedcompare import (
    NEVER_RAN,
    NOT_RUN,
    SAME_CODE,
    UNMAPPED,
    gpu_names,
    layer_speedups,
    ratio_text,
)
from convlab.report.seeds import LAYER_SPEEDUPS, LINES, TILING_BARS, SeedFigure, seed_figure
from convlab.status import OK

NOT_RUN_TEXT = "this run: not run in this configuration"
UNIT_LABEL = {"ms": "kernel time (ms)", "gflops": "throughput (GFLOP/s)", "x": "speed-up (x)"}


def _series_key(value: str) -> str:
    return f"block {value}" if value and value.isdigit() else (value or "no block given")


def _versus(ax: Axes, part: pd.DataFrame, palette: dict) -> None:
    """Seed (dashed, open) per ``_series`` and this run (solid, filled) per ``_this_series``, against size."""
    notes = []
    for key, rows in part.groupby("_series", sort=False):
        rows = rows.sort_values("size")
        color = palette[key]
        good = rows[~rows["defect"].isin(NEVER_RAN)]
        ax.plot(good["size"], good["seed_value"], linestyle="--", marker="o", markerfacecolor="white",
                color=color, linewidth=1.3)
        bad = rows[rows["defect"] != ""]
        ax.scatter(bad["size"], bad["seed_value"], marker="D", s=70, facecolor=color, edgecolor="#d62728",
                   linewidth=1.5, zorder=6, alpha=0.8)
    for key, rows in part.groupby("_this_series", sort=False):
        # one point per size: a cell that answers several seed rows (one per seed block) is drawn once
        rows = rows.sort_values("size").drop_duplicates("size")
        ax.plot(rows["size"], rows["this_value"], linestyle="-", marker="o", color=palette[key], linewidth=1.8,
                zorder=7)
        failed = rows[~rows["this_status"].isin([OK, NOT_RUN, UNMAPPED, ""])]
        for status, cells in failed.groupby("this_status"):
            notes.append(f"{key}: this run {status} at {len(cells)} size(s)"
                         + (" (seed: never ran)" if cells["defect"].isin(NEVER_RAN).all() else ""))
    if notes:
        # top left: times grow with size, so that corner is empty on these log-log panels
        ax.text(0.03, 0.97, "\n".join(notes), transform=ax.transAxes, fontsize=8, color="#d62728", va="top",
                bbox={"facecolor": "white", "edgecolor": "#d62728", "alpha": 0.9})


def _size_axis(ax: Axes, sizes: list[float], label: str) -> None:
    ax.set_xscale("log", base=2)
    sizes = sorted(set(s for s in sizes if s == s))
    if sizes:
        ax.set_xticks(sizes, labels=[str(int(s)) for s in sizes])
        ax.set_xlim(min(sizes) / 1.3, max(sizes) * 1.3)
    ax.minorticks_off()
    ax.set_xlabel(label)


def _style_handles(seed_gpu: str, this_gpu: str, defects: bool) -> list[Line2D]:
    handles = [Line2D([], [], color="0.3", linestyle="--", marker="o", markerfacecolor="white",
                      label=f"seed ({seed_gpu})"),
               Line2D([], [], color="0.3", linestyle="-", marker="o", label=f"this run ({this_gpu})")]
    if defects:
        handles.append(Line2D([], [], linestyle="none", marker="D", markerfacecolor="0.7",
                              markeredgecolor="#d62728", label="seed number with a known defect\n(see the seed table)"))
    return handles


def _ran_names(part: pd.DataFrame, by: str) -> dict[str, str]:
    """Per value of ``by``: what this run ran for it (kernel → twin on the cpu backend), or the kernel."""
    names = {}
    for key, rows in part.groupby(by, sort=False):
        ran = rows["ran_as"][rows["ran_as"] != ""] if "ran_as" in rows.columns else pd.Series(dtype=str)
        names[key] = ran.mode().iloc[0] if not ran.empty else ", ".join(sorted(set(rows["kernel"]) - {""}))
    return names


def _this_series(row: pd.Series) -> str:
    """The series this run's value belongs to. A cell whose variant carries the seed's block is that block's;
    one without the tunable (a cpu twin runs `default`) is a series of its own, never a block's colour."""
    block = row["block"]
    if not block or row["variant"].endswith(f"~{block}") or not row["variant"]:
        return _series_key(block)
    ran = row["ran_as"] or row["kernel"]
    return f"this run: {ran}, {row['variant']}" + (" (no block tunable)" if row["variant"] == "default" else "")


# Colours of this run's own series (a variant no seed block names): dark, apart from the seed palette.
OWN_COLORS = ["#222222", "#7f3b08", "#2d004b", "#00441b"]


def _drawn_rows(comparison: pd.DataFrame, seed: str, entry: SeedFigure) -> pd.DataFrame:
    """The comparison's rows of the seed tables ``entry`` draws."""
    return comparison[(comparison["seed"] == seed) & comparison["table"].isin(entry.tables)].copy()


def _line_figure(comparison: pd.DataFrame, summary: pd.DataFrame, seed: str, entry: SeedFigure) -> Figure:
    panel, series = entry.panel, entry.series
    part = _drawn_rows(comparison, seed, entry)
    part["stride"] = part["stride"].map(lambda s: "stride 1 (seed: not given)" if s != s else f"stride {int(s)}")
    if "ran_as" not in part.columns:
        part["ran_as"] = ""
    seed_gpu, this_gpu = gpu_names(part)
    panels = list(dict.fromkeys(part[panel]))
    if series == "method":
        names = _ran_names(part, "method")
        part["_series"] = part["method"].map(lambda m: f"{m} ({names[m]})")
        part["_this_series"] = part["_series"]
    else:
        part["_series"] = part[series].map(_series_key)
        part["_this_series"] = part.apply(_this_series, axis=1) if not part.empty else part["_series"]
    keys = natural_order(part["_series"])
    palette = dict(zip(keys, palette_colors(len(keys))))
    own = [k for k in dict.fromkeys(part.loc[part["this_value"].notna(), "_this_series"]) if k not in palette]
    palette.update(zip(own, OWN_COLORS * (len(own) // len(OWN_COLORS) + 1)))
    unit = part["unit"].iloc[0]
    figure, axes = new_figure(1, len(panels), width=4.6, height=4.4, legend_width=3.4)
    for ax, name in zip(axes[0], panels):
        mine = part[part[panel] == name]
        _versus(ax, mine, palette)
        _size_axis(ax, mine["size"].tolist(), entry.size_label)
        heading = name.replace("stride", "stride ") if panel == "table" else str(name)
        if panel == "method":
            heading = f"{name} ({_ran_names(mine, 'method')[name]})"
        lines = [heading, textwrap.fill(ratio_text(mine), 56)]
        if mine["this_value"].isna().all():
            # in the title, not on the axes: a note there would cover the seed's own points
            lines.append(NOT_RUN_TEXT if (mine["this_status"] == NOT_RUN).all() else "this run: no ok cell")
        ax.set_title("\n".join(lines), fontsize=9)
        ax.set_ylabel(UNIT_LABEL[unit] if ax is axes[0][0] else "")
    for ax in axes[0]:
        log_y_axis(ax)
    ran = set(part.loc[part["this_value"].notna(), "_this_series"])
    handles = [Line2D([], [], color=palette[k], linewidth=2,
                      label=k if k in ran or series != "method" else f"{k}: not run here") for k in keys]
    handles += [Line2D([], [], color=palette[k], linewidth=2, marker="o", label=textwrap.fill(k, 44)) for k in own]
    handles += _style_handles(seed_gpu, this_gpu, (part["defect"] != "").any())
    figure.legend(handles=handles, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False, fontsize=9)
    figure.suptitle(f"{entry.title}\nseed: {seed_gpu}   this run: {this_gpu}")
    return figure


# The marks and dashes of the filters in the tiling sweep, in order: those seaborn's lineplot gives the levels of its
# style variable.
SWEEP_MARKERS = ("o", "X", (4, 0, 45), "P", (4, 0, 0), (4, 1, 0), "^", (4, 1, 45), "v")
SWEEP_DASHES = ("", (4, 1.5), (1, 1), (3, 1.25, 1.5, 1.25), (5, 1, 1, 1), (5, 1, 2, 1, 2, 1), (2, 2, 3, 1.5),
                (1, 2.5, 3, 1.2))


def _sweep_lines(ax: Axes, best: pd.DataFrame) -> list[Line2D]:
    """This run's tiling sweep, as seaborn's lineplot(hue="ran", style="filter", markers=True) draws it: a line per
    twin (its colour) and filter (its marker and dashes), each sorted by size, the twins and filters in the order
    they first appear and drawn twin by twin, filter by filter; and the legend's handles, a heading and an entry per
    twin and per filter."""
    rans, filters = list(pd.unique(best["ran"])), list(pd.unique(best["filter"]))
    colors = dict(zip(rans, palette_colors(len(rans))))
    marks = {name: (SWEEP_MARKERS[i % len(SWEEP_MARKERS)], SWEEP_DASHES[i % len(SWEEP_DASHES)])
             for i, name in enumerate(filters)}
    groups = dict(tuple(best.groupby(["ran", "filter"], sort=False)))
    for ran, name in ((ran, name) for ran in rans for name in filters if (ran, name) in groups):
        rows = groups[(ran, name)].sort_values(["size", "kernel_ms"])
        marker, dashes = marks[name]
        line, = ax.plot(rows["size"].to_numpy(float), rows["kernel_ms"].to_numpy(float), color=colors[ran],
                        marker=marker, markeredgewidth=0.75, markeredgecolor="w")
        line.set_dashes(dashes)
    heading = {"linestyle": "", "marker": ""}
    handles = [Line2D([], [], label="ran", **heading)]
    handles += [Line2D([], [], color=colors[ran], label=ran) for ran in rans]
    handles.append(Line2D([], [], label="filter", **heading))
    for name in filters:
        handle = Line2D([], [], color=".2", marker=marks[name][0], markeredgewidth=0.75, markeredgecolor="w",
                        label=name)
        handle.set_dashes(marks[name][1])
        handles.append(handle)
    return handles


def _tiling_figure(comparison: pd.DataFrame, summary: pd.DataFrame, seed: str, entry: SeedFigure) -> Figure:
    part = _drawn_rows(comparison, seed, entry)
    seed_gpu, this_gpu = gpu_names(part)
    figure, axes = new_figure(1, 2, width=5.2, height=4.2, legend_width=1.0, share=False)
    ax = axes[0][0]
    methods = list(part["method"])
    x = np.arange(len(methods))
    ax.bar(x - 0.2, part["seed_value"], width=0.4, color="0.75", edgecolor="0.3", label=f"seed ({seed_gpu})")
    ax.bar(x + 0.2, part["this_value"].fillna(0), width=0.4, color="#0173b2", label=f"this run ({this_gpu})")
    ran = [r or k for r, k in zip(part.get("ran_as", part["kernel"]), part["kernel"])]
    ax.set_xticks(x, labels=[f"{m}\n{textwrap.fill(k, 18)}" for m, k in zip(methods, ran)], fontsize=8)
    ax.set_ylabel("kernel time (ms)")
    # headroom above the tallest bar for the legend, which then never covers a bar
    ax.set_ylim(0, float(np.nanmax([*part["seed_value"], *part["this_value"].fillna(0)])) * 1.45)
    # Where this run has no time, say so in its own (empty) bar slot, beside the seed's bar, never over it.
    for position, value, status in zip(x, part["this_value"], part["this_status"]):
        if value != value:
            ax.text(position + 0.2, 0.02, "not run" if status in (NOT_RUN, UNMAPPED, "") else status,
                    transform=ax.get_xaxis_transform(), rotation=90, ha="center", va="bottom", fontsize=8,
                    color="0.35")
    size, fsize = part["size"].iloc[0], part["filter_size"].iloc[0]
    lines = [f"{int(size)}^2, {int(fsize)}x{int(fsize)} filter, 1 channel", textwrap.fill(ratio_text(part), 60)]
    if part["this_value"].isna().all():
        lines.append(NOT_RUN_TEXT)
    ax.set_title("\n".join(lines), fontsize=9)
    ax.legend(loc="upper left", fontsize=8, frameon=False, ncols=2)
    ax.grid(axis="x", visible=False)
    # This run's own tiling sweep, whatever sizes and filters it used.
    ax = axes[0][1]
    rows = summary[(summary["experiment"] == seed_family(seed).name) & (summary["status"] == OK)]
    if rows.empty:
        ax.text(0.5, 0.5, NOT_RUN_TEXT.replace(": ", ":\n"), transform=ax.transAxes, ha="center", color="0.35")
        ax.set_axis_off()
        ax.set_title(f"this run's tiling sweep ({this_gpu})", fontsize=9)
    else:
        best = rows.sort_values("kernel_ms").drop_duplicates(["kernel", "size", "filter_size"]).copy()
        best["ran"] = ran_labels(best)  # the twin that ran, on the cpu backend
        best["filter"] = best["filter_size"].astype(int).astype(str).radd("filter ").str.cat(
            best["filter_size"].astype(int).astype(str), sep="x")
        handles = _sweep_lines(ax, best)
        _size_axis(ax, best["size"].tolist(), "image size (pixels)")
        log_y_axis(ax)
        ax.set_ylabel("kernel time (ms, best variant)")
        ax.set_title(f"this run's tiling sweep ({this_gpu})", fontsize=9)
        ax.legend(handles=handles, loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False, fontsize=8)
    figure.suptitle(f"{entry.title}\nseed: {seed_gpu}   this run: {this_gpu}")
    return figure


def _layer_speedup_figure(comparison: pd.DataFrame, summary: pd.DataFrame, seed: str, entry: SeedFigure) -> Figure:
    part = _drawn_rows(comparison, seed, entry)
    row = part.iloc[0]
    seed_gpu, this_gpu = gpu_names(part)
    kernel, baseline = [k.strip() for k in row["kernel"].split("/")]
    table = layer_speedups(summary, kernel, baseline, seed_family(seed).name)
    figure, axes = new_figure(1, 1, width=max(6.0, 0.55 * len(table) + 3), height=4.2)
    ax = axes[0][0]
    if table.empty:
        # the same-code case says which code both ran: a speed-up of it over itself is not drawn
        text = textwrap.fill(f"this run: {row['this_reason']}", 60) if row["this_status"] == SAME_CODE else NOT_RUN_TEXT
        ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", color="0.35")
        ax.set_xticks([])
    else:
        labels = [f"C{r.C_in:g} {r.H:g}x{r.W:g} K{r.C_out:g}\nbatch {r.batch:g}" for r in table.itertuples()]
        x = np.arange(len(table))
        ax.bar(x, table["speedup"], color=["#0173b2" if s >= 1 else "#d55e00" for s in table["speedup"]])
        ax.set_xticks(x, labels=labels, fontsize=7, rotation=45 if len(table) > 6 else 0, ha="right"
                      if len(table) > 6 else "center")
        ax.axhline(row["this_value"], color="#0173b2", linestyle=":", linewidth=1.5,
                   label=f"this run, geometric mean {row['this_value']:.2f}x ({this_gpu})")
    ax.axhline(row["seed_value"], color="0.3", linestyle="--", linewidth=1.5,
               label=f"seed: {row['seed_value']:g}x over all layers ({seed_gpu})")
    ax.axhline(1.0, color="0.6", linewidth=0.8)
    ax.set_ylim(0, max(2.0, float(np.nanmax([row["seed_value"], *table["speedup"]]))) * 1.4)
    ax.set_ylabel(f"speed-up (x)\n{baseline} ms / {kernel} ms", fontsize=10)
    ax.set_xlabel("layer: C_in, H x W, C_out (K)")
    ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
    ran = row.get("ran_as", "")
    ran_line = ""
    if ran and "→" in ran and " / " in ran:  # on the cpu backend: which twin over which
        faster, slower = ran.split(" / ", 1)
        ran_line = f"\nthis run: {faster}\nover {slower}"
    ax.set_title(f"{entry.title}\nseed: {seed_gpu}   this run: {this_gpu}{ran_line}", fontsize=10)
    return figure


# One drawing per kind of seed figure, each called alike: (comparison, summary, seed, entry).
DRAWINGS = {LINES: _line_figure, TILING_BARS: _tiling_figure, LAYER_SPEEDUPS: _layer_speedup_figure}


def seed_figure_object(seed: str, name: str, comparison: pd.DataFrame, summary: pd.DataFrame) -> Figure:
    """The figure ``name`` of seed ``seed`` (convlab.report.seeds) as a Figure; render_seed_figure() saves it."""
    entry = seed_figure(seed, name)
    with report_style():
        return DRAWINGS[entry.drawing](comparison, summary, seed, entry)


def render_seed_figure(comparison: pd.DataFrame, summary: pd.DataFrame, seed: str, name: str,
                       out_png: str | Path) -> Path:
    """The figure ``name`` of seed ``seed`` as a PNG at ``out_png``."""
    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    with report_style():
        return save_figure(seed_figure_object(seed, name, comparison, summary), out_png)
