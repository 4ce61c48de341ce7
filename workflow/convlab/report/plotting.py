"""The plotting helpers every report figure shares: bare Agg figures saved atomically, notes in place of
empty axes, plain log-axis labels, colour palettes and the natural order of labels."""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterable
from pathlib import Path

import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from convlab.atomicfile import write_bytes_atomically

DPI = 120


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


def save_figure(figure: Figure, path: Path) -> Path:
    """Save as PNG beside ``path`` and rename into place: a reader never sees half a figure."""
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    write_bytes_atomically(path, buffer.getvalue())
    return Path(path)


def note_on_axes(ax: Axes, text: str) -> None:
    """A grey sentence in the middle of a panel: why it has nothing to show."""
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=12, color="0.35")


def note_figure_object(title: str, text: str, width: float = 6.0, height: float = 3.0) -> Figure:
    """A figure that is only a sentence: what is missing and why, in place of empty axes."""
    with sns.axes_style("white"):
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


def plain_tick(value: float, _position: object = None) -> str:
    return f"{value:g}"


def log_y_axis(ax: Axes) -> None:
    """Log y with plain numbers (0.01, not 10^-2), labelling more minor ticks the fewer decades show."""
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(plain_tick))
    low, high = ax.get_ylim()
    decades = math.log10(high / low) if low > 0 else math.inf
    # Leading digits of the labelled minor ticks: enough to read a value, too few to collide.
    digits = "2345678" if decades < 0.5 else "23457" if decades < 1 else "25" if decades < 3 else ""
    if digits:
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: plain_tick(v) if f"{v:.0e}"[0] in digits else ""))
        ax.grid(True, which="minor", axis="y", linewidth=0.5, alpha=0.5)
    else:
        ax.yaxis.set_minor_formatter(NullFormatter())


def palette_colors(n: int) -> list:
    """Distinct colours: the colour-blind palette up to 10 lines, tab20 (then husl) beyond."""
    if n <= 10:
        return sns.color_palette("colorblind", n)
    return sns.color_palette("tab20", n) if n <= 20 else sns.color_palette("husl", n)
