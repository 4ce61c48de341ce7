"""The report stage: the seed comparison join on hand-made frames; the report never misleads (kernels that ran
the same code are never ranked, every cell is named by what ran, no roof below a point without a note, one
reading of "comparable" on every page, figures that say what they show); and the report rules on the tiny cpu
config in a temporary copy (every figure produced and non-empty, findings computed from the data)."""

import html
import io
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import seaborn as sns
import yaml
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator
from PIL import Image
from workflow_helpers import copy_repo, snakemake

from convlab.app.cli import main
from convlab.history.summary import read_summary
from convlab.report import figures, findings, plotting, roofline, seedcompare, seedfigures
from convlab.report.figuretable import FIGURES as FIGURE_TABLE
from convlab.report.findings import fastest
from convlab.report.logaxes import MinorGrid, log_axis, log_y_axis, plain_tick
from convlab.report.plotting import (
    DPI,
    legend_handles,
    new_figure,
    panel_title,
    save_figure,
)
from convlab.report.seedcompare import (
    NEVER_RAN,
    NOT_RUN,
    compare,
    load_map,
    load_seeds,
    read_comparison,
)

REPO = Path(__file__).resolve().parents[1]
SEEDS = REPO / "config/seeds/seed_tables.csv"
MAP = REPO / "config/seeds/method_map.yaml"
SEED_COLUMNS = ["seed", "table", "gpu", "unit", "size", "stride", "filter_size", "method", "block", "layer", "batch",
                "value", "defect", "source_line"]


def _seed(**values) -> dict:
    row = dict.fromkeys(SEED_COLUMNS, "")
    row.update(values)
    return row


def _cell(**values) -> dict:
    row = {"experiment": "conv2d", "kernel": "", "variant": "default", "size": 0.0, "batch": 1.0, "H": 0.0,
           "W": 0.0, "C_in": 3.0, "C_out": 3.0, "filter_size": 3.0, "stride": 1.0, "gemm_m": math.nan,
           "status": "ok", "reason": "", "kernel_ms": math.nan, "gflops": math.nan, "device": "Test GPU"}
    row.update(values)
    return row


MAPPING = {"mappings": [
    {"seed": "001", "table": "1", "method": "direct", "experiment": "conv2d", "kernel": "direct",
     "match": {"block": "from_seed"}},
    {"seed": "001", "table": "4", "method": "block", "experiment": "conv2d", "kernel": "im2col_gemm_block",
     "match": {"block": "from_seed"}},
    {"seed": "000", "table": "stride1", "method": "im2col_gemm", "experiment": "conv2d",
     "kernel": "im2col_gemm_shared", "match": {"variant": "best"}},
], "unmapped": [{"seed": "003", "table": "3-direct", "method": "direct", "reason": "a 6x6 demo"}]}


@pytest.fixture
def joined() -> pd.DataFrame:
    seeds = pd.DataFrame([
        _seed(seed="001", table="1", gpu="Quadro M4000", unit="ms", size="256", stride="2", filter_size="3",
              method="direct", block="16", value="1.0"),
        _seed(seed="001", table="4", gpu="Quadro M4000", unit="ms", size="256", filter_size="3", method="block",
              block="64", value="0.003", defect="block64_launch_failed"),
        _seed(seed="000", table="stride1", gpu="GTX 1050", unit="gflops", size="256", stride="1", filter_size="3",
              method="im2col_gemm", value="10"),
        _seed(seed="000", table="stride1", gpu="GTX 1050", unit="gflops", size="512", stride="1", filter_size="3",
              method="im2col_gemm", value="10"),
        _seed(seed="003", table="3-direct", gpu="unnamed", unit="ms", size="6", stride="1", method="direct",
              value="0.04", defect="stride_ignored"),
    ])
    seeds["value"] = pd.to_numeric(seeds["value"])
    summary = pd.DataFrame([
        _cell(kernel="direct", variant="block~16", size=256, stride=2, kernel_ms=0.25),
        _cell(kernel="direct", variant="block~8", size=256, stride=2, kernel_ms=0.01),  # not the seed's block
        _cell(kernel="direct", variant="block~16", size=256, stride=1, kernel_ms=0.5),  # not the seed's stride
        _cell(kernel="im2col_gemm_block", variant="block~64", size=256, stride=1, status="invalid_config",
              reason="launch refused"),
        _cell(kernel="im2col_gemm_shared", variant="block~8", size=256, kernel_ms=0.2, gflops=50.0),
        _cell(kernel="im2col_gemm_shared", variant="block~16", size=256, kernel_ms=0.1, gflops=100.0),
        _cell(kernel="im2col_gemm_shared", variant="block~32", size=256, kernel_ms=0.05, gflops=200.0,
              status="wrong"),
    ])
    return compare(seeds, MAPPING, summary)


def test_join_takes_the_seeds_block_and_stride(joined):
    row = joined[(joined["seed"] == "001") & (joined["table"] == "1")].iloc[0]
    assert row["variant"] == "block~16" and row["this_value"] == 0.25
    assert row["ratio"] == pytest.approx(4.0)  # seed ms / this ms: this run 4x faster
    assert row["seed_gpu"] == "Quadro M4000" and row["this_gpu"] == "Test GPU"


def test_best_variant_is_the_fastest_correct_one(joined):
    row = joined[(joined["seed"] == "000") & (joined["size"] == 256)].iloc[0]
    assert row["variant"] == "block~16"  # block~32 is faster but wrong
    assert row["ratio"] == pytest.approx(10.0)  # this GFLOPS / seed GFLOPS


def test_defect_row_shows_this_runs_status_and_no_ratio(joined):
    row = joined[(joined["table"] == "4")].iloc[0]
    assert row["this_status"] == "invalid_config" and row["this_reason"] == "launch refused"
    assert math.isnan(row["ratio"]) and "never ran" in row["defect_note"]


def test_missing_problem_and_unmapped_rows(joined):
    assert joined[joined["size"] == 512].iloc[0]["this_status"] == NOT_RUN
    assert joined[joined["seed"] == "003"].iloc[0]["this_status"] == "unmapped"


def test_every_seed_number_gets_one_comparison_row():
    seeds = load_seeds(SEEDS)
    summary = pd.DataFrame([_cell(kernel="direct", variant="block~16", size=256, stride=1, kernel_ms=0.1)])
    table = compare(seeds, load_map(MAP), summary)
    assert len(table) == len(seeds)
    assert set(table["this_status"]) <= {"ok", NOT_RUN, "unmapped"}


# ---- the report never misleads: hand-made cpu summaries, one test per rule

BLAS = "numpy float32 BLAS matmul (cpu twin of the tiled SGEMM kernels)"
ROWS = "numpy np.dot per output row, float32 (cpu twin of sgemm_naive)"
OPENCV = "OpenCV filter2D per channel pair, full resolution then strided slice (cpu twin)"
SLIDING = "numpy sliding-window (cpu twin of direct)"
CPU = "AMD EPYC (2 cores)"


def _cpu(**values) -> dict:
    """A cpu-backend row with what the report reads, flops and bytes included."""
    row = _cell(device=CPU, backend="cpu", implementation="", flops=math.nan, bytes=math.nan, timing_mode="warm",
                code_version="v1")
    row.update(values)
    if row["status"] == "ok" and row["flops"] == row["flops"]:
        row["gflops"] = row["flops"] / row["kernel_ms"] / 1e6
    return row


def _gemm(kernel: str, implementation: str, ms: float, size: int = 512) -> dict:
    flops = 2.0 * size**3
    return _cpu(experiment="gemm", kernel=kernel, implementation=implementation, size=size, gemm_m=size, H=math.nan,
                kernel_ms=ms, flops=flops, bytes=3.0 * 4 * size * size)


def _conv(kernel: str, implementation: str, ms: float, size: int = 128, **values) -> dict:
    return _cpu(kernel=kernel, implementation=implementation, size=size, H=size, W=size, kernel_ms=ms,
                flops=2.0 * 9 * 3 * 3 * size * size, bytes=4.0 * (2 * 3 * size * size + 81), **values)


def _texts(figure) -> str:
    """Every piece of text a reader sees on a figure: titles, notes, tick labels and legends."""
    figure.canvas.draw()
    return "\n".join(t.get_text() for t in figure.findobj(lambda a: hasattr(a, "get_text")) if t.get_text())


@pytest.fixture
def blas_gemm() -> pd.DataFrame:
    """Seed 003's case on cpu: sgemm_vectorized 'beat' cublas, but both ran the same numpy matmul."""
    return pd.DataFrame([_gemm("cublas", BLAS, 1.0), _gemm("sgemm_vectorized", BLAS, 0.96),
                         _gemm("sgemm_shared", BLAS, 0.98), _gemm("sgemm_naive", ROWS, 5.0)])


def test_kernels_that_ran_the_same_code_are_never_ranked_or_compared(blas_gemm):
    table = fastest(blas_gemm, "gemm")
    row = table.iloc[0]
    # one entry for the shared code, named by every kernel that ran it; the runner-up is other code
    assert all(k in row["fastest"] for k in ("cublas", "sgemm_shared", "sgemm_vectorized"))
    assert "sgemm_naive" in row["runner_up"] and "sgemm_vectorized" not in row["runner_up"]
    # the library comparison is against other code (the np.dot rows), never 1.0 / 0.96
    assert row["library"] == row["fastest"]
    assert row["speedup_over_library"] == pytest.approx(0.96 / 5.0)
    page = findings.findings_html(blas_gemm, compare(pd.DataFrame(columns=SEED_COLUMNS), MAPPING, blas_gemm), {}, {})
    assert "1.04x" not in page and not re.search(r"sgemm_vectorized</b>[^.]*the speed of", page)
    assert "Ran the same code on this backend" in page
    # seed 004's speed-up of one kernel over another: not formed when both ran the same twin
    layers = pd.DataFrame([_cpu(experiment="winograd_layers", kernel=k, implementation=SLIDING, C_in=3.0, H=8.0,
                                W=8.0, C_out=4.0, kernel_ms=ms) for k, ms in (("winograd_batched", 1.0),
                                                                              ("conv_naive_batched", 2.0))])
    assert seedcompare.layer_speedups(layers, "winograd_batched", "conv_naive_batched", "winograd_layers").empty
    speedup = compare(load_seeds(SEEDS), load_map(MAP), layers)
    assert speedup[speedup["seed"] == "004"].iloc[0]["this_status"] == seedcompare.SAME_CODE


def test_every_cell_is_named_by_the_implementation_that_ran():
    summary = pd.DataFrame([_conv("cudnn", OPENCV, 0.5), _conv("direct", SLIDING, 1.0),
                            _gemm("cublas", BLAS, 1.0), _gemm("sgemm_naive", ROWS, 5.0)])
    page = findings.findings_html(summary, compare(pd.DataFrame(columns=SEED_COLUMNS), MAPPING, summary), {}, {})
    assert "cudnn → OpenCV filter2D" in page and "cublas → numpy float32 BLAS matmul" in page
    assert not re.search(r"<b>(cudnn|cublas)</b>", page)  # numpy is never presented as cuBLAS
    # the roofline's families are the twins, not the GPU libraries the kernels are named after
    families = set(roofline.roofline_points(summary)["group"])
    assert not families & {"cuDNN", "cuBLAS", "own SGEMM"}, families
    assert all("→" in name for name in families)
    # and so are the status figure's bars and the seed comparison's this-run side
    assert "cudnn → OpenCV filter2D" in _texts(figures.status_figure(summary))
    seeds = pd.DataFrame([_seed(seed="000", table="stride1", gpu="GTX 1050", unit="gflops", size="128", stride="1",
                                filter_size="3", method="cudnn", value="2")])
    seeds["value"] = pd.to_numeric(seeds["value"])
    mapping = {"mappings": [{"seed": "000", "table": "stride1", "method": "cudnn", "experiment": "conv2d",
                             "kernel": "cudnn", "match": {"variant": "best"}}]}
    assert compare(seeds, mapping, summary).iloc[0]["ran_as"].startswith("cudnn → OpenCV filter2D")


def test_no_roof_below_a_measured_point_without_an_explanation():
    summary = pd.DataFrame([_gemm("cublas", BLAS, 2.236), _conv("direct", SLIDING, 1.0)])  # 120 GFLOP/s
    bandwidth = {"backend": "cpu", "device": CPU, "copy_gbps": 1000.0}
    low = {"backend": "cpu", "device": CPU, "sgemm_gflops": 74.8, "size": 2048, "math": "numpy.matmul float32"}
    text = _texts(roofline.roofline_figure(summary, bandwidth, low))
    assert "1 of 2 cells ran above the measured FP32 SGEMM ceiling" in text
    assert "not the CPU's peak" in text
    # a cache-resident cell above the copy bandwidth is explained too
    text = _texts(roofline.roofline_figure(summary, {**bandwidth, "copy_gbps": 1.0}, {**low, "sgemm_gflops": 500.0}))
    assert "faster than the measured copy bandwidth" in text and "ran above the measured FP32" not in text
    # and a roof above every point needs no note
    clean = _texts(roofline.roofline_figure(summary, bandwidth, {**low, "sgemm_gflops": 500.0}))
    assert "ran above" not in clean and "faster than the measured" not in clean
    # the findings page repeats the figure's note
    page = findings.findings_html(summary, compare(pd.DataFrame(columns=SEED_COLUMNS), MAPPING, summary),
                                  bandwidth, low)
    assert "ran above the measured FP32 SGEMM ceiling" in page


def _seed000(defect: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    seeds = pd.DataFrame([_seed(seed="000", table=f"stride{s}", gpu="GTX 1050", unit="gflops", size=str(n),
                                stride=str(s), filter_size="3", method="cudnn", value="4", defect=defect)
                          for s in (1, 2, 3) for n in (128, 256)])
    seeds["value"] = pd.to_numeric(seeds["value"])
    mapping = {"mappings": [{"seed": "000", "table": f"stride{s}", "method": "cudnn", "experiment": "conv2d",
                             "kernel": "cudnn", "match": {"variant": "best"}} for s in (1, 2, 3)]}
    summary = pd.DataFrame([_conv("cudnn", OPENCV, 0.5, size=n, stride=float(s)) for s in (1, 2, 3)
                            for n in (128, 256)])
    return compare(seeds, mapping, summary), summary


@pytest.mark.parametrize("defect", ["search_timed", ""])
def test_seed_figure_and_findings_agree_on_what_is_comparable(defect):
    comparison, summary = _seed000(defect)
    figure = seedfigures.seed_figure_object("000", "gflops", comparison, summary)
    titles = [ax.get_title() for ax in figure.axes if ax.get_title()]
    page = findings.findings_html(summary, comparison, {}, {})
    seed_line = re.search(r"<li>Seed 000 .*?</li>", page).group(0)
    shared = seedcompare.ratio_text(comparison)
    if defect:  # every ratio is against a seed number with a known defect: nothing comparable, on both pages
        assert all(seedcompare.NOTHING_COMPARABLE in t for t in titles), titles
        assert seedcompare.NOTHING_COMPARABLE in seed_line
        assert not any("median speed ratio" in t for t in titles)
    else:
        assert all("median speed ratio" in t for t in titles) and shared in seed_line


def test_placeholder_figures_say_why_and_status_shows_every_cell():
    summary = pd.DataFrame([_conv("cudnn", OPENCV, 0.5), _conv("direct", SLIDING, 1.0),
                            _conv("winograd", "", math.nan, status="unsupported", reason="stride 2"),
                            _gemm("cublas", BLAS, 1.0), _gemm("sgemm_naive", ROWS, 5.0),
                            _cpu(experiment="tiling", kernel="direct", implementation=SLIDING, size=64, H=64,
                                 kernel_ms=0.2)])
    conv2d = summary[summary["experiment"] == "conv2d"]
    text = _texts(figures.variants_figure(conv2d))
    assert "single variant" in text and "cpu twin" in text and "no tunables" in text
    figure = figures.status_figure(summary)
    bars = [patch.get_width() for ax in figure.axes for patch in ax.patches]
    assert sum(bars) == len(summary) == 6  # every cell of the summary, not conv2d's alone
    assert "6 cells" in figure.axes[0].get_title()
    labels = _texts(figure)
    assert all(name in labels for name in ("conv2d: cudnn", "gemm: cublas", "gemm: sgemm_naive", "tiling: direct"))


def test_the_figures_command_renders_the_one_file_asked_for_or_all_of_them(tmp_path):
    """The report runs one `figures` job per file, side by side; without --figure the command renders every one."""
    summary = pd.DataFrame([_conv("direct", SLIDING, 0.01 * size / block, size=size, variant=f"block~{block}",
                                  pct_of_floor=50.0)
                            for block in (8, 16) for size in (64, 128)])
    summary.to_csv(tmp_path / "summary.csv", index=False)

    def rendered(*option: str) -> list[str]:
        out = tmp_path / (option[-1] if option else "all")
        assert main(["figures", "--summary", str(tmp_path / "summary.csv"), "--outdir", str(out), *option],
                    forward=False) == 0
        return sorted(path.name for path in out.iterdir())

    assert rendered("--figure", "variants") == ["variants.png"]
    assert rendered("--figure", "status_table") == ["status_table.html"]
    assert rendered() == sorted(entry.file for entry in FIGURE_TABLE.values())


# The digits log_axis labels on a minor tick, by the decades in view (the panels of _log_panels)
LABELLED_DIGITS = {0.026: "2345678", 0.4: "25", 1300.0: ""}


def _log_panels(ours: bool) -> Figure:
    """Four log panels: y over 0.3, 1.5 and 5 decades (each labels its minor ticks differently), then x over 1.5.
    Ours: as log_axis draws them. Else matplotlib's own: its locators whole (ticks outside the view too), a tick
    at every minor position, and the minor grid drawn by those ticks."""
    figure, axes = new_figure(1, 4, share=False)
    for ax, high in zip(axes[0], (*LABELLED_DIGITS, 0.4)):
        which = "x" if ax is axes[0][-1] else "y"
        ax.plot(*([[0.013, high], [64, 512]] if which == "x" else [[64, 512], [0.013, high]]), marker="o")
        panel_title(ax, f"{which} up to {high:g}")
        log_axis(ax, which)
        if not ours:
            axis = ax.xaxis if which == "x" else ax.yaxis
            digits = LABELLED_DIGITS[high]
            for artist in [a for a in ax.artists if isinstance(a, MinorGrid)]:
                artist.remove()
            axis.set_major_locator(axis.get_major_locator().locator)
            axis.set_minor_locator(LogLocator(subs="auto"))
            if digits:
                axis.set_minor_formatter(FuncFormatter(lambda v, _, d=digits: plain_tick(v) if f"{v:.0e}"[0] in d
                                                       else ""))
                ax.grid(True, which="minor", axis=which, linewidth=0.5, alpha=0.5)
    figure.legend(handles=legend_handles({"a": "red"}, True), loc="center left", bbox_to_anchor=(1.0, 0.5))
    figure.suptitle("four panels")
    return figure


def _minor_labels(figure: Figure) -> list[str]:
    return [axis.get_minor_formatter()(value) for ax in figure.axes for axis in (ax.xaxis, ax.yaxis)
            for value in axis.get_minorticklocs()]


def _pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)))


def test_save_figure_draws_what_tight_layout_and_a_tight_bbox_draw(tmp_path):
    """save_figure's shortcuts (ticks outside the view dropped, the minor ticks only where labelled and the minor
    grid one artist, spines without tick marks left out of the layout, the crop measured once) change no pixel of
    the figure."""
    with sns.axes_style("whitegrid"), sns.plotting_context("notebook"):
        quick_figure = _log_panels(ours=True)
        save_figure(quick_figure, tmp_path / "quick.png")
        plain = _log_panels(ours=False)
        # ours makes a minor tick only where it has a label; matplotlib's own, one at every minor digit
        assert _minor_labels(quick_figure) and all(_minor_labels(quick_figure))
        assert "" in _minor_labels(plain)
        plain.tight_layout()
        buffer = io.BytesIO()
        plain.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    quick, slow = _pixels((tmp_path / "quick.png").read_bytes()), _pixels(buffer.getvalue())
    assert quick.shape == slow.shape and (quick == slow).all()


def test_seed002_not_run_note_covers_no_bar():
    seeds = pd.DataFrame([_seed(seed="002", table="test", gpu="RTX 4090", unit="ms", size="16384",
                                filter_size="9", method=m, value=v)
                          for m, v in (("basic", "11.8"), ("constant", "10.4"), ("tiled", "7.6"), ("cached", "13.9"))])
    seeds["value"] = pd.to_numeric(seeds["value"])
    summary = pd.DataFrame([_conv("direct", SLIDING, 1.0)])
    comparison = compare(seeds, load_map(MAP), summary)
    figure = seedfigures.seed_figure_object("002", "tiling", comparison, summary)
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    ax = figure.axes[0]
    bars = [p.get_window_extent(renderer) for p in ax.patches if p.get_height() > 0]
    assert len(bars) == 4
    notes = [t for t in ax.texts if t.get_text()]
    assert notes, "the figure must still say this run did not run the problem"
    for note in notes:
        box = note.get_window_extent(renderer)
        assert not any(box.overlaps(bar) for bar in bars), note.get_text()


def test_seed003_this_run_never_takes_a_seed_blocks_colour():
    # the cpu twin of sgemm_naive has no block: its one cell answers every seed block at 512
    summary = pd.DataFrame([_gemm("sgemm_naive", ROWS, 15.0), _gemm("cublas", BLAS, 2.9)])
    comparison = compare(load_seeds(SEEDS), load_map(MAP), summary)
    figure = seedfigures.seed_figure_object("003", "gemm", comparison, summary)
    ax = figure.axes[0]
    seed_colours = {to_hex(line.get_color()) for line in ax.get_lines() if line.get_linestyle() == "--"}
    mine = [line for line in ax.get_lines() if line.get_linestyle() == "-" and len(line.get_xdata())
            and 512 in list(line.get_xdata())]
    assert len(mine) == 1, "one point for the one cell, not one per seed block"
    assert to_hex(mine[0].get_color()) not in seed_colours
    assert "no block tunable" in _texts(figure)


# ---- the real rules, on the tiny cpu config with sizes that overlap the seeds' (128)

# Relative to the run's results folder (the one holding summary.csv), wherever the rules put it.
FIGURES = ["seeds/seed000_gflops.png", "seeds/seed001_methods.png", "seeds/seed001_memory.png",
           "seeds/seed001_partition.png", "seeds/seed002_tiling.png", "seeds/seed003_gemm.png",
           "seeds/seed004_winograd.png", "figures/roofline.png", "figures/time_vs_size.png",
           "figures/gflops_vs_size.png", "figures/pct_of_floor_vs_size.png", "figures/variants.png",
           "figures/status.png"]
PAGES = ["seeds/comparison.csv", "findings.html", "figures/status_table.html",
         *[f"seeds/seed{seed}_table.html" for seed in ("000", "001", "002", "003", "004")]]


@pytest.fixture(scope="module")
def reported(tmp_path_factory) -> Path:
    """The tiny cpu run, every default target, in a temporary copy; returns its results folder."""
    repo = copy_repo(tmp_path_factory.mktemp("report") / "repo")
    config = yaml.safe_load((repo / "config/tiny-cpu.yaml").read_text())
    config["conv2d"]["sizes"] = config["cpu"]["sizes"] = [96, 128]
    (repo / "config/report-test.yaml").write_text(yaml.safe_dump(config))
    snakemake(repo, 2, configfile="config/report-test.yaml")
    summaries = sorted(repo.glob("results/**/summary.csv"))
    assert len(summaries) == 1, summaries
    return summaries[0].parent


@pytest.mark.pipeline
def test_every_report_file_is_produced_and_non_empty(reported):
    for name in FIGURES + PAGES:
        path = reported / name
        assert path.is_file() and path.stat().st_size > 0, name
    for name in FIGURES:
        assert (reported / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name


@pytest.mark.pipeline
def test_comparison_has_ratios_where_both_sides_exist(reported):
    table = read_comparison(reported / "seeds/comparison.csv")
    # a defect such as search_timed still gets a ratio (flagged); a launch that never ran does not
    both = table[(table["this_status"] == "ok") & table["this_value"].notna() & ~table["defect"].isin(NEVER_RAN)]
    assert not both.empty  # seed 000 at 128 (direct and cuDNN twins) and seed 004's speed-up
    assert both["ratio"].notna().all() and (both["ratio"] > 0).all()
    assert set(both["seed"]) >= {"000", "004"}
    assert (table[table["this_status"] != "ok"]["ratio"].isna()).all()


@pytest.mark.pipeline
def test_findings_name_the_fastest_kernel_of_the_data(reported):
    summary = read_summary(reported / "summary.csv")
    table = fastest(summary, "conv2d")
    winner = table["fastest"].value_counts().index[0]
    page = (reported / "findings.html").read_text()
    # named by what ran: on cpu, 'cudnn → OpenCV filter2D per channel pair'
    assert re.search(rf"<b>{re.escape(html.escape(winner))}</b> is the fastest in", page)
    largest = table.sort_values(["size", "stride"], ascending=[False, True]).iloc[0]
    assert f"the fastest is <b>{html.escape(largest['fastest'])}</b>" in page
    assert "AMD" in page or "cores" in page or "cpu" in page.lower()


@pytest.mark.pipeline
def test_seed_tables_show_defects(reported):
    page = (reported / "seeds/seed001_table.html").read_text()
    assert "block64_launch_failed" in page and "never ran" in page
    assert "not_run" in page  # the tiny run has no 001 cells: said, not hidden


@pytest.mark.pipeline
def test_tiny_run_names_the_twins_and_reads_one_way_on_every_page(reported):
    summary = read_summary(reported / "summary.csv")
    page = (reported / "findings.html").read_text()
    assert "cudnn → OpenCV filter2D" in page and not re.search(r"<b>(cudnn|cublas)</b>", page)
    # cublas and the tiled sgemm kernels ran one numpy matmul on cpu: one entry, never ranked apart
    gemm = fastest(summary, "gemm")
    assert all("sgemm_vectorized" in label for label in gemm["fastest"] if "cublas" in label)
    comparison = read_comparison(reported / "seeds/comparison.csv")
    for seed, part in comparison.groupby("seed"):
        # the seed's line on the findings page and its table page quote the one shared sentence
        assert seedcompare.ratio_text(part) in page
        table_page = (reported / f"seeds/seed{seed}_table.html").read_text()
        assert all(seedcompare.ratio_text(rows) in table_page for _, rows in part.groupby("table"))


# ---- the report draws without seaborn (its import costs a tools worker over a second), as seaborn would


def test_the_report_style_and_palettes_are_seaborns():
    def without_cmap(style) -> dict:
        return {key: value for key, value in dict(style).items() if key != "image.cmap"}

    assert {**plotting.WHITEGRID, **plotting.NOTEBOOK} == {**without_cmap(sns.axes_style("whitegrid")),
                                                          **sns.plotting_context("notebook")}
    assert plotting.WHITE == without_cmap(sns.axes_style("white"))
    for n in (1, 4, 10, 11, 20, 23):
        assert plotting.palette_colors(n) == list(
            sns.color_palette("colorblind" if n <= 10 else "tab20" if n <= 20 else "husl", n)), n
    for n in (3, 10, 12):
        assert plotting.mpl_colors("tab10", n) == list(sns.color_palette("tab10" if n <= 10 else "husl", n)), n


def test_the_tiling_sweep_draws_what_seaborns_lineplot_draws(tmp_path):
    best = pd.DataFrame([{"ran": ran, "filter": f"filter {f}x{f}", "size": size, "kernel_ms": 0.001 * size * f * k}
                         for k, ran in ((1.0, "direct"), (0.7, "tiled_input"), (1.3, "tiled_cached"))
                         for f in (3, 9, 5) for size in (1024, 64, 320)]).sample(frac=1.0, random_state=3)
    pngs = []
    for ours in (True, False):
        with plotting.report_style():
            figure, axes = new_figure(1, 1)
            ax = axes[0][0]
            if ours:
                handles = seedfigures._sweep_lines(ax, best)
            else:
                sns.lineplot(data=best, x="size", y="kernel_ms", hue="ran", style="filter", markers=True,
                             estimator=None, ax=ax, palette=plotting.palette_colors(best["ran"].nunique()))
                handles = None
            ax.set_xlabel("image size (pixels)")  # the figure names both axes, seaborn would name them by column
            ax.set_ylabel("kernel time (ms, best variant)")
            log_y_axis(ax)
            ax.legend(handles=handles, loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False, fontsize=8)
            pngs.append(save_figure(figure, tmp_path / f"{ours}.png").read_bytes())
    assert pngs[0] == pngs[1]


def test_the_report_code_imports_neither_seaborn_nor_scipy():
    probe = ("import sys, matplotlib; matplotlib.use('Agg'); import convlab.app.handlers.report, "
             "convlab.app.handlers.history, convlab.app.handlers.compare, convlab.app.handlers.historypage; "
             "print(sorted({m.split('.')[0] for m in sys.modules} & {'seaborn', 'scipy'}))")
    result = subprocess.run([sys.executable, "-c", probe], env={**os.environ, "PYTHONPATH": str(REPO / "workflow")},
                            capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "[]", result.stderr
