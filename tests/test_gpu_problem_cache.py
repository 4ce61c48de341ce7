"""What the cells of one problem share, on a real GPU (marker gpu): the same rows (status and errors)
whether a problem's operands, device inputs and reference are shared or made for each cell, for
kernels of several layouts and families; a fresh device copy of the inputs for every cell; and
compare() giving the same verdict on the host and on the device."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from convlab.plan.config import validate_config
from convlab.plan.grid import build_cells
from convlab.problem.verify import compare, reference_scale
from convlab.problem.wordsum import word_sum
from convlab.run.runner import run_cell
from convlab.run.steps import comparing_module, load_inputs, place

pytestmark = pytest.mark.gpu

SIZE = 256  # 1e7 FLOPs: compared on the device in a worker, on the host in a one-shot process
KERNELS = {"conv2d": ["direct", "tiled_output", "im2col_cublas", "winograd", "cudnn", "fft"],
           "winograd_layers": ["winograd_batched", "conv_naive_batched"], "gemm": ["sgemm_shared", "cublas"]}


@pytest.fixture
def picture(tmp_path: Path) -> Path:
    path = tmp_path / f"input_{SIZE}.png"
    cv2.imwrite(str(path), np.random.default_rng(4).integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8))
    return path


def cells() -> list:
    config = validate_config({
        "backend": "cuda", "source_size": SIZE,
        "conv2d": {"sizes": [SIZE], "strides": [1], "kernels": KERNELS["conv2d"]},
        "tiling": {"enabled": False},
        "winograd_layers": {"layers": [[16, 28, 28, 32]], "batches": [2], "kernels": KERNELS["winograd_layers"]},
        "gemm": {"sizes": [256], "kernels": KERNELS["gemm"]},
        "kernels": {name: {"block": [16]} for name in ("direct", "tiled_output")},
        "timing": {"min_reps": 3, "budget_s": 0.05, "e2e_reps": 1},
    })
    chosen = build_cells(config, "cuda")
    firsts = {}
    for cell in chosen:  # one variant of each kernel
        firsts.setdefault(cell.kernel, cell)
    return list(firsts.values())


def test_the_same_rows_whether_the_problem_is_shared_or_not(picture, kept, backend):
    grid = cells()
    assert {c.kernel for c in grid} == {k for names in KERNELS.values() for k in names}
    kept.capacity = 0
    alone = [run_cell(cell, picture if cell.image else None, backend=backend) for cell in grid]
    kept.capacity = 4
    shared = [run_cell(cell, picture if cell.image else None, backend=backend) for cell in grid]
    again = [run_cell(cell, picture if cell.image else None, backend=backend) for cell in grid]
    for cell, one, two, three in zip(grid, alone, shared, again):
        assert one["status"] == two["status"] == three["status"] == "ok", (cell.path, one["reason"], two["reason"])
        assert one["nonfinite"] == two["nonfinite"] == three["nonfinite"] == 0
        # alone the output is compared on the host, shared on the device: the same errors but for rounding
        for column in ("max_rel_err", "rel_l2_err"):
            assert two[column] == pytest.approx(one[column], rel=1e-6, abs=1e-12), (cell.path, column)
            assert three[column] == pytest.approx(two[column], rel=1e-6, abs=1e-12), (cell.path, column)


def test_every_cell_gets_a_fresh_device_copy_that_it_may_write_into(picture, kept, backend):
    import cupy

    cell = next(c for c in cells() if c.kernel == "direct")
    first, second = load_inputs(cell, picture), load_inputs(cell, picture)
    assert comparing_module(backend, first) is cupy
    layout = backend.layout_for(first.spec)
    one = place(backend, first, layout)
    pristine = {name: cupy.asnumpy(array) for name, array in one.buffers.inputs.items()}
    for array in one.buffers.inputs.values():
        array.fill(7.0)
    two = place(backend, second, layout)
    for name, array in two.buffers.inputs.items():
        assert array.data.ptr != one.buffers.inputs[name].data.ptr
        np.testing.assert_array_equal(cupy.asnumpy(array), pristine[name])


@pytest.mark.parametrize("layout", ["hwc", "chw"])
@pytest.mark.parametrize("damage", ["none", "nan", "inf", "off"])
def test_compare_gives_the_same_verdict_on_the_host_and_on_the_device(damage, layout):
    import cupy

    rng = np.random.default_rng(6)
    reference = rng.uniform(-1, 1, (64, 48, 3))
    output = (reference * (1 + rng.uniform(-1e-7, 1e-7, reference.shape))).astype(np.float32)
    if damage == "nan":
        output[3, 4, 1] = np.nan
    if damage == "inf":
        output[7, 2, 2] = -np.inf
    if damage == "off":
        output[10, 10, 0] += 0.5
    host = compare(output, reference, 1e-5, np)
    on_device = cupy.asarray(output)
    if layout == "chw":  # a planar kernel's output, compared through its HWC view (strided)
        on_device = cupy.ascontiguousarray(on_device.transpose(2, 0, 1)).transpose(1, 2, 0)
    device_reference = cupy.asarray(reference)
    device = compare(on_device, device_reference, 1e-5, cupy, reference_scale(device_reference, cupy))
    assert (device.passed, device.nonfinite, device.tolerance) == (host.passed, host.nonfinite, host.tolerance)
    assert device.max_rel_err == pytest.approx(host.max_rel_err, rel=1e-9)
    assert device.rel_l2_err == pytest.approx(host.rel_l2_err, rel=1e-9)
    assert device.reason == host.reason


@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32, np.float64])
@pytest.mark.parametrize("length", [0, 1, 31, 1000, 2048 * 256 * 3 + 5])
def test_the_device_word_sum_is_the_host_one(dtype, length):
    """The checksum's own kernel gives NumPy's exact sum of the words, modulo 2**64, at every word
    size and at lengths below a warp, between, and past one pass of the grid; on a strided view too."""
    import cupy

    rng = np.random.default_rng(length)
    words = rng.integers(0, np.iinfo(np.uint64).max, length, dtype=np.uint64, endpoint=True)
    values = words.view(np.uint8)[: length * np.dtype(dtype).itemsize].view(dtype)
    assert word_sum(cupy, cupy.asarray(values)) == word_sum(np, values)
    if length > 1:
        strided = values.reshape(-1)[::2]
        assert word_sum(cupy, cupy.asarray(values)[::2]) == word_sum(np, strided)
