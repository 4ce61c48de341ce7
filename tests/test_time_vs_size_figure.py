"""The kernel-time figure stays readable with every kernel of a GPU run: small multiples by kernel group, each line
told apart from its panel's others by colour, marker and line style, and named at its right end. Checked on what
the figure holds (its lines, labels and leaders, read back by gid), not on pixels; a cpu summary and a 22-kernel
one both render."""

import math
from pathlib import Path

import matplotlib.image
import pandas as pd
import pytest
from matplotlib.colors import to_hex

from convlab.plan.registry import load_registry
from convlab.report import figures
from convlab.report.kernelcolors import kernel_group
from convlab.report.plotting import NO_ROWS, NO_TIMED_CELLS
from convlab.report.time_vs_size import (
    CONTEXT_COLOR,
    CONTEXT_LINE,
    KERNEL_LABEL,
    KERNEL_LINE,
    LABEL_LEADER,
    MAX_LINES_PER_PANEL,
    pack_panels,
    panel_group,
    spread_labels,
    time_vs_size_figure,
)

SIZES = (128, 256, 512, 1024, 2048, 4096)
STRIDES = (1, 2, 3)
COLUMNS = ["experiment", "kernel", "variant", "backend", "implementation", "H", "W", "filter_size", "stride", "status",
           "reason", "kernel_ms", "gflops", "pct_of_floor", "device", "timing_mode", "code_version"]
OPENCV = "OpenCV filter2D per channel pair, full resolution then strided slice (cpu twin)"
SLIDING = "numpy sliding-window (cpu twin of direct)"


def _row(kernel: str, size: int, stride: int, ms: float, variant: str = "block~16", status: str = "ok",
         backend: str = "cuda", implementation: str = "", filter_size: int = 3) -> dict:
    return {"experiment": "conv2d", "kernel": kernel, "variant": variant, "backend": backend,
            "implementation": implementation or f"{kernel}.cu", "H": float(size), "W": float(size),
            "filter_size": float(filter_size), "stride": float(stride), "status": status, "reason": "",
            "kernel_ms": ms, "gflops": math.nan, "pct_of_floor": math.nan,
            "device": "NVIDIA H200" if backend == "cuda" else "Test CPU (2 cores)", "timing_mode": "warm",
            "code_version": "v1"}


def gpu_kernels() -> list[str]:
    return sorted(name for name, spec in load_registry().items() if "conv2d" in spec.experiments)


@pytest.fixture(scope="module")
def gpu_summary() -> pd.DataFrame:
    """Every conv2d kernel of the cuda registry (22), sizes 128..4096, strides 1..3, two variants each, with times
    as close as an H200's: many lines within a few per cent of each other at the large sizes."""
    rows = []
    for index, kernel in enumerate(gpu_kernels()):
        at_4096 = 0.12 * 1.18**index  # ms at 4096^2, stride 1: neighbours 18 % apart
        for size in SIZES:
            for stride in STRIDES:
                ms = 0.004 + at_4096 * (size / 4096) ** 2 / stride**1.5
                rows.append(_row(kernel, size, stride, ms * 1.1, variant="block~8"))
                rows.append(_row(kernel, size, stride, ms, variant="block~16"))
    return pd.DataFrame(rows, columns=COLUMNS)


@pytest.fixture(scope="module")
def gpu_figure(gpu_summary):
    figure = time_vs_size_figure(gpu_summary)
    figure.canvas.draw()
    return figure


def cpu_summary() -> pd.DataFrame:
    """The tiny cpu run's shape: two kernels, each running a cpu twin, sizes 64 and 96, strides 1 and 2."""
    rows = [_row(kernel, size, stride, ms * size / 64 / stride, variant="default", backend="cpu",
                 implementation=implementation)
            for kernel, implementation, ms in (("cudnn", OPENCV, 0.085), ("direct", SLIDING, 0.115))
            for size in (64, 96) for stride in (1, 2)]
    return pd.DataFrame(rows, columns=COLUMNS)


def kernel_lines(ax) -> list:
    return [line for line in ax.get_lines() if line.get_gid() == KERNEL_LINE]


def label_texts(ax) -> list:
    return [text for text in ax.texts if text.get_gid() == KERNEL_LABEL]


def panel_rows(figure) -> list[list]:
    """The figure's panels as rows, top to bottom, each left to right."""
    panels = [ax for ax in figure.axes if ax.get_subplotspec() is not None]
    rows: dict[int, list] = {}
    for ax in panels:
        rows.setdefault(ax.get_subplotspec().rowspan.start, []).append(ax)
    return [sorted(row, key=lambda ax: ax.get_subplotspec().colspan.start) for _, row in sorted(rows.items())]


def test_every_line_in_a_panel_has_its_own_colour_marker_and_line_style(gpu_figure):
    for ax in gpu_figure.axes:
        styles = [(to_hex(line.get_color()), line.get_marker(), line.get_linestyle()) for line in kernel_lines(ax)]
        assert len(styles) > 1, ax.get_title()
        assert len(set(styles)) == len(styles), (ax.get_title(), styles)
        # up to the panel's limit each of the three differs by itself, not only their combination
        assert len({color for color, _, _ in styles}) == len(styles), ax.get_title()
        assert len({marker for _, marker, _ in styles}) == len(styles), ax.get_title()


def test_every_kernel_is_in_exactly_one_row_of_panels_and_named_at_its_right_end(gpu_figure, gpu_summary):
    rows = panel_rows(gpu_figure)
    assert 1 < len(rows) and all(len(row) == len(STRIDES) for row in rows)
    row_of: dict[str, set[int]] = {}
    for number, row in enumerate(rows):
        for ax in row:
            lines = {line.get_label(): line for line in kernel_lines(ax)}
            texts = [text.get_text() for text in label_texts(ax)]
            assert sorted(texts) == sorted(lines), ax.get_title()  # one label per line, no other
            leaders = [leader for leader in ax.get_lines() if leader.get_gid() == LABEL_LEADER]
            for text in label_texts(ax):
                line = lines[text.get_text()]
                end_x, end_y = line.get_xdata()[-1], line.get_ydata()[-1]
                assert end_x == max(line.get_xdata())
                # its leader leaves from the line's last point and arrives beside the label
                leader = next(leader for leader in leaders if leader.get_color() == line.get_color()
                              and leader.get_ydata()[-1] == pytest.approx(text.get_position()[1]))
                assert leader.get_ydata()[0] == pytest.approx(end_y)
                label_box = text.get_window_extent()
                assert label_box.x0 > ax.transData.transform((end_x, end_y))[0]  # right of the end
                row_of.setdefault(text.get_text(), set()).add(number)
    assert set(row_of) == set(gpu_summary["kernel"])  # every kernel drawn and named
    assert all(len(numbers) == 1 for numbers in row_of.values()), row_of


def test_a_row_holds_whole_kernel_groups_and_few_lines(gpu_figure, gpu_summary):
    rows = panel_rows(gpu_figure)
    groups_of_rows = []
    for row in rows:
        names = {line.get_label() for ax in row for line in kernel_lines(ax)}
        groups = {kernel_group(name) for name in names}
        groups_of_rows.append(groups)
        assert len(names) <= MAX_LINES_PER_PANEL or len(groups) == 1, names
        # the title names the groups it draws
        assert all(group in row[0].get_title() for group in groups), row[0].get_title()
    flat = [group for groups in groups_of_rows for group in groups]
    assert len(flat) == len(set(flat))  # a group is never split over two rows
    assert set(flat) == set(gpu_summary["kernel"].map(kernel_group))


def test_other_rows_kernels_are_grey_context_and_every_line_is_labelled_apart(gpu_figure):
    boxes = []
    for ax in gpu_figure.axes:
        mine = {line.get_label() for line in kernel_lines(ax)}
        context = [line for line in ax.get_lines() if line.get_gid() == CONTEXT_LINE]
        assert len(context) + len(mine) == len(gpu_kernels())
        assert all(to_hex(line.get_color()) == to_hex(CONTEXT_COLOR) and line.get_marker() in ("None", "", None)
                   for line in context)
        boxes += [text.get_window_extent() for text in label_texts(ax)]
    # no two labels of the figure overlap, whichever panel they belong to
    for i, box in enumerate(boxes):
        for other in boxes[i + 1:]:
            assert not box.overlaps(other), (box, other)


def test_the_line_is_the_best_variant_as_before():
    rows = [_row("direct", 128, 1, 0.010, "block~8"), _row("direct", 128, 1, 0.005, "block~16", status="wrong"),
            _row("direct", 256, 1, 0.020, "block~8"), _row("direct", 256, 1, 0.030, "block~16"),
            _row("direct", 512, 1, 0.090, "block~8", status="wrong"),
            _row("direct", 512, 1, 0.080, "block~16", status="wrong"),
            _row("cudnn", 128, 1, 0.05), _row("cudnn", 256, 1, 0.06), _row("cudnn", 512, 1, 0.07)]
    figure = time_vs_size_figure(pd.DataFrame(rows, columns=COLUMNS))
    line = next(line for line in kernel_lines(figure.axes[0]) if line.get_label() == "direct")
    # a correct variant beats a faster wrong one; where every variant is wrong the fastest is drawn, marked
    assert list(line.get_ydata()) == pytest.approx([0.010, 0.020, 0.080])
    wrong = [collection for collection in figure.axes[0].collections if len(collection.get_offsets())]
    assert [tuple(point) for c in wrong for point in c.get_offsets()] == [(512.0, 0.080)]


def test_a_twin_backend_is_grouped_by_the_twin_that_ran():
    summary = cpu_summary()
    assert set(panel_group(summary)) == {"OpenCV filter2D per channel pair", "numpy sliding-window"}
    figure = time_vs_size_figure(summary)
    titles = " ".join(ax.get_title() for ax in figure.axes)
    assert "cuDNN" not in titles  # numpy is never drawn under the GPU library's name
    texts = {text.get_text().replace("\n", " ") for ax in figure.axes for text in label_texts(ax)}
    assert texts == {"cudnn → OpenCV filter2D per channel pair", "direct → numpy sliding-window"}


def test_small_groups_share_a_panel_and_a_large_one_is_never_split():
    lines = pd.DataFrame({"line": [f"im2col_gemm_{i}" for i in range(8)] + ["cudnn", "cudnn_nchw", "winograd", "fft"],
                          "kernel": [f"im2col_gemm_{i}" for i in range(8)] + ["cudnn", "cudnn_nchw", "winograd", "fft"]})
    lines["group"] = lines["kernel"].map(kernel_group)
    assert pack_panels(lines) == [["im2col + own GEMM"], ["cuDNN", "Winograd", "FFT"]]


def test_labels_are_spread_apart_in_order_and_kept_in_range():
    assert spread_labels([1.0, 5.0], gap=1.0, low=0.0, high=10.0) == [1.0, 5.0]  # apart already: left alone
    placed = spread_labels([3.0, 2.9, 3.1, 8.0], gap=1.0, low=0.0, high=10.0)
    assert placed[1] < placed[0] < placed[2] < placed[3]
    assert placed[0] == pytest.approx(3.0)  # a crowd spreads about its middle
    assert min(b - a for a, b in zip(sorted(placed), sorted(placed)[1:])) >= 1.0 - 1e-9
    assert spread_labels([0.0, 0.1, 0.2], gap=1.0, low=0.0, high=10.0) == pytest.approx([0.0, 1.0, 2.0])
    assert spread_labels([9.9, 10.0], gap=1.0, low=0.0, high=10.0) == pytest.approx([9.0, 10.0])


def test_no_rows_and_no_timed_cells_say_so():
    empty = time_vs_size_figure(pd.DataFrame(columns=COLUMNS))
    assert any(text.get_text() == NO_ROWS for ax in empty.axes for text in ax.texts)
    failed = pd.DataFrame([_row("direct", 128, s, math.nan, status="error") for s in STRIDES], columns=COLUMNS)
    notes = [text.get_text() for ax in time_vs_size_figure(failed).axes for text in ax.texts]
    assert notes.count(NO_TIMED_CELLS) == len(STRIDES)


def _render(summary: pd.DataFrame, folder: Path) -> Path:
    summary.to_csv(folder / "summary.csv", index=False)
    paths = figures.render_figures(folder / "summary.csv", folder / "figures")
    assert [path.name for path in paths] == ["time_vs_size.png", "gflops_vs_size.png", "pct_of_floor_vs_size.png",
                                             "variants.png", "status.png", "status_table.html"]
    return paths[0]


def test_a_cpu_summary_and_a_22_kernel_summary_render_a_png(tmp_path, gpu_summary):
    (tmp_path / "cpu").mkdir()
    (tmp_path / "gpu").mkdir()
    cpu = matplotlib.image.imread(_render(cpu_summary(), tmp_path / "cpu"))
    gpu = matplotlib.image.imread(_render(gpu_summary, tmp_path / "gpu"))
    assert gpu_summary["kernel"].nunique() == 22
    assert cpu.shape[0] > 300 and cpu.shape[1] > 600
    assert gpu.shape[0] > 2 * cpu.shape[0]  # the cpu run fits one row of panels, the GPU run's groups take several
