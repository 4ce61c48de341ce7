"""Paired re-measurement on a real GPU (marker gpu): a kept version of `direct` restored from the
database and measured side by side with the current one. The same files give SAME; a previous
version with a planted slow-down of known size (a tenth of its output rows computed twice) makes
the current one FASTER; a previous version that does not compile is refused with its reason."""

from __future__ import annotations

import math

import pytest
from gpu_helpers import gpu_cells, kept_version, write_image

from convlab.history.verdictrule import verdict_of_interval
from convlab.plan.config import validate_config
from convlab.plan.grid import build_cells
from convlab.plan.registry import get_kernel
from convlab.run.paired import GRAPH_BELOW_MS, PairRefused, measure_pair
from convlab.run.runner import run_cell

THRESHOLD = 0.02


def planted(source: str, percent: int) -> str:
    """``source`` (direct.cu) with rows oy < OH * percent / 100 accumulated twice and halved: the
    same output, that much more work in those rows."""
    start, end = source.index("    const int iy0"), source.index("    float* out = output")
    body = (f"    const int passes = (oy * 100 < OH * {percent}) ? 2 : 1;\n"
            "    for (int pass = 0; pass < passes; ++pass) {\n" + source[start:end] + "    }\n")
    text = source[:start] + body + source[end:]
    return text.replace("out[k] = acc[k];", "out[k] = acc[k] / passes;")


@pytest.fixture
def cell(tmp_path):
    (cell,) = gpu_cells("direct", 1024, [1], extra={"direct": {"block": [16]}})
    return cell, write_image(tmp_path / "input_1024.png", 1024, 1024)


@pytest.mark.gpu
def test_the_same_files_measured_side_by_side_are_same(tmp_path, cell, backend):
    cell, image = cell
    previous = kept_version(tmp_path, get_kernel("direct").source.read_text())
    result = measure_pair(cell, image, previous, THRESHOLD / 4, 2.0, backend)
    print(f"A/A: x{result.ratio:.4f} [{result.low:.4f}, {result.high:.4f}], {result.rounds} rounds, {result.stop}")
    assert verdict_of_interval(result.low, result.high, THRESHOLD) == "SAME"
    assert result.previous_ms > 0 and result.new_ms > 0


@pytest.mark.gpu
def test_a_planted_slow_down_of_the_previous_version_makes_the_current_one_faster(tmp_path, cell, backend):
    cell, image = cell
    previous = kept_version(tmp_path, planted(get_kernel("direct").source.read_text(), 10))
    result = measure_pair(cell, image, previous, THRESHOLD / 4, 2.0, backend)
    print(f"previous planted +10 % rows: x{result.ratio:.4f} [{result.low:.4f}, {result.high:.4f}], "
          f"{result.rounds} rounds")
    assert verdict_of_interval(result.low, result.high, THRESHOLD) == "FASTER"
    assert 0.8 < result.ratio < 0.97


@pytest.mark.gpu
def test_a_previous_version_that_does_not_compile_is_refused_with_its_reason(tmp_path, cell, backend):
    cell, image = cell
    previous = kept_version(tmp_path, get_kernel("direct").source.read_text().replace("acc[k] = 0.0f;", "acc[k] = ;"))
    with pytest.raises(PairRefused, match="error"):
        measure_pair(cell, image, previous, THRESHOLD / 4, 2.0, backend)


@pytest.mark.gpu
def test_cells_near_the_graph_line_are_sampled_alike_on_both_sides_and_same_with_themselves(tmp_path, backend):
    """fft at 256² runs 0.045–0.05 ms a launch on an H200, across the pair's graph line (0.05 ms):
    sampled each its own way, it was x0.655 against itself. And the `direct` cell whose launch
    lies nearest the line, as a kept copy of its own files against itself."""
    (fft,) = gpu_cells("fft", 256, [1])
    image = write_image(tmp_path / "input_256.png", 256, 256)
    near = []
    for size in (512, 1024, 2048):
        (cell,) = gpu_cells("direct", size, [1], extra={"direct": {"block": [16]}})
        row = run_cell(cell, write_image(tmp_path / f"input_{size}.png", size, size), backend=backend)
        near.append((abs(math.log(row["kernel_ms"] / GRAPH_BELOW_MS)), cell, tmp_path / f"input_{size}.png"))
    _, direct, direct_image = min(near, key=lambda entry: entry[0])
    copy = kept_version(tmp_path, get_kernel("direct").source.read_text())
    for cell, picture, previous in [(fft, image, get_kernel("fft"))] * 4 + [(direct, direct_image, copy)] * 3:
        result = measure_pair(cell, picture, previous, THRESHOLD / 4, 1.0, backend)
        print(f"{cell.kernel} {cell.size}: x{result.ratio:.4f} [{result.low:.4f}, {result.high:.4f}], sampled "
              f"{result.sampling}, {result.previous_ms:.4f} / {result.new_ms:.4f} ms")
        assert result.sampling.startswith("graph of ") or result.sampling == "per launch"
        assert abs(result.previous_ms / result.new_ms - 1) < 0.1, "the two sides were sampled apart"
        # SAME on a quiet GPU; beside the suite's other half, at worst UNCLEAR, never a call
        assert verdict_of_interval(result.low, result.high, THRESHOLD) in ("SAME", "UNCLEAR")
        assert abs(result.ratio - 1) < 0.03


@pytest.mark.gpu
def test_a_kernel_of_four_launches_against_itself_is_same_in_every_pair(backend):
    """winograd_batched (three transforms and a cuBLAS GEMM a run) at batch 1 runs about 0.05 ms a
    run: with the rounds' order strictly alternating, half of its pairs against itself came out
    x0.96 or x1.04 with narrow intervals on an H200."""
    config = validate_config({
        "backend": "cuda", "winograd_layers": {"layers": [[64, 112, 112, 128]], "batches": [1],
                                               "kernels": ["winograd_batched"]},
        "kernels": {"winograd_batched": {"block": [128]}},
        **{family: {"enabled": False} for family in ("conv2d", "tiling", "gemm")}})
    (cell,) = build_cells(config, "cuda")
    for _ in range(6):
        result = measure_pair(cell, None, get_kernel("winograd_batched"), THRESHOLD / 4, 1.0, backend)
        print(f"winograd_batched against itself: x{result.ratio:.4f} [{result.low:.4f}, {result.high:.4f}], "
              f"{result.rounds} rounds, sampled {result.sampling}")
        assert verdict_of_interval(result.low, result.high, THRESHOLD) in ("SAME", "UNCLEAR")
        assert abs(result.ratio - 1) < 0.02
