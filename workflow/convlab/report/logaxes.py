"""Log axes as the report draws them: plain numbers (0.01, not 10^-2), the minor ticks labelled by how many
decades show, and no tick made that draws nothing (a tick is the costliest thing a panel draws: its lines and
labels, made and laid out one by one)."""

from __future__ import annotations

import math
from collections.abc import Callable

import matplotlib as mpl
import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.collections import LineCollection
from matplotlib.ticker import FuncFormatter, Locator, NullFormatter, NullLocator


def plain_tick(value: float, _position: object = None) -> str:
    return f"{value:g}"


class InViewLocator(Locator):
    """``locator``'s ticks that fall inside the axis' view (and, with ``keep``, those it keeps). A log locator also
    returns ticks a decade or more beyond the view: they are never drawn, but each costs a tick object and its
    update on every layout pass. Only for formatters that label each value on its own (FuncFormatter,
    NullFormatter): a ScalarFormatter picks its precision from every tick it is given."""

    def __init__(self, locator: Locator, keep: Callable[[float], bool] | None = None) -> None:
        self.locator = locator
        self.keep = keep

    def set_axis(self, axis: Axis) -> None:
        self.axis = axis
        self.locator.set_axis(axis)

    def __call__(self) -> np.ndarray:
        values = np.asarray(self.locator(), dtype=float)
        transform = self.axis.get_transform()
        low, high = sorted(transform.transform(np.asarray(self.axis.get_view_interval(), dtype=float)))
        # wider than matplotlib's own margins (what it draws, and which minor ticks a major one hides): every
        # tick that could matter is kept, and matplotlib decides as before
        margin = (high - low) * 1e-3
        with np.errstate(invalid="ignore", divide="ignore"):
            where = transform.transform(values)
        values = values[(where >= low - margin) & (where <= high + margin)]
        return values if self.keep is None else np.array([v for v in values if self.keep(float(v))], dtype=float)

    def tick_values(self, vmin: float, vmax: float) -> np.ndarray:
        return self.locator.tick_values(vmin, vmax)

    def view_limits(self, vmin: float, vmax: float) -> tuple[float, float]:
        return self.locator.view_limits(vmin, vmax)

    def nonsingular(self, v0: float, v1: float) -> tuple[float, float]:
        return self.locator.nonsingular(v0, v1)

    def set_params(self, **kwargs) -> None:
        self.locator.set_params(**kwargs)


def ticks_in_view(axis: Axis) -> None:
    """Wrap the axis' locators in InViewLocator (see there for the formatters this suits), once."""
    if not isinstance(axis.get_major_locator(), InViewLocator):
        axis.set_major_locator(InViewLocator(axis.get_major_locator()))
    if not isinstance(axis.get_minor_locator(), InViewLocator):
        axis.set_minor_locator(InViewLocator(axis.get_minor_locator()))


def log_y_axis(ax: Axes) -> None:
    """Log y with plain numbers (0.01, not 10^-2), labelling more minor ticks the fewer decades show."""
    log_axis(ax, "y")


def log_axis(ax: Axes, which: str) -> None:
    """Log ``which`` axis ("x" or "y") with plain numbers, as log_y_axis() draws y."""
    axis = ax.yaxis if which == "y" else ax.xaxis
    ax.set_yscale("log") if which == "y" else ax.set_xscale("log")
    axis.set_major_formatter(FuncFormatter(plain_tick))
    low, high = ax.get_ylim() if which == "y" else ax.get_xlim()
    decades = math.log10(high / low) if low > 0 else math.inf
    # Leading digits of the labelled minor ticks: enough to read a value, too few to collide.
    digits = "2345678" if decades < 0.5 else "23457" if decades < 1 else "25" if decades < 3 else ""
    # A tick is the costliest thing a panel draws (its lines and labels, made and laid out one by one): of
    # matplotlib's minor ticks only the labelled ones are made, and its minor grid lines are one artist (MinorGrid).
    if digits:
        def labelled(value: float) -> bool:
            return f"{value:.0e}"[0] in digits

        axis.set_minor_formatter(FuncFormatter(lambda value, _: plain_tick(value) if labelled(value) else ""))
        every_minor = axis.get_minor_locator()  # the log scale's own
        axis.set_minor_locator(InViewLocator(every_minor, keep=labelled))
        MinorGrid.add_to(ax, which, every_minor)
    else:  # no label and no grid line: a minor tick would draw nothing
        axis.set_minor_locator(NullLocator())
        axis.set_minor_formatter(NullFormatter())
    ticks_in_view(axis)


class MinorGrid(Artist):
    """The grid lines of an axis' minor ticks, in the style of ax.grid(which="minor", linewidth=0.5, alpha=0.5),
    drawn as one artist of the panel (not one of its collections, which stand for data): where ``locator`` puts
    the minor ticks in view, less those on a major tick, as matplotlib draws them."""

    def __init__(self, ax: Axes, which: str, locator: Locator) -> None:
        super().__init__()
        self.which = which
        self.axis = ax.yaxis if which == "y" else ax.xaxis
        self.locator = locator
        transform = ax.get_yaxis_transform() if which == "y" else ax.get_xaxis_transform()
        self.lines = LineCollection([], transform=transform, colors=mpl.rcParams["grid.color"], linewidths=0.5,
                                    alpha=0.5, linestyles=mpl.rcParams["grid.linestyle"])
        self.lines.set_figure(ax.figure)
        # just under the axis' own artists (its major grid lines): axes.axisbelow puts those at 0.5
        self.set_zorder(0.49)
        self.set_in_layout(False)

    @classmethod
    def add_to(cls, ax: Axes, which: str, locator: Locator) -> None:
        """The axis' minor grid, once (a second call gives it the new locator)."""
        for child in ax.artists:
            if isinstance(child, cls) and child.which == which:
                child.locator = locator
                return
        ax.add_artist(cls(ax, which, locator))

    def positions(self) -> np.ndarray:
        """Where the grid lines are drawn: matplotlib's minor ticks in view, but for those on a major tick."""
        transform = self.axis.get_transform()
        low, high = sorted(transform.transform(np.asarray(self.axis.get_view_interval(), dtype=float)))
        values = np.asarray(self.locator.tick_values(*self.axis.get_view_interval()), dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            where = transform.transform(values)
            majors = transform.transform(np.asarray(self.axis.get_majorticklocs(), dtype=float))
        tolerance = (high - low) * 1e-5  # matplotlib's own, for a minor tick on a major one
        on_major = np.isclose(where[:, None], majors[None, :], atol=tolerance, rtol=0).any(axis=1)
        return values[(where >= low) & (where <= high) & ~on_major]

    def draw(self, renderer) -> None:
        if not self.get_visible():
            return
        self.lines.set_segments([[(0.0, v), (1.0, v)] if self.which == "y" else [(v, 0.0), (v, 1.0)]
                                 for v in self.positions()])
        self.lines.draw(renderer)
