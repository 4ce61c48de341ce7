"""One colour per kernel, the same in every figure: a kernel is one colour in the time, GFLOP/s and
floor figures, and a group of kernels in the rooflines is the colour of its group's first kernel.

The map is fixed by the kernel registry, not by which kernels a figure happens to draw: the
kernels in the order of their groups (KERNEL_GROUPS: related families neighbours), then by name,
take the colours of PALETTE in turn; a kernel the registry does not name (one added for a test)
takes the next free colour by its name."""

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
    """tab20's ten strong colours, then its ten light ones, then tab20b's: neighbours in the kernel
    order (a group's kernels) differ in hue, and 40 kernels get a colour each."""
    tab20 = [tuple(c[:3]) for c in mpl.colormaps["tab20"].colors]
    tab20b = [tuple(c[:3]) for c in mpl.colormaps["tab20b"].colors]
    return tab20[0::2] + tab20[1::2] + tab20b


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
    return tuple(sorted(names, key=lambda name: (group_rank(name), name)))


def kernel_colors(kernels: Iterable[str]) -> dict[str, Color]:
    """The colour of each of ``kernels`` in the one map."""
    order = registry_order()
    colors = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(order)}
    extra = sorted(set(kernels) - set(colors))
    colors.update({name: PALETTE[(len(order) + i) % len(PALETTE)] for i, name in enumerate(extra)})
    return {name: colors[name] for name in kernels}


def group_color(kernels: Iterable[str]) -> Color:
    """The colour of a legend entry that stands for several ``kernels`` (a roofline's group): that
    of the first kernel, in the map's order, of the group of the first of them, whichever of its
    kernels a figure draws."""
    order = {name: i for i, name in enumerate(registry_order())}
    ranked = sorted(set(kernels), key=lambda name: (order.get(name, len(order)), name))
    group = kernel_group(ranked[0])
    lead = next((name for name in registry_order() if kernel_group(name) == group), ranked[0])
    return kernel_colors([lead])[lead]
