"""The report's kernel-time figure: time against image size, log-log, as small multiples, one row of panels per
few kernel groups, every line named at its end."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.transforms import blended_transform_factory

from convlab.report import plotting as plot
from convlab.report.codelabels import TWIN_BACKENDS, ran_labels, short_implementation
from convlab.report.kernelcolors import group_rank, kernel_colors, kernel_group
from convlab.report.logaxes import log_y_axis
from convlab.status import WRONG

MAX_LINES_PER_PANEL = 6  # more and one panel's lines crowd again; small groups share a panel up to this
LINE_MARKERS = ("o", "s", "^", "D", "v", "P", "*")  # never "X": a large X marks a wrong result
LINE_STYLES = ("-", "--", "-.", ":")
CONTEXT_COLOR = "0.84"
LABEL_FONT_SIZE = 8.5
LABEL_COLUMN = 1.09  # where labels start, in panel widths: a leader's slant fits between the edge and them
EDGE_COLUMN_FROM = 0.6  # lines ending right of this (in panel widths) are named in the column beyond the edge
# gids name what a line or text is, for whoever reads the figure back (the tests do).
KERNEL_LINE = "kernel-line"
KERNEL_LABEL = "kernel-label"
LABEL_LEADER = "label-leader"
CONTEXT_LINE = "context-line"


@dataclass(frozen=True)
class LineStyle:
    color: tuple[float, float, float]
    marker: str
    linestyle: str


def line_styles(names: list[str], kernels: dict[str, str]) -> dict[str, LineStyle]:
    """Per line name, in the given order: its kernel's colour (convlab.report.kernelcolors: the same in
    every figure), and a marker and a line style that cycle on their own, so that a kernel's lines (one
    per filter) and up to 4 lines of a panel differ in both."""
    colors = kernel_colors(sorted(set(kernels.values())))
    return {name: LineStyle(colors[kernels[name]], LINE_MARKERS[i % len(LINE_MARKERS)],
                            LINE_STYLES[i % len(LINE_STYLES)])
            for i, name in enumerate(names)}


def panel_group(rows: pd.DataFrame) -> pd.Series:
    """Per row, the group it is drawn with: its kernel's group in KERNEL_GROUPS; on a twin backend the twin that
    ran, so that numpy is never drawn under the name of the GPU library a kernel is named after."""
    groups = rows["kernel"].map(kernel_group)
    if {"backend", "implementation"} <= set(rows.columns):
        twin = rows["backend"].isin(TWIN_BACKENDS) & (rows["implementation"].fillna("") != "")
        groups = groups.where(~twin, rows["implementation"].map(short_implementation))
    return groups


def pack_panels(lines: pd.DataFrame) -> list[list[str]]:
    """The groups of each panel row. ``lines`` has one row per line, with its ``group`` and ``kernel``. Groups
    keep the order of KERNEL_GROUPS (related families are neighbours there), and neighbours share a panel while
    it holds at most MAX_LINES_PER_PANEL lines; a larger group gets a panel of its own, never split."""
    rank = lines.groupby("group")["kernel"].agg(lambda kernels: min(map(group_rank, kernels)))
    counts = lines.groupby("group").size()
    panels: list[list[str]] = []
    filled = 0
    for group in sorted(counts.index, key=lambda name: (rank[name], plot.natural_key(name))):
        if not panels or filled + counts[group] > MAX_LINES_PER_PANEL:
            panels.append([])
            filled = 0
        panels[-1].append(group)
        filled += counts[group]
    return panels


def spread_labels(targets: list[float], gap: float, low: float, high: float) -> list[float]:
    """Positions for labels wanted at ``targets`` (same order), at least ``gap`` apart and within [low, high]
    where they fit: labels that would overlap are moved apart as one block centred on their targets' mean."""
    order = sorted(range(len(targets)), key=lambda i: targets[i])
    blocks: list[list[int]] = []  # runs of labels (indices into order) stacked gap apart
    starts: list[float] = []
    for position in range(len(order)):
        blocks.append([position])
        starts.append(targets[order[position]])
        while len(blocks) > 1 and starts[-2] + len(blocks[-2]) * gap > starts[-1]:
            merged = blocks[-2] + blocks.pop()
            starts.pop()
            blocks[-1] = merged
            starts[-1] = sum(targets[order[p]] for p in merged) / len(merged) - (len(merged) - 1) * gap / 2
    stacked = [start + k * gap for block, start in zip(blocks, starts) for k in range(len(block))]
    # Push up off the bottom, then down off the top: each pass keeps the gaps, and the top wins if both bind.
    stacked = [max(value, low + k * gap) for k, value in enumerate(stacked)]
    last = len(stacked) - 1
    stacked = [min(value, high - (last - k) * gap) for k, value in enumerate(stacked)]
    placed = [0.0] * len(targets)
    for position, index in enumerate(order):
        placed[index] = stacked[position]
    return placed


def label_text(line: str) -> str:
    """A line's label as drawn: on a twin backend the twin goes under the kernel, to keep the label column narrow."""
    return line.replace(" → ", "\n→ ")


def _label_line_ends(ax: Axes, ends: list[tuple[str, float, float]], styles: dict[str, LineStyle],
                     gap: float) -> None:
    """Name each line at its right end. ``ends``: (name, size, ms) of each line's last point; ``gap``: the
    height of a label in decades of the log y axis. Lines ending in the right part of the panel are named in a
    column right of it, a line ending further left right of its last point (where a label would not run over
    the others). A leader runs from each point to its label: a stub out, a slant to the label's height, a stub
    in, so that it ends beside its label, never through another; labels keep the order of their lines' ends."""
    low, high = (math.log10(limit) for limit in ax.get_ylim())
    left, right = (math.log10(limit) for limit in ax.get_xlim())
    # x in axes fractions (the panel's right edge is 1), y in data: the leaders stay put as the layout changes
    across = blended_transform_factory(ax.transAxes, ax.transData)
    columns: dict[float, list[tuple[str, float, float]]] = {}
    for name, size, ms in ends:
        point = (math.log10(size) - left) / (right - left)
        column = LABEL_COLUMN if point >= EDGE_COLUMN_FROM else point + LABEL_COLUMN - 1
        columns.setdefault(column, []).append((name, point, ms))
    for column, here in columns.items():
        placed = spread_labels([math.log10(ms) for _, _, ms in here], gap, low + gap / 2, high - gap / 2)
        for (name, point, ms), position in zip(here, placed):
            color = styles[name].color
            ax.plot([point + 0.012, point + 0.03, column - 0.025, column - 0.008], [ms, ms, 10**position, 10**position],
                    transform=across, color=color, linewidth=0.8, clip_on=False, gid=LABEL_LEADER, zorder=2)
            ax.text(column, 10**position, label_text(name), transform=across, ha="left", va="center",
                    fontsize=LABEL_FONT_SIZE, color=color, clip_on=False, gid=KERNEL_LABEL, zorder=6)


def _draw_lines(ax: Axes, rows: pd.DataFrame, names: list[str],
                styles: dict[str, LineStyle]) -> list[tuple[str, float, float]]:
    """The lines ``names`` in their styles over every other line of ``rows`` in light grey (where this panel's
    kernels stand among the rest); wrong points overdrawn with a large X. Returns (name, size, ms) of each
    drawn line's last point."""
    for name, part in rows[~rows["line"].isin(names)].groupby("line"):
        ax.plot(part["H"], part["kernel_ms"], color=CONTEXT_COLOR, linewidth=0.9, zorder=1, gid=CONTEXT_LINE,
                label=f"_{name}")  # a leading underscore keeps it out of any legend
    ends = []
    for name in names:
        part = rows[rows["line"] == name].sort_values("H")
        if part.empty:
            continue
        style = styles[name]
        ax.plot(part["H"], part["kernel_ms"], color=style.color, marker=style.marker, linestyle=style.linestyle,
                linewidth=1.8, markersize=6, markeredgecolor="white", markeredgewidth=0.6, label=name,
                gid=KERNEL_LINE, zorder=3)
        wrong = part[part["status"] == WRONG]
        if not wrong.empty:
            ax.scatter(wrong["H"], wrong["kernel_ms"], marker="X", s=160, color=style.color, edgecolor="black",
                       linewidth=1.2, zorder=5)
        ends.append((name, float(part["H"].iloc[-1]), float(part["kernel_ms"].iloc[-1])))
    return ends


def _no_timed_cells_figure(frame: pd.DataFrame, what: str, strides: list, sizes: list) -> Figure:
    """One empty panel per stride that says why, as the other figures do when every cell failed."""
    figure, axes = plot.new_figure(1, max(1, len(strides)))
    for ax, stride in zip(axes[0], strides):
        plot.note_on_axes(ax, plot.NO_TIMED_CELLS)
        plot.size_axis(ax, sizes)
        plot.panel_title(ax, f"stride {int(stride)}")
        ax.set_xlabel(plot.SIZE_LABEL)
    axes[0][0].set_ylabel(plot.TIME_LABEL)
    plot.hide_y_ticks(axes[0])
    figure.suptitle(plot.figure_title(frame, what))
    return figure


def time_vs_size_figure(frame: pd.DataFrame) -> Figure:
    """Kernel time against image size, log-log, as small multiples: one row of panels per few kernel groups
    (KERNEL_GROUPS), one column per stride, each row on its own time axis. Within a panel each line has its
    kernel's colour, differs from the others in marker and line style, and is named at its right end; the kernels of the other rows
    are drawn in light grey behind it. Each line is a kernel's best variant at each point, as best_variants
    chooses."""
    what = "Kernel time vs image size"
    if frame.empty:
        return plot.note_figure_object(what, plot.NO_ROWS)
    strides = sorted(frame["stride"].dropna().unique())
    sizes = sorted(frame["H"].dropna().unique())
    best = plot.best_variants(frame)
    best = best[best["kernel_ms"] > 0].copy()  # a log axis has no place for a zero time
    if best.empty:
        return _no_timed_cells_figure(frame, what, strides, sizes)
    best["line"] = plot.with_filter(best, ran_labels(best))
    best["group"] = panel_group(best)
    lines = best.drop_duplicates("line")[["line", "group", "kernel"]]  # a line's first group is its only one
    panels = pack_panels(lines)
    twin_backend = bool(set(best.get("backend", [])) & set(TWIN_BACKENDS))

    texts = [label_text(line).split("\n") for line in lines["line"]]
    label_width = max(len(part) for text in texts for part in text) * LABEL_FONT_SIZE * 0.6 / 72 + 0.5  # inches
    label_rows = max(len(text) for text in texts)
    figure, axes = plot.new_figure(len(panels), len(strides), width=4.2 + label_width, height=3.0)
    figure.set_figheight(3.0 * len(panels) + 1.0)  # 3 in a row of panels, 1 in for the three lines of title
    labelled = []  # (panel, its lines' ends, their styles), labelled once the layout is known
    for row, groups in zip(axes, panels):
        names = plot.natural_order(lines.loc[lines["group"].isin(groups), "line"])
        styles = line_styles(names, dict(zip(lines["line"], lines["kernel"])))
        # On a twin backend the labels name the twin that ran; the GPU groups are worth a title.
        heading = "" if twin_backend else ", ".join(groups) + " · "
        for ax, stride in zip(row, strides):
            ends = _draw_lines(ax, best[best["stride"] == stride], names, styles)
            if not ends:
                plot.note_on_axes(ax, "no timed cell of these kernels\nat this stride")
            labelled.append((ax, ends, styles))
            plot.panel_title(ax, f"{heading}stride {int(stride)}", fontsize=10.5)
            ax.set_yscale("log")
            plot.size_axis(ax, sizes)
        # Each row's time axis spans its own lines only (the grey ones may leave it), so that the close lines of
        # one group are drawn as far apart as they can be.
        times = best.loc[best["line"].isin(names), "kernel_ms"]
        row[0].set_ylim(float(times.min()) / 1.6, float(times.max()) * 1.6)
        row[0].set_ylabel(plot.TIME_LABEL)
        for ax in row:
            log_y_axis(ax)
    for ax in axes[-1]:
        ax.set_xlabel(plot.SIZE_LABEL)

    how = []
    if frame.groupby("kernel")["variant"].nunique().gt(1).any():
        how.append("each line is a kernel's fastest correct variant at each size")
    if len(panels) > 1:
        how.append("grey: the other rows' kernels; each row has its own time axis")
    figure.suptitle("\n".join([plot.figure_title(frame, what), "; ".join(how)] if how else [plot.figure_title(frame, what)]))
    if (best["status"] == WRONG).any():
        figure.legend(handles=plot.legend_handles({}, True), loc="upper center", bbox_to_anchor=(0.5, 0.0),
                      frameon=False)

    figure.tight_layout()  # the panels' final height decides how many decades a label's height spans
    label_height = LABEL_FONT_SIZE * (1.25 * label_rows + 0.35) * figure.dpi / 72  # pixels, a gap included
    for ax, ends, styles in labelled:
        low, high = ax.get_ylim()
        gap = label_height / ax.get_window_extent().height * math.log10(high / low)
        _label_line_ends(ax, ends, styles, gap)
    return figure
