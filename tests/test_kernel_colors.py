"""One colour per kernel in every figure (convlab.report.kernelcolors): the time figure's lines, the
GFLOP/s figure's legend and the rooflines' groups agree, whichever kernels a figure draws."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.colors import to_hex

from convlab.plan.registry import load_registry
from convlab.report.figures import gflops_figure
from convlab.report.kernelcolors import group_color, kernel_colors, kernel_group, registry_order
from convlab.report.roofline import roofline_figure
from convlab.report.time_vs_size import KERNEL_LINE, time_vs_size_figure

KERNELS = ("direct", "cudnn", "cudnn_tf32", "im2col_gemm_shared", "fft", "winograd")


def summary(kernels: tuple[str, ...]) -> pd.DataFrame:
    rows = []
    for index, kernel in enumerate(kernels):
        for size in (256, 512, 1024):
            ms = 0.01 * (1 + index) * (size / 256) ** 2
            flops = 18.0 * size * size
            rows.append({"experiment": "conv2d", "kernel": kernel, "variant": "default", "backend": "cuda",
                         "implementation": f"{kernel}.cu", "H": float(size), "W": float(size), "filter_size": 3.0,
                         "stride": 1.0, "status": "ok", "reason": "", "kernel_ms": ms, "gflops": flops / ms / 1e6,
                         "pct_of_floor": 50.0, "flops": flops, "bytes": 24.0 * size * size,
                         "device": "NVIDIA H200", "timing_mode": "warm", "code_version": "v1", "engine": ""})
    return pd.DataFrame(rows)


def hexes(mapping: dict) -> dict[str, str]:
    return {name: to_hex(color) for name, color in mapping.items()}


def test_every_registered_kernel_has_its_own_colour_fixed_by_the_registry():
    names = list(load_registry())
    colors = hexes(kernel_colors(names))
    assert len(set(colors.values())) == len(names)  # no two kernels share one
    # a figure that draws a few kernels colours them as a figure of all of them does
    assert hexes(kernel_colors(["fft", "direct"])) == {"fft": colors["fft"], "direct": colors["direct"]}
    # a kernel the registry does not name takes a colour of its own, not a registered kernel's
    extra = to_hex(kernel_colors(["planted_kernel"])["planted_kernel"])
    assert len(names) < 40 and extra not in colors.values()
    # a legend entry of several kernels is its first kernel's colour, as that kernel is elsewhere
    cudnn = [name for name in registry_order() if kernel_group(name) == "cuDNN"]
    assert to_hex(group_color(reversed(cudnn))) == colors[cudnn[0]]
    assert to_hex(group_color(["cudnn_tf32_nchw"])) == colors["cudnn_tf32_nchw"]
    # readable on white and never the grey of a figure's context lines
    assert all(max(color) - min(color) > 0.15 for color in kernel_colors(names).values())


def test_the_time_and_gflops_figures_and_the_roofline_give_a_kernel_one_colour():
    frame = summary(KERNELS)
    expected = hexes(kernel_colors(KERNELS))
    time_figure = time_vs_size_figure(frame)
    drawn = {line.get_label(): to_hex(line.get_color()) for ax in time_figure.axes for line in ax.get_lines()
             if line.get_gid() == KERNEL_LINE}
    assert drawn == {kernel: expected[kernel] for kernel in KERNELS}
    gflops = gflops_figure(frame)
    legend = {handle.get_label(): to_hex(handle.get_color()) for legend in gflops.legends
              for handle in legend.legend_handles if handle.get_label() in KERNELS}
    assert legend == {kernel: expected[kernel] for kernel in KERNELS}
    roofline = roofline_figure(frame, {"copy_gbps": 4000.0}, {"sgemm_gflops": 50000.0})
    groups = {handle.get_label(): to_hex(handle.get_color()) for ax in roofline.axes if ax.get_legend()
              for handle in ax.get_legend().legend_handles}
    groups.update({handle.get_label(): to_hex(handle.get_color()) for legend in roofline.legends
                   for handle in legend.legend_handles})
    assert groups["direct"] == expected["direct"] and groups["FFT"] == expected["fft"]
    assert groups["cuDNN"] == expected["cudnn"]
    for figure in (time_figure, gflops, roofline):
        plt.close(figure)
