"""The findings page ranks kernels within one precision: a TF32 plan is never called the fastest among strict
fp32 kernels, its own winner is shown with its precision named, and the page's tables fit a 1,400 px window.
Hand-made GPU summaries where the TF32 cuDNN plans beat every strict fp32 kernel."""

import html
import math
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from convlab.plan.registry import load_registry
from convlab.report.findings import fastest, findings_html, reduced_precision_fastest
from convlab.report.precision import STRICT, UNKNOWN, kernel_precision, row_precisions
from convlab.report.seedcompare import compare

SEED_COLUMNS = ["seed", "table", "gpu", "unit", "size", "stride", "filter_size", "method", "block", "layer", "batch",
                "value", "defect", "source_line"]
NO_MAPPING = {"mappings": [], "unmapped": []}
GPU = "NVIDIA H200"
# CNN layers (C, H, W, K) of the planted summary, batch 1
LAYERS = [(64, 56, 56, 64), (128, 28, 28, 128), (256, 14, 14, 256)]


def _row(**values) -> dict:
    """A cuda-backend row with what the findings page reads."""
    row = {"experiment": "conv2d", "kernel": "", "variant": "default", "backend": "cuda", "implementation": "",
           "size": 0.0, "batch": 1.0, "H": 0.0, "W": 0.0, "C_in": 3.0, "C_out": 3.0, "filter_size": 3.0,
           "stride": 1.0, "gemm_m": math.nan, "status": "ok", "reason": "", "kernel_ms": math.nan,
           "gflops": math.nan, "flops": math.nan, "bytes": math.nan, "device": GPU, "timing_mode": "warm",
           "code_version": "v1"}
    row.update(values)
    return row


def _layer(kernel: str, ms: float, layer: tuple[int, int, int, int], variant: str = "default") -> dict:
    c, h, w, k = layer
    return _row(experiment="winograd_layers", kernel=kernel, variant=variant, size=float(h), H=float(h), W=float(w),
                C_in=float(c), C_out=float(k), kernel_ms=ms)


def _conv(kernel: str, ms: float, size: int = 4096, variant: str = "default") -> dict:
    return _row(kernel=kernel, variant=variant, size=float(size), H=float(size), W=float(size), kernel_ms=ms)


@pytest.fixture
def tf32_wins() -> pd.DataFrame:
    """The H200 case: the TF32 cuDNN plan is fastest in every CNN layer and every conv2d problem."""
    rows = []
    for layer in LAYERS:
        rows += [_layer("cudnn_tf32_nchw", 0.10, layer, "plan~best"), _layer("cudnn_nchw", 0.30, layer, "plan~best"),
                 _layer("winograd_batched", 0.25, layer, "block~16"), _layer("conv_naive_batched", 0.90, layer)]
    for size in (2048, 4096):
        rows += [_conv("cudnn_tf32", 0.05, size, "plan~best"), _conv("cudnn", 0.20, size, "plan~best"),
                 _conv("direct", 0.15, size, "block~16")]
    return pd.DataFrame(rows)


def _page(summary: pd.DataFrame) -> str:
    return findings_html(summary, compare(pd.DataFrame(columns=SEED_COLUMNS), NO_MAPPING, summary), {}, {})


def test_precision_comes_from_the_registry():
    registry = load_registry()
    assert kernel_precision("cudnn_tf32_nchw", registry) == "tf32"
    assert kernel_precision("cudnn_tf32", registry) == "tf32"
    assert kernel_precision("cudnn_nchw", registry) == STRICT
    assert kernel_precision("winograd_batched", registry) == STRICT
    # a kernel the registry does not know is not taken for strict fp32
    assert kernel_precision("no_such_kernel", registry) == UNKNOWN


def test_tf32_is_never_the_fastest_fp32_kernel(tf32_wins):
    for experiment, tf32 in (("winograd_layers", "cudnn_tf32_nchw"), ("conv2d", "cudnn_tf32")):
        table = fastest(tf32_wins, experiment)
        assert not table.empty
        named = set(table["fastest"]) | set(table["runner_up"]) | set(table["library"]) | set(table["best_non_library"])
        assert tf32 not in named, table
    layers = fastest(tf32_wins, "winograd_layers")
    assert set(layers["fastest"]) == {"winograd_batched"}
    # ours against the strict fp32 library, never against the TF32 plan
    assert set(layers["library"]) == {"cudnn_nchw"}
    assert layers["speedup_over_library"].tolist() == pytest.approx([0.30 / 0.25] * len(LAYERS))


def test_the_page_headline_ranks_strict_fp32_only(tf32_wins):
    page = _page(tf32_wins)
    assert "Among strict FP32 kernels, <b>winograd_batched</b> is the fastest in 3 of 3 problems" in page
    assert "among strict FP32 kernels the fastest is <b>direct</b>" in page
    # no sentence calls a TF32 plan the fastest without naming its precision
    for tf32 in ("cudnn_tf32_nchw", "cudnn_tf32"):
        assert not re.search(rf"<b>{tf32}</b> is the fastest", page)
        assert f"the fastest is <b>{tf32}</b>" not in page


def test_the_tf32_winner_is_shown_with_its_precision(tf32_wins):
    page = _page(tf32_wins)
    assert "<b>cudnn_tf32_nchw</b> (TF32) is the fastest TF32 code in 3 of 3 problems" in page
    assert "<b>cudnn_tf32</b> (TF32) is the fastest TF32 code in 2 of 2 problems" in page
    table = reduced_precision_fastest(tf32_wins, "winograd_layers")
    assert set(table["precision"]) == {"TF32"} and set(table["fastest"]) == {"cudnn_tf32_nchw"}
    # set beside the fastest strict fp32 code of the same layer: 0.25 ms against 0.10 ms
    assert set(table["fastest_fp32"]) == {"winograd_batched"}
    assert table["speedup_over_fp32"].tolist() == pytest.approx([2.5] * len(LAYERS))
    assert "median 2.5x the speed of the fastest strict FP32 code" in page


def test_only_tf32_ran_says_so_and_names_no_fp32_winner():
    summary = pd.DataFrame([_layer("cudnn_tf32_nchw", 0.1, layer) for layer in LAYERS])
    assert fastest(summary, "winograd_layers").empty
    page = _page(summary)
    assert "No strict FP32 kernel ran ok." in page
    assert "<b>cudnn_tf32_nchw</b> (TF32) is the fastest TF32 code in 3 of 3 problems" in page
    assert "no strict FP32 code ran the same problems" in page


def test_a_kernel_of_unknown_precision_is_ranked_apart(tf32_wins):
    summary = pd.concat([tf32_wins, pd.DataFrame([_layer("retired_kernel", 0.01, layer) for layer in LAYERS])])
    assert set(row_precisions(summary[summary["kernel"] == "retired_kernel"])) == {UNKNOWN}
    assert "retired_kernel" not in set(fastest(summary, "winograd_layers")["fastest"])
    assert "<b>retired_kernel</b> (unknown precision)" in _page(summary)


# ---- the page fits a 1,400 px window

LONG = ("cublas, sgemm_pipelined, sgemm_register, sgemm_shared, sgemm_vectorized → numpy float32 BLAS matmul "
        "(cpu twin of the tiled SGEMM kernels)")


@pytest.fixture
def wide_page(tf32_wins) -> str:
    """The planted summary with long variants and a failed cell with a long reason: before the tables wrapped,
    such a page was wider than 1,400 px."""
    summary = tf32_wins.copy()
    summary["variant"] = summary["variant"].where(summary["kernel"] != "direct",
                                                  "block~256_cols~1_path~0_rows~8_unroll~4_vector~4")
    failed = _conv("im2col_gemm_register", math.nan, 4096, "block~32_regs~8_tile~64x64_split~4")
    failed.update(status="invalid_config", reason="launch refused: CUDA_ERROR_INVALID_VALUE: " + LONG)
    return _page(pd.concat([summary, pd.DataFrame([failed])], ignore_index=True))


def test_tables_have_the_wrapping_style(wide_page):
    style = re.search(r"<style>(.*?)</style>", wide_page, re.S).group(1)
    assert re.search(r"table\{[^}]*table-layout:auto", style) and re.search(r"table\{[^}]*max-width:100%", style)
    assert re.search(r"th,td\{[^}]*overflow-wrap:break-word", style)
    # long labels and column names break at their parts, numbers never do
    assert "block~<wbr>32_<wbr>regs~<wbr>8" in wide_page and "speedup_<wbr>over_<wbr>library" in wide_page
    assert not re.search(r"\d,<wbr>\d", wide_page)
    # the break opportunities are markup only: the text a reader sees is unchanged
    cells = re.findall(r"<td>(.*?)</td>", wide_page)
    assert "block~32_regs~8_tile~64x64_split~4" in {html.unescape(c.replace("<wbr>", "")) for c in cells}


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


# Writes the page's width once laid out: wider than the window means a horizontal scroll bar.
WIDTH_PROBE = ("<script>window.addEventListener('load', () => { const out = document.createElement('pre'); "
               "out.id = 'width-probe'; out.textContent = document.documentElement.scrollWidth; "
               "document.body.appendChild(out); });</script>")


@pytest.mark.pipeline  # the slow tier: headless Chromium
def test_the_page_fits_a_1400_px_window(wide_page, tmp_path: Path):
    if _chromium() is None:
        pytest.skip("no chromium or chromium-browser binary on PATH: the page cannot be laid out here")
    page = tmp_path / "findings.html"
    page.write_text(wide_page.replace("</body>", WIDTH_PROBE + "</body>"))
    # --no-sandbox: the tests may run as root, where Chromium's sandbox refuses to start
    result = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                             f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,2000",
                             "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
                            capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="width-probe">(\d+)</pre>', result.stdout)
    assert found, f"the probe never reported (chromium exit {result.returncode}):\n{result.stderr[-3000:]}"
    assert int(found.group(1)) <= 1400
