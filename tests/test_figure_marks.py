"""Figures that show what they say: the history's run axis counts whole runs and names its y axis, the roofline
draws as many cells above a roof as its note counts (cells on one spot share a ring that gives their number),
and the variants figure is a chart of the variants' times even where every kernel has a single variant. Checked
on the artists the figures hold, not on pixels."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from convlab.history.store import Measurement
from convlab.report import figures
from convlab.report.historypage import RELATIVE_LABEL, history_figure
from convlab.report.roofline import COUNT_GID, RING_GID, roof_notes, roofline_figure, roofline_points

# ---- history


def _measurements(runs: int, kernels: tuple[str, ...] = ("cudnn", "direct")) -> list[Measurement]:
    return [Measurement(f"{kernel}/{cell}", "conv2d", kernel, "default", "ok", 1.0 + 0.02 * run,
                        f"{run}-{kernel}-{cell}", f"run{run}", 0.01, f"2026-11-2{run}", "c0ffee", "v1", "h", "x", "", "{}")
            for run in range(runs) for kernel in kernels for cell in range(2)]


def _ticks_in_view(ax, axis: str) -> list[float]:
    ax.figure.canvas.draw()
    low, high = ax.get_xlim() if axis == "x" else ax.get_ylim()
    ticks = ax.get_xticks() if axis == "x" else ax.get_yticks()
    return [float(t) for t in ticks if low <= t <= high]


def _panels(figure) -> list:
    return [ax for ax in figure.axes if ax.get_visible() and ax.axison]


@pytest.mark.parametrize("runs", [2, 3])
def test_the_history_counts_whole_runs_and_names_its_y_axis(runs):
    figure = history_figure(_measurements(runs), "h100")
    panels = _panels(figure)
    assert len(panels) == 2
    for ax in panels:
        assert _ticks_in_view(ax, "x") == [float(run) for run in range(1, runs + 1)]
    assert panels[0].get_ylabel() == RELATIVE_LABEL
    assert f"{runs} runs kept" in figure.get_supxlabel()
    assert "measured in one run only" not in figure.get_suptitle()


def _texts(figure) -> str:
    return " ".join(text.get_text() for ax in figure.axes for text in ax.texts) + figure.get_suptitle()


def test_a_first_run_draws_a_sentence_not_a_panel_per_kernel():
    figure = history_figure(_measurements(1, kernels=tuple(f"k{n}" for n in range(31))), "h200")
    assert _panels(figure) == []
    assert "one run kept so far: the 31 kernels have no history to draw yet" in _texts(figure)


def test_a_kernel_measured_in_one_run_only_is_named_not_drawn():
    kept = _measurements(2) + [replace(m, kernel="newcomer", cell=m.cell.replace("cudnn", "newcomer"),
                                       row_check=m.row_check + "-new") for m in _measurements(1, kernels=("cudnn",))]
    figure = history_figure(kept, "h100")
    assert sorted(ax.get_title().split("\n")[0] for ax in _panels(figure)) == ["cudnn", "direct"]
    assert "measured in one run only, so not drawn: newcomer" in figure.get_suptitle()


# ---- roofline

CEILING = {"sgemm_gflops": 1000.0, "size": 8192, "math": "cuBLAS SGEMM, TF32 off", "backend": "cuda",
           "device": "Test GPU"}
BANDWIDTH = {"copy_gbps": 1e6, "backend": "cuda", "device": "Test GPU"}  # no point is above this roof


def _cell(kernel: str, intensity: float, gflops: float, variant: str = "default") -> dict:
    flops, ms = 1e9, 1e9 / gflops / 1e6
    return {"experiment": "conv2d", "kernel": kernel, "variant": variant, "backend": "cuda", "implementation": "",
            "status": "ok", "flops": flops, "bytes": flops / intensity, "kernel_ms": ms, "device": "Test GPU",
            "precision": "tf32" if "tf32" in kernel else "fp32"}


@pytest.fixture(scope="module")
def above_on_two_spots() -> pd.DataFrame:
    """Twelve cells above the 1,000 GFLOP/s ceiling: five TF32 plans on one spot, five Winograd variants on
    another (the same intensity and time), two apart from everything; and three under it."""
    rows = [_cell("cudnn_tf32", 8.0, 3000.0, f"plan~{n}") for n in range(5)]
    rows += [_cell("winograd", 4.0, 1500.0, f"block~{n}") for n in range(5)]
    rows += [_cell("cudnn_tf32", 40.0, 2500.0, "plan~far"), _cell("fft", 1.0, 1200.0)]
    rows += [_cell("direct", 2.0, 100.0, f"block~{n}") for n in range(3)]
    return pd.DataFrame(rows)


def _rings(ax) -> tuple[int, list[int]]:
    """The rings drawn on a panel and the numbers written beside them."""
    rings = [c for c in ax.collections if c.get_gid() == RING_GID]
    counts = [int(t.get_text()) for t in ax.texts if t.get_gid() == COUNT_GID]
    return sum(len(c.get_offsets()) for c in rings), counts


def test_the_roofline_shows_as_many_cells_above_a_roof_as_its_note_counts(above_on_two_spots):
    (note,) = roof_notes(roofline_points(above_on_two_spots), BANDWIDTH, CEILING)
    said = int(note.split(" of ")[0])
    assert said == 12
    figure = roofline_figure(above_on_two_spots, BANDWIDTH, CEILING)
    for ax in figure.axes:
        rings, counts = _rings(ax)
        # one ring per spot: the two shared spots say 5, the two lone cells need no number
        assert rings == 4 and sorted(counts) == [5, 5]
        assert rings - len(counts) + sum(counts) == said
    legend = "\n".join(t.get_text() for t in figure.legends[0].get_texts())
    assert "above a measured roof: 12 cells" in legend
    assert "TF32 cuDNN plans use tensor cores" in note  # read from the rows' precision


def test_cells_apart_get_a_ring_each_and_no_number():
    apart = pd.DataFrame([_cell("cudnn_tf32", 2.0**k, 1500.0 * 1.5**k, f"plan~{k}") for k in range(4)])
    figure = roofline_figure(apart, BANDWIDTH, CEILING)
    assert _rings(figure.axes[0]) == (4, [])


# ---- variants


def _cpu_row(kernel: str, implementation: str, size: int, stride: int, ms: float, status: str = "ok") -> dict:
    return {"experiment": "conv2d", "kernel": kernel, "variant": "default", "backend": "cpu",
            "implementation": implementation, "H": float(size), "filter_size": 3.0, "stride": float(stride),
            "status": status, "reason": "", "kernel_ms": ms, "device": "Test CPU (2 cores)", "timing_mode": "warm",
            "code_version": "v1"}


def test_the_variants_figure_charts_single_variants_times():
    rows = [_cpu_row(kernel, twin, size, stride, ms * size / 64 / stride)
            for kernel, twin, ms in (("cudnn", "OpenCV filter2D per channel pair (cpu twin)", 0.08),
                                     ("direct", "numpy sliding-window (cpu twin of direct)", 0.12))
            for size in (64, 96) for stride in (1, 2)]
    rows.append(_cpu_row("winograd", "", 64, 1, math.nan, status="unsupported"))
    frame = pd.DataFrame(rows)
    figure = figures.variants_figure(frame)
    panels = [ax for ax in figure.axes if ax.axison]
    assert [ax.get_title() for ax in panels] == ["stride 1", "stride 2"]
    # every timed cell is a point at its own time, on its kernel's row
    drawn = {(ax.get_title(), float(x), float(y)) for ax in panels for c in ax.collections for x, y in c.get_offsets()}
    names = [t.get_text() for t in panels[0].get_yticklabels()]
    assert len(names) == 3 and names[0].startswith("cudnn") and all(n.endswith("[default]") for n in names)
    row_of = {name.split(" ")[0]: float(index) for index, name in enumerate(names)}
    expected = {(f"stride {row['stride']:.0f}", row["kernel_ms"], row_of[row["kernel"]])
                for row in rows if row["status"] == "ok"}
    assert drawn == expected
    assert panels[0].get_xscale() == "log" and "single variant" in figure.get_suptitle()


def test_the_variants_figure_with_no_time_says_so_on_its_panels():
    frame = pd.DataFrame([_cpu_row("direct", "numpy", 64, 1, np.nan, status="error")])
    figure = figures.variants_figure(frame)
    assert any("no timed cells" in t.get_text() for ax in figure.axes for t in ax.texts)


def test_the_variants_grid_laid_out_without_measuring_keeps_titles_legends_and_labels_clear():
    """A grid of many kernels is laid out in fixed gaps (convlab.report.plotting.lay_out_grid), not by
    tight_layout: each panel's title still clears the panel above, each row's legend clears its panels, and the
    title of the figure clears the first row, whatever the kernels' names, times and variant labels."""
    variants = {"direct": ["block~8", "block~16", "block~32"],
                "tiled_output_with_a_long_name": ["block~16_rows~8_cols~4_path~1", "block~32_rows~2_cols~1_path~0"],
                "im2col_gemm_shared": ["tile~16", "tile~32"]}
    rows = [{**_cpu_row(kernel, "", size, stride, ms * (size / 64) ** 2 / stride), "variant": variant}
            for (kernel, names), ms in zip(variants.items(), (0.004, 20.0, 900.0))
            for variant in names for size in (64, 256, 1024) for stride in (1, 2, 3)]
    figure = figures.variants_figure(pd.DataFrame(rows))
    grid = [[ax for ax in figure.axes if ax.get_subplotspec().rowspan.start == row] for row in range(3)]
    assert [len(row) for row in grid] == [3, 3, 3]
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    for above, below in zip(grid, grid[1:]):
        for upper, lower in zip(above, below):
            assert lower.title.get_window_extent(renderer).y1 < upper.get_window_extent(renderer).y0
    for row in grid:
        legend = row[-1].get_legend().get_window_extent(renderer)
        assert all(legend.x0 > ax.get_window_extent(renderer).x1 for ax in row)
    suptitle = next(text for text in figure.texts if text.get_text() == figure.get_suptitle())
    assert suptitle.get_window_extent(renderer).y0 > max(ax.title.get_window_extent(renderer).y1 for ax in grid[0])
