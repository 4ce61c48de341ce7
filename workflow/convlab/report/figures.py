"""Figures and the failed-cell table of the Snakemake report, drawn from the summary CSV."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import NullLocator
from matplotlib.transforms import blended_transform_factory

from convlab.aggregate import code_versions
from convlab.families import FAMILIES
from convlab.report.codelabels import TWIN_BACKENDS, kernel_labels, ran_labels, short_implementation
from convlab.report.pages import html_page, write_page
from convlab.report.plotting import (
    log_y_axis,
    natural_key,
    natural_order,
    new_figure,
    note_figure,
    note_figure_object,
    note_on_axes,
    palette_colors,
    save_figure,
)
from convlab.report.roofline import KERNEL_GROUPS, kernel_group
from convlab.status import ERROR, INVALID_CONFIG, OK, OOM, STATUSES, UNSUPPORTED, WRONG

TIMED = (OK, WRONG)  # the only statuses that carry a kernel time
NUMERIC = ("H", "stride", "filter_size", "kernel_ms", "gflops", "pct_of_floor")
STATUS_COLORS = {
    OK: "#2a9d4b", WRONG: "#d62728", INVALID_CONFIG: "#ff7f0e",
    OOM: "#9467bd", UNSUPPORTED: "#8c8c8c", ERROR: "#3b3b3b",
}
TIME_LABEL = "kernel time (ms, median)"
SIZE_LABEL = "image size (pixels per side)"
WRONG_LABEL = "wrong result (failed float64 check)"
NO_ROWS = "no rows"
NO_TIMED_CELLS = "no timed cells\n(every cell failed)"


def _load(summary_csv: str | Path) -> pd.DataFrame:
    frame = pd.read_csv(summary_csv, dtype=str, keep_default_na=False)
    for column in NUMERIC:
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    return frame


def _title(frame: pd.DataFrame, what: str) -> str:
    first = frame.iloc[0]
    device = first["device"] or "unknown device"
    mode = f", {first['timing_mode']} timing" if first["timing_mode"] else ""
    versions = code_versions(frame)
    mixed = f"\nWARNING: rows of {len(versions)} code versions mixed" if len(versions) > 1 else ""
    return f"{what}\n{device} (backend {first['backend'] or '?'}{mode}){mixed}"


def _with_filter(frame: pd.DataFrame, labels: pd.Series) -> pd.Series:
    # Only name the filter when the run swept several, so the common case stays short.
    if frame["filter_size"].nunique() <= 1:
        return labels
    size = frame["filter_size"].astype("Int64").astype(str)
    return labels + ", " + size + "x" + size


def _best_variants(frame: pd.DataFrame) -> pd.DataFrame:
    """One timed row per kernel, filter, size and stride: its fastest variant, labelled for the legend.

    A correct variant beats a faster wrong one (a wrong answer is not a speed); a point is only
    wrong when every timed variant there is wrong.
    """
    variants = frame.groupby("kernel")["variant"].nunique()
    timed = frame[frame["status"].isin(TIMED) & frame["kernel_ms"].notna()].copy()
    timed["_wrong"] = timed["status"] == WRONG
    keys = ["kernel", "filter_size", "H", "stride"]
    best = timed.sort_values(["_wrong", "kernel_ms"]).drop_duplicates(keys).sort_values(keys)
    several = best["kernel"].map(variants) > 1
    name = ran_labels(best)  # on the cpu backend: the twin that ran, not the GPU kernel's name alone
    best["label"] = _with_filter(best, name.where(~several, name + " (best variant)"))
    return best


def _natural_column(column: pd.Series) -> pd.Series:
    # The same order for a sort_values key: zero-pad digit runs so text order is numeric order.
    return column.str.replace(r"\d+", lambda m: m.group().zfill(12), regex=True)


def _size_axis(ax: Axes, sizes: list[float]) -> None:
    ax.set_xscale("log", base=2)
    if sizes:
        ax.set_xticks(sizes, labels=[str(int(s)) for s in sizes])
        ax.set_xlim(min(sizes) / 1.25, max(sizes) * 1.25)
    ax.xaxis.set_minor_locator(NullLocator())


def _hide_y_ticks(axes: list[Axes]) -> None:
    # Without data the autoscaled y range is made up: show no numbers rather than false ones.
    for ax in axes:
        ax.tick_params(axis="y", which="both", labelleft=False)


def _lines(ax: Axes, data: pd.DataFrame, y: str, palette: dict) -> bool:
    """One line per label, wrong points overdrawn with a large X; True when any point is wrong."""
    data = data[data[y].notna()]
    if data.empty:
        return False
    sns.lineplot(data=data, x="H", y=y, hue="label", palette=palette, estimator=None, sort=True,
                 marker="o", markersize=6, legend=False, ax=ax)
    wrong = data[data["status"] == WRONG]
    if not wrong.empty:
        sns.scatterplot(data=wrong, x="H", y=y, hue="label", palette=palette, marker="X", s=160,
                        edgecolor="black", linewidth=1.2, legend=False, ax=ax, zorder=5)
    return not wrong.empty


def _legend_handles(palette: dict, any_wrong: bool) -> list[Line2D]:
    handles = [Line2D([], [], color=color, marker="o", label=label) for label, color in palette.items()]
    if any_wrong:
        handles.append(Line2D([], [], color="0.4", marker="X", markersize=11, markeredgecolor="black",
                              linestyle="none", label=WRONG_LABEL))
    return handles


def _by_stride(frame: pd.DataFrame, path: Path, what: str, y: str, ylabel: str,
               logy: bool, floor_line: bool = False) -> Path:
    """The shared layout of the three headline figures: one column per stride, one line per kernel."""
    if frame.empty:
        return note_figure(path, what, NO_ROWS)
    best = _best_variants(frame)
    strides = sorted(frame["stride"].dropna().unique())
    sizes = sorted(frame["H"].dropna().unique())
    labels = natural_order(best["label"])
    palette = dict(zip(labels, palette_colors(len(labels))))
    figure, axes = new_figure(1, len(strides))
    any_wrong = False
    for ax, stride in zip(axes[0], strides):
        part = best[(best["stride"] == stride) & best[y].notna()]
        any_wrong |= _lines(ax, part, y, palette)
        if part.empty:
            note_on_axes(ax, NO_TIMED_CELLS)
        _size_axis(ax, sizes)
        if floor_line:
            ax.axhline(100, color="0.3", linestyle="--", linewidth=1.2)
            top = max(110.0, float(best[y].max()) * 1.08) if best[y].notna().any() else 110.0
            ax.set_ylim(0, top)
        ax.set_title(f"stride {int(stride)}")
        ax.set_xlabel(SIZE_LABEL)
        ax.set_ylabel(ylabel if ax is axes[0][0] else "")
    if logy:  # after every panel is drawn: the shared limits decide which ticks get labels
        for ax in axes[0]:
            log_y_axis(ax)
    if best[y].isna().all() and not floor_line:  # the floor figure fixes its own 0-110 range
        _hide_y_ticks(axes[0])
    figure.suptitle(_title(frame, what))
    handles = _legend_handles(palette, any_wrong)
    if floor_line:
        handles.append(Line2D([], [], color="0.3", linestyle="--", label="memory-bandwidth floor"))
    if handles:
        figure.legend(handles=handles, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    return save_figure(figure, path)


# ---- Kernel time vs size: small multiples, one row of panels per few kernel groups, every line named at its end

MAX_LINES_PER_PANEL = 6  # more and one panel's lines crowd again; small groups share a panel up to this
LINE_MARKERS = ("o", "s", "^", "D", "v", "P", "*")  # never "X": a large X marks a wrong result
LINE_STYLES = ("-", "--", "-.", ":")
# Okabe-Ito's colour-blind safe colours without its yellow (unreadable as text on white), ordered so that
# neighbours in a panel contrast most; 8 colours against 7 markers keeps the three cycles out of step.
LINE_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#000000", "#E69F00", "#56B4E9", "#8C564B")
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
    color: str
    marker: str
    linestyle: str


def line_styles(names: list[str]) -> dict[str, LineStyle]:
    """Per line name, in the given order: colour, marker and line style each cycle on their own, so that up to 4
    lines differ in all three, up to 7 in colour and marker, and no two of up to 56 share the same three."""
    return {name: LineStyle(LINE_COLORS[i % len(LINE_COLORS)], LINE_MARKERS[i % len(LINE_MARKERS)],
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


def _group_rank(kernel: str) -> int:
    return next((i for i, (prefix, _) in enumerate(KERNEL_GROUPS) if kernel.startswith(prefix)), len(KERNEL_GROUPS))


def pack_panels(lines: pd.DataFrame) -> list[list[str]]:
    """The groups of each panel row. ``lines`` has one row per line, with its ``group`` and ``kernel``. Groups
    keep the order of KERNEL_GROUPS (related families are neighbours there), and neighbours share a panel while
    it holds at most MAX_LINES_PER_PANEL lines; a larger group gets a panel of its own, never split."""
    rank = lines.groupby("group")["kernel"].agg(lambda kernels: min(map(_group_rank, kernels)))
    counts = lines.groupby("group").size()
    panels: list[list[str]] = []
    filled = 0
    for group in sorted(counts.index, key=lambda name: (rank[name], natural_key(name))):
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
    figure, axes = new_figure(1, max(1, len(strides)))
    for ax, stride in zip(axes[0], strides):
        note_on_axes(ax, NO_TIMED_CELLS)
        _size_axis(ax, sizes)
        ax.set_title(f"stride {int(stride)}")
        ax.set_xlabel(SIZE_LABEL)
    axes[0][0].set_ylabel(TIME_LABEL)
    _hide_y_ticks(axes[0])
    figure.suptitle(_title(frame, what))
    return figure


def time_vs_size_figure(frame: pd.DataFrame) -> Figure:
    """Kernel time against image size, log-log, as small multiples: one row of panels per few kernel groups
    (KERNEL_GROUPS), one column per stride, each row on its own time axis. Within a panel each line differs from
    the others in colour, marker and line style and is named at its right end; the kernels of the other rows
    are drawn in light grey behind it. Each line is a kernel's best variant at each point, as _best_variants
    chooses."""
    what = "Kernel time vs image size"
    if frame.empty:
        return note_figure_object(what, NO_ROWS)
    strides = sorted(frame["stride"].dropna().unique())
    sizes = sorted(frame["H"].dropna().unique())
    best = _best_variants(frame)
    best = best[best["kernel_ms"] > 0].copy()  # a log axis has no place for a zero time
    if best.empty:
        return _no_timed_cells_figure(frame, what, strides, sizes)
    best["line"] = _with_filter(best, ran_labels(best))
    best["group"] = panel_group(best)
    lines = best.drop_duplicates("line")[["line", "group", "kernel"]]  # a line's first group is its only one
    panels = pack_panels(lines)
    twin_backend = bool(set(best.get("backend", [])) & set(TWIN_BACKENDS))

    texts = [label_text(line).split("\n") for line in lines["line"]]
    label_width = max(len(part) for text in texts for part in text) * LABEL_FONT_SIZE * 0.6 / 72 + 0.5  # inches
    label_rows = max(len(text) for text in texts)
    figure, axes = new_figure(len(panels), len(strides), width=4.2 + label_width, height=3.0)
    figure.set_figheight(3.0 * len(panels) + 1.0)  # 3 in a row of panels, 1 in for the three lines of title
    labelled = []  # (panel, its lines' ends, their styles), labelled once the layout is known
    for row, groups in zip(axes, panels):
        names = natural_order(lines.loc[lines["group"].isin(groups), "line"])
        styles = line_styles(names)
        # On a twin backend the labels name the twin that ran; the GPU groups are worth a title.
        heading = "" if twin_backend else ", ".join(groups) + " · "
        for ax, stride in zip(row, strides):
            ends = _draw_lines(ax, best[best["stride"] == stride], names, styles)
            if not ends:
                note_on_axes(ax, "no timed cell of these kernels\nat this stride")
            labelled.append((ax, ends, styles))
            ax.set_title(f"{heading}stride {int(stride)}", fontsize=10.5)
            ax.set_yscale("log")
            _size_axis(ax, sizes)
        # Each row's time axis spans its own lines only (the grey ones may leave it), so that the close lines of
        # one group are drawn as far apart as they can be.
        times = best.loc[best["line"].isin(names), "kernel_ms"]
        row[0].set_ylim(float(times.min()) / 1.6, float(times.max()) * 1.6)
        row[0].set_ylabel(TIME_LABEL)
        for ax in row:
            log_y_axis(ax)
    for ax in axes[-1]:
        ax.set_xlabel(SIZE_LABEL)

    how = []
    if frame.groupby("kernel")["variant"].nunique().gt(1).any():
        how.append("each line is a kernel's fastest correct variant at each size")
    if len(panels) > 1:
        how.append("grey: the other rows' kernels; each row has its own time axis")
    figure.suptitle("\n".join([_title(frame, what), "; ".join(how)] if how else [_title(frame, what)]))
    if (best["status"] == WRONG).any():
        figure.legend(handles=_legend_handles({}, True), loc="upper center", bbox_to_anchor=(0.5, 0.0),
                      frameon=False)

    figure.tight_layout()  # the panels' final height decides how many decades a label's height spans
    label_height = LABEL_FONT_SIZE * (1.25 * label_rows + 0.35) * figure.dpi / 72  # pixels, a gap included
    for ax, ends, styles in labelled:
        low, high = ax.get_ylim()
        gap = label_height / ax.get_window_extent().height * math.log10(high / low)
        _label_line_ends(ax, ends, styles, gap)
    return figure


def single_variant_reason(frame: pd.DataFrame) -> str:
    """Why the variants figure has nothing to draw, in the words of a user who has not read the code."""
    kernels = frame["kernel"].nunique()
    text = (f"Each of the {kernels} kernel{'s' if kernels != 1 else ''} in this run has a single variant,\n"
            "so there is no tunable to compare (its one line is in 'time vs size').\n\n")
    backends = set(frame["backend"]) if "backend" in frame.columns else set()
    if backends & set(TWIN_BACKENDS):
        return text + ("On the cpu backend every kernel runs its cpu twin (numpy or OpenCV),\n"
                       "which has no tunables: the block sizes and cuDNN plans that are\n"
                       "the variants on a GPU do not apply. Run with backend cuda to see them.")
    return text + ("Every tunable lists one value in this configuration: give a kernel several\n"
                   "(e.g. kernels: {direct: {block: [8, 16, 32]}} in the config) to sweep it.")


def variants_figure(frame: pd.DataFrame) -> Figure:
    """Every variant of each kernel that has several: does the tunable matter, and where? Without any such
    kernel, a figure that says why."""
    what = "Kernel time of every variant"
    if frame.empty:
        return note_figure_object(what, NO_ROWS)
    counts = frame.groupby("kernel")["variant"].nunique()
    kernels = sorted(counts[counts > 1].index)
    if not kernels:
        return note_figure_object(_title(frame, what), single_variant_reason(frame), width=9.0, height=3.6)
    strides = sorted(frame["stride"].dropna().unique())
    sizes = sorted(frame["H"].dropna().unique())
    timed = frame[frame["status"].isin(TIMED) & frame["kernel_ms"].notna()].copy()
    timed["label"] = _with_filter(timed, timed["variant"])
    names = kernel_labels(frame)
    # Room for the per-row legends, which tight_layout would otherwise take from the panels.
    figure, axes = new_figure(len(kernels), len(strides), legend_width=3.2)
    for row, kernel in zip(axes, kernels):
        mine = timed[timed["kernel"] == kernel]
        all_labels = natural_order(_with_filter(frame, frame["variant"])[frame["kernel"] == kernel])
        palette = dict(zip(all_labels, palette_colors(len(all_labels))))
        any_wrong = False
        for ax, stride in zip(row, strides):
            part = mine[mine["stride"] == stride]
            any_wrong |= _lines(ax, part, "kernel_ms", palette)
            if part.empty:
                note_on_axes(ax, NO_TIMED_CELLS)
            _size_axis(ax, sizes)
            ax.set_title(f"{names.get(kernel, kernel)}, stride {int(stride)}")
            ax.set_xlabel(SIZE_LABEL)
            ax.set_ylabel(TIME_LABEL if ax is row[0] else "")
        for ax in row:
            log_y_axis(ax)
        if mine.empty:
            _hide_y_ticks(row)
        # Variants that never produced a time still get a legend entry, marked as such.
        handles = _legend_handles(palette, any_wrong)
        for handle in handles:
            label = handle.get_label()
            if label in palette and mine[mine["label"] == label].empty:
                handle.set_label(f"{label} (no timed cell)")
        row[-1].legend(handles=handles, title=f"{kernel} ({counts[kernel]} variants)",
                       loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False)
    figure.suptitle(_title(frame, what))
    return figure


EXPERIMENT_ORDER = tuple(FAMILIES)


def status_figure(frame: pd.DataFrame) -> Figure:
    """Every cell of the summary, whatever its experiment: one stacked bar per experiment and kernel, split by
    status, so that the bars add up to the summary's row count (the title says it)."""
    what = "Outcome of every cell"
    if frame.empty:
        return note_figure_object(what, NO_ROWS)
    frame = frame.assign(experiment=frame["experiment"] if "experiment" in frame.columns else "conv2d")
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
    ax.set_title(_title(frame, f"{what}: {summary}"))
    ax.legend(title="status", loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False)
    return figure


def render_figures(summary_csv: str | Path, outdir: str | Path) -> list[Path]:
    """Write the report's five PNGs into ``outdir`` and return their paths.

    The four kernel figures draw the conv2d experiment's rows; status.png counts every cell of the summary.
    Works on any summary, including a header-only one or one where every cell failed.
    """
    everything = _load(summary_csv)
    frame = everything
    if "experiment" in frame.columns:  # the other families have figures of their own (seedfigures, roofline)
        frame = frame[frame["experiment"] == "conv2d"]
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    # Scoped style instead of sns.set_theme(): rendering leaves matplotlib's global state alone.
    with sns.axes_style("whitegrid"), sns.plotting_context("notebook"):
        return [
            save_figure(time_vs_size_figure(frame), outdir / "time_vs_size.png"),
            _by_stride(frame, outdir / "gflops_vs_size.png", "Throughput vs image size", "gflops",
                       "throughput (GFLOP/s)", logy=True),
            _by_stride(frame, outdir / "pct_of_floor_vs_size.png", "Distance from the memory floor",
                       "pct_of_floor", "% of memory-bandwidth floor\n(100 = at floor)", logy=False,
                       floor_line=True),
            save_figure(variants_figure(frame), outdir / "variants.png"),
            save_figure(status_figure(everything), outdir / "status.png"),  # every cell, not conv2d alone
        ]


def status_table_html(summary_csv: str | Path, out_html: str | Path) -> Path:
    """Write a standalone HTML page listing every cell whose status is not ok."""
    frame = _load(summary_csv)
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
    return write_page(out_html, html_page(title, style, f"<h2>{title}</h2>\n{body}"))
