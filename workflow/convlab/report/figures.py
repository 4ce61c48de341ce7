"""Figures and the failed-cell table of the Snakemake report, drawn from the summary CSV."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from convlab.history.summary import read_summary
from convlab.plan.families import DEFAULT_FAMILY, FAMILIES
from convlab.report.codelabels import TWIN_BACKENDS, kernel_labels
from convlab.report.familydisplay import SIZE_FIGURE_FAMILY
from convlab.report.figuretable import NAMES, SIZE_FAMILY, figure_entry
from convlab.report.kernelcolors import kernel_colors
from convlab.report.logaxes import log_axis, log_y_axis
from convlab.report.pages import html_page, write_page
from convlab.report.plotting import (
    NO_ROWS,
    NO_TIMED_CELLS,
    SIZE_LABEL,
    TIME_LABEL,
    TIMED,
    WRONG_LABEL,
    best_variants,
    figure_title,
    hide_y_ticks,
    lay_out_grid,
    legend_handles,
    natural_key,
    natural_order,
    new_figure,
    note_figure_object,
    note_on_axes,
    palette_colors,
    panel_title,
    report_style,
    save_figure,
    size_axis,
    with_filter,
)
from convlab.report.time_vs_size import time_vs_size_figure
from convlab.status import ERROR, INVALID_CONFIG, OK, OOM, STATUSES, UNSUPPORTED, WRONG

STATUS_COLORS = {
    OK: "#2a9d4b", WRONG: "#d62728", INVALID_CONFIG: "#ff7f0e",
    OOM: "#9467bd", UNSUPPORTED: "#8c8c8c", ERROR: "#3b3b3b",
}


def _natural_column(column: pd.Series) -> pd.Series:
    # The same order for a sort_values key: zero-pad digit runs so text order is numeric order.
    return column.str.replace(r"\d+", lambda m: m.group().zfill(12), regex=True)


def _lines(ax: Axes, data: pd.DataFrame, y: str, palette: dict) -> tuple[set[str], bool]:
    """One line per label, wrong points overdrawn with a large X; the labels drawn, and whether any point is wrong.

    The lines seaborn's lineplot and scatterplot (hue=label, estimator=None) would draw, in the order the labels
    first appear and each sorted by x, then y; drawn with matplotlib alone, since seaborn's setup of each call
    costs more than the drawing in a figure of many panels."""
    data = data[data["H"].notna() & data[y].notna()]
    if data.empty:
        return set(), False
    for label in data["label"].unique():
        points = data[data["label"] == label].sort_values(["H", y])
        ax.plot(points["H"].to_numpy(float), points[y].to_numpy(float), color=palette[label], marker="o",
                markersize=6, markeredgewidth=0.75, markeredgecolor="w")
    wrong = data[data["status"] == WRONG]
    if not wrong.empty:
        ax.scatter(wrong["H"].to_numpy(float), wrong[y].to_numpy(float), marker="X", s=160,
                   color=[palette[label] for label in wrong["label"]], edgecolor="black", linewidth=1.2, zorder=5)
    return set(data["label"]), not wrong.empty


FLOOR_PCT = 100.0  # the memory-bandwidth floor, in % of it
FLOOR_LABEL = "memory-bandwidth floor"


def _floor_range(values: pd.Series) -> tuple[float, float]:
    """The log y range of the floor figure: every value and the floor itself, with room around them. Log, so
    that lines a few percent from zero are as readable as lines near the floor."""
    shown = [float(v) for v in values if v > 0] + [FLOOR_PCT]
    return min(shown) / 1.5, max(shown) * 1.4


def by_stride_figure(frame: pd.DataFrame, what: str, y: str, ylabel: str, floor_line: bool = False) -> Figure:
    """The shared layout of the headline figures against size: one column per stride, one line per kernel, on a
    log y axis. ``floor_line``: y is a percentage of the memory-bandwidth floor, drawn as a dashed line at 100."""
    if frame.empty:
        return note_figure_object(what, NO_ROWS)
    best = best_variants(frame)
    without = natural_order(best.loc[~(best[y] > 0), "label"])
    best = best[best[y] > 0]  # a log axis has no place for zero
    strides = sorted(frame["stride"].dropna().unique())
    sizes = sorted(frame["H"].dropna().unique())
    # each line in its kernel's colour, the same in every figure
    kernel_of = dict(zip(best["label"], best["kernel"]))
    colors = kernel_colors(sorted(set(kernel_of.values())))
    palette = {label: colors[kernel_of[label]] for label in natural_order(best["label"])}
    figure, axes = new_figure(1, len(strides))
    drawn: set[str] = set()
    any_wrong = False
    for ax, stride in zip(axes[0], strides):
        part = best[best["stride"] == stride]
        labels_here, wrong_here = _lines(ax, part, y, palette)
        drawn |= labels_here
        any_wrong |= wrong_here
        if not labels_here:
            note_on_axes(ax, NO_TIMED_CELLS)
        size_axis(ax, sizes)
        if floor_line:
            ax.axhline(FLOOR_PCT, color="0.3", linestyle="--", linewidth=1.2)
        panel_title(ax, f"stride {int(stride)}")
        ax.set_xlabel(SIZE_LABEL)
        ax.set_ylabel(ylabel if ax is axes[0][0] else "")
    if floor_line:  # the panels share y: one range for every stride
        axes[0][0].set_ylim(*_floor_range(best[y]))
    for ax in axes[0]:  # after every panel is drawn: the shared limits decide which ticks get labels
        log_y_axis(ax)
    if not drawn and not floor_line:  # the floor figure's axis still places its floor
        hide_y_ticks(axes[0])
    # a timed kernel left out is named, not silently missing
    absent = [label for label in without if label not in drawn]
    named = ", ".join(absent) if len(absent) <= 4 else f"{len(absent)} kernels"
    figure.suptitle(figure_title(frame, what) + (f"\nnot drawn, no value in their rows: {named}" if absent else ""))
    # only the lines drawn: a kernel without a value here is no line of this figure
    handles = legend_handles({label: color for label, color in palette.items() if label in drawn}, any_wrong)
    if floor_line:
        handles.append(Line2D([], [], color="0.3", linestyle="--", label=FLOOR_LABEL))
    if handles:
        figure.legend(handles=handles, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    return figure


def gflops_figure(frame: pd.DataFrame) -> Figure:
    return by_stride_figure(frame, "Throughput vs image size", "gflops", "throughput (GFLOP/s)")


def pct_of_floor_figure(frame: pd.DataFrame) -> Figure:
    return by_stride_figure(frame, "Distance from the memory floor", "pct_of_floor",
                            "% of memory-bandwidth floor\n(100 = at floor)", floor_line=True)


def single_variant_reason(frame: pd.DataFrame) -> str:
    """Why every kernel has a single variant, in the words of a user who has not read the code: a line under the title."""
    backends = set(frame["backend"]) if "backend" in frame.columns else set()
    if backends & set(TWIN_BACKENDS):
        return ("each kernel has a single variant: on the cpu backend it runs its cpu twin, which has no tunables "
                "(block sizes and cuDNN plans are a GPU's variants)")
    return ("each kernel has a single variant: every tunable lists one value in this configuration "
            "(e.g. kernels: {direct: {block: [8, 16, 32]}} sweeps one)")


def single_variants_figure(frame: pd.DataFrame) -> Figure:
    """The variants figure where every kernel has one variant: each kernel's variant and its time at every image
    size, one row per kernel and one panel per stride, so that the variants that ran are still read off a chart."""
    what = "Kernel time of every variant"
    # the points drawn, and so the sizes the legend names: a log axis has no place for zero, a panel is a stride
    timed = frame[frame["status"].isin(TIMED) & (frame["kernel_ms"] > 0) & frame["stride"].notna()]
    names = kernel_labels(frame)
    kernel_names = frame["kernel"].map(lambda kernel: names.get(kernel, kernel))
    labels = with_filter(frame, kernel_names + " [" + frame["variant"] + "]")
    order = natural_order(labels)
    rank = {label: index for index, label in enumerate(order)}
    strides = sorted(frame["stride"].dropna().unique())
    sizes = sorted(timed["H"].dropna().unique())
    palette = dict(zip(sizes, palette_colors(len(sizes))))
    figure, axes = new_figure(1, len(strides), width=5.2, height=0.45 * len(order) + 2.2, legend_width=2.0)
    positions = pd.Series(labels.map(rank), index=frame.index)
    for ax, stride in zip(axes[0], strides):
        part = timed[timed["stride"] == stride]
        for size in sizes:
            at = part[part["H"] == size]
            ax.scatter(at["kernel_ms"].to_numpy(float), positions[at.index].to_numpy(float), color=palette[size],
                       s=42, edgecolor="w", linewidth=0.6, zorder=3)
        wrong = part[part["status"] == WRONG]
        if not wrong.empty:
            ax.scatter(wrong["kernel_ms"].to_numpy(float), positions[wrong.index].to_numpy(float), marker="X",
                       s=120, color="none", edgecolor="black", linewidth=1.2, zorder=4)
        if part.empty:
            note_on_axes(ax, NO_TIMED_CELLS)
        panel_title(ax, f"stride {int(stride)}")
        ax.set_xlabel(TIME_LABEL)
        ax.grid(axis="y", visible=False)
    # the panels share both axes: one row of names on the left, one time scale
    first = axes[0][0]
    first.set_yticks(range(len(order)), labels=order, fontsize=9)
    first.set_ylim(len(order) - 0.5, -0.5)
    if timed.empty:  # no time anywhere: an autoscaled time axis would be made up
        for ax in axes[0]:
            ax.tick_params(axis="x", which="both", labelbottom=False)
    else:
        low, high = timed["kernel_ms"].min(), timed["kernel_ms"].max()
        first.set_xlim(low / 1.4, high * 1.4)
        for ax in axes[0]:
            log_axis(ax, "x")
    handles = [Line2D([], [], color=palette[size], marker="o", linestyle="none", label=str(int(size)))
               for size in sizes]
    if (timed["status"] == WRONG).any():
        handles.append(Line2D([], [], color="black", marker="X", markerfacecolor="none", linestyle="none",
                              label=WRONG_LABEL))
    figure.legend(handles=handles, title=SIZE_LABEL.replace(" (", "\n("), loc="center left",
                  bbox_to_anchor=(1.0, 0.5), frameon=False)
    figure.suptitle(figure_title(frame, f"{what}\n{single_variant_reason(frame)}"))
    return figure


def variants_figure(frame: pd.DataFrame) -> Figure:
    """Every variant of each kernel that has several: does the tunable matter, and where? Without any such
    kernel, a figure that says why."""
    what = "Kernel time of every variant"
    if frame.empty:
        return note_figure_object(what, NO_ROWS)
    counts = frame.groupby("kernel")["variant"].nunique()
    kernels = sorted(counts[counts > 1].index)
    if not kernels:
        return single_variants_figure(frame)
    strides = sorted(frame["stride"].dropna().unique())
    sizes = sorted(frame["H"].dropna().unique())
    # Only the columns drawn: every selection below copies each column of the summary's sixty.
    timed = frame.loc[frame["status"].isin(TIMED) & (frame["kernel_ms"] > 0),  # a log axis has no place for zero
                      ["kernel", "variant", "filter_size", "H", "stride", "status", "kernel_ms"]]
    timed["label"] = with_filter(timed, timed["variant"])
    names = kernel_labels(frame)
    # Room for the per-row legends beside the panels (lay_out_grid keeps it).
    legend_width = 3.2
    figure, axes = new_figure(len(kernels), len(strides), legend_width=legend_width)
    size_axis(axes[0][0], sizes)  # every panel shares it: set once, not once per panel
    for row, kernel in zip(axes, kernels):
        mine = timed[timed["kernel"] == kernel]
        all_labels = natural_order(with_filter(frame, frame["variant"])[frame["kernel"] == kernel])
        palette = dict(zip(all_labels, palette_colors(len(all_labels))))
        drawn: set[str] = set()
        any_wrong = False
        for ax, stride in zip(row, strides):
            part = mine[mine["stride"] == stride]
            labels_here, wrong_here = _lines(ax, part, "kernel_ms", palette)
            drawn |= labels_here
            any_wrong |= wrong_here
            if part.empty:
                note_on_axes(ax, NO_TIMED_CELLS)
            panel_title(ax, f"{names.get(kernel, kernel)}, stride {int(stride)}")
            ax.set_ylabel(TIME_LABEL if ax is row[0] else "")
        for ax in row:
            log_y_axis(ax)
        if mine.empty:
            hide_y_ticks(row)
        # The legend names the lines drawn; the variants that never produced a time are named in its title, as
        # they have no line to stand for.
        handles = legend_handles({label: color for label, color in palette.items() if label in drawn}, any_wrong)
        untimed = [label for label in all_labels if label not in drawn]
        title = f"{kernel} ({counts[kernel]} variants)"
        if untimed:
            title += "\nno timed cell: " + (", ".join(untimed) if len(untimed) <= 3 else f"{len(untimed)} variants")
        row[-1].legend(handles=handles, title=title, loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False)
    for ax in axes[-1]:  # the panels share x: only the bottom row has its numbers, and so its label
        ax.set_xlabel(SIZE_LABEL)
    # a fixed gap from the top: the layout leaves room for the title's height only, and the default place (a
    # fraction of the height) drops it into the first row of a figure of many kernels
    figure.suptitle(figure_title(frame, what), y=1 - 0.1 / figure.get_figheight())
    # a panel of each kernel and stride: too many for tight_layout to measure in the time the rest takes
    lay_out_grid(figure, legend_width)
    return figure


EXPERIMENT_ORDER = tuple(FAMILIES)


def status_figure(frame: pd.DataFrame) -> Figure:
    """Every cell of the summary, whatever its experiment: one stacked bar per experiment and kernel, split by
    status, so that the bars add up to the summary's row count (the title says it)."""
    what = "Outcome of every cell"
    if frame.empty:
        return note_figure_object(what, NO_ROWS)
    frame = frame.assign(experiment=frame["experiment"] if "experiment" in frame.columns else DEFAULT_FAMILY)
    counts = frame.groupby(["experiment", "kernel", "status"]).size().unstack("status", fill_value=0)
    order = [s for s in STATUSES if s in counts.columns]
    order += sorted(set(counts.columns) - set(order))  # an unexpected status still shows up
    rank = {name: i for i, name in enumerate(EXPERIMENT_ORDER)}
    keys = sorted(counts.index, key=lambda key: (rank.get(key[0], len(rank)), key[0], natural_key(key[1])))
    counts = counts.loc[keys, order]
    names = kernel_labels(frame)
    totals = counts.sum(axis=1)
    experiments = counts.index.get_level_values(0)
    figure, axes = new_figure(1, 1, width=11.0, height=0.34 * len(counts) + 1.9)
    ax = axes[0][0]
    positions = np.arange(len(counts))
    left = np.zeros(len(counts))
    for status in order:
        values = counts[status].to_numpy()
        bars = ax.barh(positions, values, left=left, color=STATUS_COLORS.get(status, "#17becf"), label=status,
                       height=0.7)
        ax.bar_label(bars, labels=[str(v) if v else "" for v in values], label_type="center", fontsize=8,
                     color="white")
        left += values
    ax.set_yticks(positions, labels=[f"{e}: {names.get(k, k)}  ({totals[(e, k)]})" for e, k in counts.index],
                  fontsize=9)
    ax.invert_yaxis()
    ax.grid(axis="y", visible=False)
    for boundary in np.flatnonzero(experiments[1:] != experiments[:-1]):
        ax.axhline(boundary + 0.5, color="0.5", linewidth=0.8)
    ax.set_xlabel("cells (count)")
    ax.set_xlim(0, float(totals.max()) * 1.05)
    summary = (f"{len(frame)} cells, {len(counts)} kernel{'s' if len(counts) != 1 else ''} "
               f"in {experiments.nunique()} experiment{'s' if experiments.nunique() != 1 else ''}")
    ax.set_title(figure_title(frame, f"{what}: {summary}"))
    ax.legend(title="status", loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False)
    return figure


# The draw functions of the figure table (convlab.report.figuretable): each is given the rows its entry reads and
# the path of its file.
def draw_time_vs_size(frame: pd.DataFrame, path: Path) -> Path:
    return save_figure(time_vs_size_figure(frame), path)


def draw_gflops_vs_size(frame: pd.DataFrame, path: Path) -> Path:
    return save_figure(gflops_figure(frame), path)


def draw_pct_of_floor_vs_size(frame: pd.DataFrame, path: Path) -> Path:
    return save_figure(pct_of_floor_figure(frame), path)


def draw_variants(frame: pd.DataFrame, path: Path) -> Path:
    return save_figure(variants_figure(frame), path)


def draw_status(frame: pd.DataFrame, path: Path) -> Path:
    return save_figure(status_figure(frame), path)


def status_table_page(frame: pd.DataFrame, path: Path) -> Path:
    return write_page(path, status_table_html(frame))


def _draw_function(draw: str):
    module, function = draw.split(":")
    return getattr(importlib.import_module(module), function)


def render_figures(summary_csv: str | Path, outdir: str | Path, names: Iterable[str] = NAMES) -> list[Path]:
    """Write the files of the figure table's entries ``names`` (default: every one) into ``outdir`` and return
    their paths. The report renders each in a job of its own, side by side.

    An entry that reads SIZE_FAMILY draws the rows of the family that has the figures against size
    (SIZE_FIGURE_FAMILY): given the whole summary or that family's slice of it, it draws the same. An entry that
    reads EVERY_ROW draws every row it is given. Works on any summary, including a header-only one or one where
    every cell failed.
    """
    entries = [figure_entry(name) for name in names]
    everything = read_summary(summary_csv)
    family = everything
    if "experiment" in family.columns:  # the other families have figures of their own (seedfigures, roofline)
        family = family[family["experiment"] == SIZE_FIGURE_FAMILY.name]
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    # A scoped style: rendering leaves matplotlib's global state alone.
    with report_style():
        return [_draw_function(entry.draw)(family if entry.reads == SIZE_FAMILY else everything, outdir / entry.file)
                for entry in entries]


def render_files(summary_csv: str | Path, outdir: str | Path, name: str | None = None) -> list[Path]:
    """What the `figures` command writes into ``outdir``: the file of the figure table's entry ``name``, or with no
    name every one."""
    return render_figures(summary_csv, outdir, NAMES if name is None else [name])


def status_table_html(frame: pd.DataFrame) -> str:
    """A standalone HTML page listing every cell of ``frame`` (a summary) whose status is not ok."""
    failed = frame[frame["status"] != OK]
    if frame.empty:
        body = "<p>The summary has no rows: no cell was run.</p>"
    elif failed.empty:
        body = f"<p>All {len(frame)} cells passed verification.</p>"
    else:
        order = ["kernel", "variant", "H", "stride"]
        table = failed.sort_values(order, key=lambda c: _natural_column(c) if c.name == "variant" else c)[
            ["kernel", "variant", "H", "stride", "status", "reason"]
        ].astype({"H": "Int64", "stride": "Int64"})
        body = (f"<p>{len(failed)} of {len(frame)} cells did not pass.</p>\n"
                + table.to_html(index=False, escape=True, border=0, na_rep=""))
    style = ("body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}"
             "th,td{border:1px solid #ccc;padding:4px 8px;text-align:left}th{background:#f0f0f0}")
    title = "Cells that did not pass"
    return html_page(title, style, f"<h2>{title}</h2>\n{body}")
