"""The plotting helpers every report figure shares: bare Agg figures saved atomically, notes in place of
empty axes, plain log-axis labels, colour palettes and the natural order of labels; and those the conv2d
figures (figures.py, time_vs_size.py) share: their title, axis labels, size axis and best variants."""

from __future__ import annotations

import io
import re
import textwrap
import weakref
from collections.abc import Iterable
from pathlib import Path

import matplotlib as mpl
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import NullLocator

from convlab.atomicfile import write_bytes_atomically
from convlab.report.aggregate import code_versions
from convlab.report.codelabels import ran_labels
from convlab.status import OK, WRONG

DPI = 120
# A grid of panels that share x, and each row its y (new_figure), laid out in the report's style as tight_layout
# lays it out, without measuring every panel (lay_out_grid): between rows, a one-line panel title; between columns,
# the tick marks; beside the grid, the legend's width. Inches. The margins outside the grid need not fit what they
# hold: save_figure crops the file to what is drawn, wherever it lies.
GRID_ROW_GAP_IN, GRID_COLUMN_GAP_IN = 0.44, 0.2
GRID_MARGINS_IN = {"left": 0.83, "right": 0.14, "top": 0.91, "bottom": 0.58}
# figures laid out by lay_out_grid, which save_figure does not lay out again
_LAID_OUT: weakref.WeakSet[Figure] = weakref.WeakSet()

# The report's look, seaborn's "whitegrid" style in its "notebook" context, as the rcParams they set: drawing needs
# no seaborn, whose import costs a tools worker over a second (scipy.stats, for its statistics). tests/test_report.py
# holds them equal to seaborn's. Its image colormap is left out: no figure draws an image, and seaborn registers
# "rocket" only once it is imported.
WHITEGRID = {
    "figure.facecolor": "white", "axes.labelcolor": ".15", "xtick.direction": "out", "ytick.direction": "out",
    "xtick.color": ".15", "ytick.color": ".15", "axes.axisbelow": True, "grid.linestyle": "-", "text.color": ".15",
    "font.family": ["sans-serif"],
    "font.sans-serif": ["Arial", "DejaVu Sans", "Liberation Sans", "Bitstream Vera Sans", "sans-serif"],
    "lines.solid_capstyle": "round", "patch.edgecolor": "w", "patch.force_edgecolor": True, "xtick.top": False,
    "ytick.right": False, "axes.grid": True, "axes.facecolor": "white", "axes.edgecolor": ".8", "grid.color": ".8",
    "axes.spines.left": True, "axes.spines.bottom": True, "axes.spines.right": True, "axes.spines.top": True,
    "xtick.bottom": False, "ytick.left": False,
}
WHITE = {**WHITEGRID, "axes.grid": False, "axes.edgecolor": ".15"}  # seaborn's "white": no grid, dark frame
NOTEBOOK = {
    "axes.linewidth": 1.25, "grid.linewidth": 1, "lines.linewidth": 1.5, "lines.markersize": 6, "patch.linewidth": 1,
    "xtick.major.width": 1.25, "ytick.major.width": 1.25, "xtick.minor.width": 1, "ytick.minor.width": 1,
    "xtick.major.size": 6, "ytick.major.size": 6, "xtick.minor.size": 4, "ytick.minor.size": 4, "font.size": 12,
    "axes.labelsize": 12, "axes.titlesize": 12, "xtick.labelsize": 11, "ytick.labelsize": 11, "legend.fontsize": 11,
    "legend.title_fontsize": 12,
}
# seaborn's "colorblind" palette
COLORBLIND = ("#0173b2", "#de8f05", "#029e73", "#d55e00", "#cc78bc", "#ca9161", "#fbafe4", "#949494", "#ece133",
              "#56b4e9")


def report_style() -> mpl.rc_context:
    """The report's plotting style for the figures drawn inside it, scoped: matplotlib's global state is left as
    it was (as ``with sns.axes_style("whitegrid"), sns.plotting_context("notebook")`` would)."""
    return mpl.rc_context({**WHITEGRID, **NOTEBOOK})


def mpl_colors(name: str, n: int) -> list[tuple[float, float, float]]:
    """The first ``n`` colours of a qualitative matplotlib colormap (tab10, tab20), as seaborn's color_palette
    gives them; beyond its colours, seaborn's husl palette."""
    colors = mpl.colormaps[name].colors
    if n <= len(colors):
        return [tuple(color[:3]) for color in colors[:n]]
    return husl_colors(n)


def husl_colors(n: int) -> list[tuple[float, float, float]]:
    """seaborn's husl palette: ``n`` evenly spaced hues (for more lines than a qualitative palette has)."""
    import seaborn as sns  # only here, for the rare figure of more than 20 lines: its import is slow

    return list(sns.color_palette("husl", n))


def new_figure(nrows: int, ncols: int, width: float = 4.4, height: float = 3.6, legend_width: float = 0.0,
               share: bool = True) -> tuple[Figure, list[list[Axes]]]:
    """A grid of panels ``width`` x ``height`` each, with ``legend_width`` to their right. ``share``: the
    panels share x, and each row its y."""
    # A bare Agg figure, not pyplot: nothing is registered globally, so nothing is left open.
    figure = Figure(figsize=(width * ncols + legend_width, height * nrows), dpi=DPI)
    FigureCanvasAgg(figure)
    if share:
        axes = figure.subplots(nrows, ncols, squeeze=False, sharex=True, sharey="row")
    else:
        axes = figure.subplots(nrows, ncols, squeeze=False)
    return figure, [list(row) for row in axes]


def lay_out_grid(figure: Figure, legend_width: float = 0.0) -> None:
    """The layout of a grid from new_figure (shared axes) in fixed gaps (GRID_*), where tight_layout would measure
    every tick label of every panel: seconds for a figure of dozens of panels. save_figure keeps it."""
    nrows, ncols = figure.axes[0].get_subplotspec().get_gridspec().get_geometry()
    width, height = figure.get_size_inches()
    margins = GRID_MARGINS_IN
    grid_width = width - margins["left"] - margins["right"] - legend_width
    grid_height = height - margins["top"] - margins["bottom"]
    panel_width = (grid_width - (ncols - 1) * GRID_COLUMN_GAP_IN) / ncols
    panel_height = (grid_height - (nrows - 1) * GRID_ROW_GAP_IN) / nrows
    figure.subplots_adjust(left=margins["left"] / width, right=1 - (margins["right"] + legend_width) / width,
                           bottom=margins["bottom"] / height, top=1 - margins["top"] / height,
                           wspace=GRID_COLUMN_GAP_IN / panel_width, hspace=GRID_ROW_GAP_IN / panel_height)
    _LAID_OUT.add(figure)


def save_figure(figure: Figure, path: Path) -> Path:
    """Lay out (unless lay_out_grid did), crop to what is drawn (as bbox_inches="tight" does) and save as PNG
    beside ``path``, renamed into place: a reader never sees half a figure."""
    if figure not in _LAID_OUT:
        _spines_out_of_layout(figure)
        figure.tight_layout()
    # tight_layout leaves a placeholder layout engine, and with one (or with bbox_inches="tight") savefig draws
    # the whole figure once more, without output, before the real draw. Measuring the crop here costs one
    # pass over the artists instead of two.
    figure.set_layout_engine(None)
    crop = figure.get_tightbbox(figure.canvas.get_renderer()).padded(mpl.rcParams["savefig.pad_inches"])
    buffer = io.BytesIO()
    # zlib's fastest level: the same pixels, a tenth larger, the encoding in half the time
    figure.savefig(buffer, format="png", dpi=DPI, bbox_inches=crop, pil_kwargs={"compress_level": 1})
    write_bytes_atomically(path, buffer.getvalue())
    return Path(path)


def _spines_out_of_layout(figure: Figure) -> None:
    """Leave out of the layout's measurements the spines that would add nothing to it: one at the panel's edge
    with no tick marks drawn (seaborn's whitegrid) covers only the panel itself, yet measuring it updates every
    tick of its axis."""
    for ax in figure.axes:
        for spine in ax.spines.values():
            axis = spine.axis
            if axis is None or spine.get_position() != ("outward", 0.0):
                continue
            ticks = axis.majorTicks[:1] + axis.minorTicks[:1]
            if not any(tick.tick1line.get_visible() or tick.tick2line.get_visible() for tick in ticks):
                spine.set_in_layout(False)


def panel_title(ax: Axes, text: str, **kwargs) -> None:
    """A panel's title just above it, where matplotlib would put it when nothing is drawn above the panel (no
    top tick labels). A title it places itself costs both axes' tick layout on every layout and draw pass."""
    ax.set_title(text, y=1.0, **kwargs)


# The share of the figure's width a note may span, so that the layout keeps its margins
NOTE_SPAN = 0.92


def note_on_axes(ax: Axes, text: str, fontsize: float = 12) -> None:
    """A grey sentence in the middle of a panel: why it has nothing to show. A line wider than the
    figure (which would leave the layout no margins) is wrapped to fit; lines that fit stay as given."""
    note = ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=fontsize,
                   color="0.35")
    figure = ax.get_figure()
    width = note.get_window_extent(figure.canvas.get_renderer()).width
    span = NOTE_SPAN * figure.bbox.width
    if width > span:
        lines = text.splitlines()
        columns = max(20, int(max(map(len, lines)) * span / width))
        note.set_text("\n".join(textwrap.fill(line, columns) if len(line) > columns else line for line in lines))


def note_figure_object(title: str, text: str, width: float = 6.0, height: float = 3.0) -> Figure:
    """A figure that is only a sentence: what is missing and why, in place of empty axes."""
    with mpl.rc_context(WHITE):
        figure, axes = new_figure(1, 1, width=width, height=height)
    ax = axes[0][0]
    note_on_axes(ax, text)
    ax.set_axis_off()
    figure.suptitle(title)
    return figure


def note_figure(path: Path, title: str, text: str, width: float = 6.0, height: float = 3.0) -> Path:
    return save_figure(note_figure_object(title, text, width, height), path)


def natural_key(text: str) -> list:
    # block~8 before block~16: compare the digit runs as numbers.
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text)]


def natural_order(labels: Iterable[str]) -> list[str]:
    return sorted(set(labels), key=natural_key)


def palette_colors(n: int) -> list:
    """Distinct colours: the colour-blind palette up to 10 lines, tab20 (then husl) beyond."""
    if n <= 10:
        return [to_rgb(color) for color in COLORBLIND[:n]]
    return mpl_colors("tab20", n)


# ---- Shared by the conv2d figures of figures.py and time_vs_size.py: their labels, title, best variants and axes

TIMED = (OK, WRONG)  # the only statuses that carry a kernel time
TIME_LABEL = "kernel time (ms, median)"
SIZE_LABEL = "image size (pixels per side)"
WRONG_LABEL = "wrong result (failed float64 check)"
NO_ROWS = "no rows"
NO_TIMED_CELLS = "no timed cells\n(every cell failed)"


def figure_title(frame: pd.DataFrame, what: str) -> str:
    first = frame.iloc[0]
    device = first["device"] or "unknown device"
    mode = f", {first['timing_mode']} timing" if first["timing_mode"] else ""
    versions = code_versions(frame)
    mixed = f"\nWARNING: rows of {len(versions)} code versions mixed" if len(versions) > 1 else ""
    return f"{what}\n{device} (backend {first['backend'] or '?'}{mode}){mixed}"


def with_filter(frame: pd.DataFrame, labels: pd.Series) -> pd.Series:
    # Only name the filter when the run swept several, so the common case stays short.
    if frame["filter_size"].nunique() <= 1:
        return labels
    size = frame["filter_size"].astype("Int64").astype(str)
    return labels + ", " + size + "x" + size


def best_variants(frame: pd.DataFrame) -> pd.DataFrame:
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
    best["label"] = with_filter(best, name.where(~several, name + " (best variant)"))
    return best


def size_axis(ax: Axes, sizes: list[float]) -> None:
    ax.set_xscale("log", base=2)
    if sizes:
        ax.set_xticks(sizes, labels=[str(int(s)) for s in sizes])
        ax.set_xlim(min(sizes) / 1.25, max(sizes) * 1.25)
    ax.xaxis.set_minor_locator(NullLocator())


def hide_y_ticks(axes: list[Axes]) -> None:
    # Without data the autoscaled y range is made up: show no numbers rather than false ones.
    for ax in axes:
        ax.tick_params(axis="y", which="both", labelleft=False)


def legend_handles(palette: dict, any_wrong: bool) -> list[Line2D]:
    handles = [Line2D([], [], color=color, marker="o", label=label) for label, color in palette.items()]
    if any_wrong:
        handles.append(Line2D([], [], color="0.4", marker="X", markersize=11, markeredgecolor="black",
                              linestyle="none", label=WRONG_LABEL))
    return handles
