"""One colour per kernel, the same in every figure: a kernel is one colour in the time, GFLOP/s and
floor figures, and a group of kernels in the rooflines is the colour of its first kernel.

The map is fixed by the kernel registry, not by which kernels a figure happens to draw: the first
kernel of each group (KERNEL_GROUPS, then by name), then the others of each group, take the colours
of PALETTE in turn; a kernel the registry does not name (one added for a test) takes the next free
colour by its name."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

import matplotlib as mpl

from convlab.plan.registry import RegistryError, load_registry

# Kernel name prefix -> the kernel group shown in the legend (first match wins); anything else is its own group.
KERNEL_GROUPS = [("im2col_gemm", "im2col + own GEMM"), ("im2col_cublas", "im2col + cuBLAS"), ("cudnn", "cuDNN"),
                 ("winograd", "Winograd"), ("tiled", "tiled (shared memory)"), ("direct", "direct"),
                 ("conv_naive", "direct"), ("sgemm", "own SGEMM"), ("cublas", "cuBLAS"), ("fft", "FFT"),
                 ("ndimage", "ndimage"), ("conv_floor", "copy floor kernel")]

Color = tuple[float, float, float]


def _palette() -> list[Color]:
    """Colours readable as lines and as text on white, neighbours far apart in hue (a group's kernels
    are neighbours): tab10 without its grey (a figure's context lines are grey) and its olive, then
    the dark shades of tab20b and tab20c, then lighter ones, the palest last; 32 in all."""
    def shades(name: str, index: int, hues: range) -> list[Color]:
        colors = mpl.colormaps[name].colors
        return [tuple(colors[4 * hue + index][:3]) for hue in hues]

    tab10 = [tuple(c[:3]) for c in mpl.colormaps["tab10"].colors]
    strong = [color for i, color in enumerate(tab10) if i not in (7, 8)]  # grey, olive
    return (strong + shades("tab20b", 0, range(5)) + shades("tab20c", 0, range(4)) + shades("tab20b", 1, range(5))
            + shades("tab20c", 1, range(4)) + [tab10[8]] + shades("tab20b", 2, range(5)))


PALETTE: list[Color] = _palette()


def kernel_group(kernel: str) -> str:
    """The group a kernel is shown in (KERNEL_GROUPS), or its own name."""
    for prefix, name in KERNEL_GROUPS:
        if kernel.startswith(prefix):
            return name
    return kernel


def group_rank(kernel: str) -> int:
    """Where a kernel's group stands in KERNEL_GROUPS (the others after them)."""
    return next((i for i, (prefix, _) in enumerate(KERNEL_GROUPS) if kernel.startswith(prefix)), len(KERNEL_GROUPS))


@cache
def registry_order() -> tuple[str, ...]:
    """The registry's kernels in colour order (none where the registry cannot be read)."""
    try:
        names = list(load_registry())
    except RegistryError:
        names = []
    ranked = sorted(names, key=lambda name: (group_rank(name), name))
    leads = list({kernel_group(name): name for name in reversed(ranked)}.values())[::-1]
    # each group's first kernel takes the strongest colours, the rest of each group the others: the
    # kernels most figures draw together (one of a family) never share a hue
    return tuple(sorted(leads, key=ranked.index) + [name for name in ranked if name not in leads])


def kernel_colors(kernels: Iterable[str]) -> dict[str, Color]:
    """The colour of each of ``kernels`` in the one map."""
    order = registry_order()
    colors = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(order)}
    extra = sorted(set(kernels) - set(colors))
    colors.update({name: PALETTE[(len(order) + i) % len(PALETTE)] for i, name in enumerate(extra)})
    return {name: colors[name] for name in kernels}


def group_color(kernels: Iterable[str]) -> Color:
    """The colour of a legend entry that stands for several ``kernels`` (a roofline's group): that
    of the first of them in the map's order, so that it is the colour that kernel has in the other
    figures, and two entries never take one colour."""
    order = {name: i for i, name in enumerate(registry_order())}
    first = min(set(kernels), key=lambda name: (order.get(name, len(order)), name))
    return kernel_colors([first])[first]
