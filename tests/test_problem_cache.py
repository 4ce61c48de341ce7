"""What the cells of one problem share in a worker (convlab.plan.problemcache), on the cpu backend:
the key, a fresh input of its own for every cell, one reference for all of them, nothing kept with
capacity 0 (a one-shot process), the bounds, the damage check, and the same rows either way."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import pytest

import convlab.run.steps as steps
from convlab.backends.cpu import CpuBackend
from convlab.plan.config import validate_config
from convlab.plan.grid import build_cells
from convlab.plan.operands import ConvOperands
from convlab.plan.problemcache import PROBLEMS, ProblemCache, SharedProblem, checksum, problem_key
from convlab.problem.geometry import ConvProblem
from convlab.run.runner import run_cell
from convlab.run.steps import CellInputs, comparing_module, load_inputs, place

SIZE = 40
# What the rows must agree on whether or not the problem was shared (times aside).
VERDICT = ("status", "reason", "max_rel_err", "rel_l2_err", "nonfinite", "tolerance", "flops", "bytes", "H", "W",
           "OH", "OW", "C_in", "C_out", "implementation", "layout")


@pytest.fixture
def picture(tmp_path: Path) -> Path:
    path = tmp_path / f"input_{SIZE}.png"
    cv2.imwrite(str(path), np.random.default_rng(2).integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8))
    return path


@pytest.fixture(scope="module")
def bandwidth(tmp_path_factory) -> Path:
    """A copy bandwidth recorded for this cpu, so that no cell measures one (a quarter second each)."""
    path = tmp_path_factory.mktemp("device") / "cpu_copy_bandwidth.json"
    path.write_text(json.dumps({"backend": "cpu", "device": CpuBackend().device_info()["device"], "copy_gbps": 10.0}))
    return path


def cpu_cells() -> list:
    """The tiny grid's cells on the cpu backend: conv2d at two strides, a tiling mosaic, CNN
    layers and GEMM."""
    config = validate_config({
        "backend": "cpu", "source_size": SIZE,
        "conv2d": {"sizes": [SIZE], "strides": [1, 2], "kernels": ["direct", "cudnn", "im2col_cublas", "fft"]},
        "cpu": {"sizes": [SIZE], "budget_s": 0.01, "tiling": {"sizes": [SIZE]}, "gemm": {"sizes": [32]},
                "winograd_layers": {"layers": [[3, 10, 10, 4]], "batches": [2]}},
        "timing": {"min_reps": 3, "budget_s": 0.01, "e2e_reps": 1},
    })
    return build_cells(config, "cpu")


def one_problem(cells: list) -> list:
    """The cells of the first conv2d problem: several kernels, one problem."""
    first = next(c for c in cells if c.experiment == "conv2d")
    return [c for c in cells if problem_key(c, None) == problem_key(first, None)]


def test_cells_of_one_problem_share_a_key_and_any_change_to_their_operands_gives_another(picture, tmp_path):
    cells = one_problem(cpu_cells())
    assert len({c.kernel for c in cells}) == 4
    assert len({problem_key(c, picture) for c in cells}) == 1
    cell = cells[0]
    key = problem_key(cell, picture)
    # what the cell runs and how it is timed make the same operands
    same = [replace(cell, kernel="cudnn", tunables={"block": 8}, settings={"math": "tf32"}, device="other",
                    timing={**cell.timing, "budget_s": 9.0}, verify={**cell.verify, "tolerance": {"fp32": 1.0}})]
    assert {problem_key(c, picture) for c in same} == {key}
    changed = [replace(cell, experiment="tiling"), replace(cell, size=SIZE + 1), replace(cell, width=SIZE + 2),
               replace(cell, stride=2), replace(cell, filter_size=5), replace(cell, filter="random"),
               replace(cell, padding=0), replace(cell, in_channels=1), replace(cell, out_channels=4),
               replace(cell, batch=2), replace(cell, verify={**cell.verify, "seed": 7})]
    keys = [problem_key(c, picture) for c in changed]
    assert key not in keys and len(set(keys)) == len(keys)
    other = tmp_path / "other.png"
    other.write_bytes(picture.read_bytes())
    assert problem_key(cell, other) != key  # another file
    os.utime(picture, ns=(0, picture.stat().st_mtime_ns + 10**9))
    assert problem_key(cell, picture) != key  # the same file, changed since
    assert problem_key(cell, tmp_path / "missing.png") is None  # loaded alone, which says why it cannot be
    assert problem_key(cell, None) != key


def test_every_cell_gets_its_own_fresh_input_and_one_that_writes_into_it_changes_nothing_for_the_next(picture, kept):
    backend = CpuBackend()
    cells = one_problem(cpu_cells())
    first, second = (load_inputs(cell, picture) for cell in cells[:2])
    assert first.shared is second.shared and first.operands is second.operands
    layout = backend.layout_for(first.spec)
    placed = place(backend, first, layout)
    pristine = {name: array.copy() for name, array in placed.buffers.inputs.items()}
    for array in placed.buffers.inputs.values():
        array.fill(7.0)  # a kernel that writes into its input
    again = place(backend, second, layout)
    for name, array in again.buffers.inputs.items():
        assert array is not placed.buffers.inputs[name] and array.flags.writeable
        np.testing.assert_array_equal(array, pristine[name])
    # the host arrays the round trip copies in are shared, and read-only
    assert again.host_inputs["input"] is placed.host_inputs["input"]
    assert not again.host_inputs["input"].flags.writeable
    # and the one they copy out into: one buffer, writable, in the output's shape
    assert np.shares_memory(again.host_output, placed.host_output) and again.host_output.flags.writeable
    assert again.host_output.shape == again.buffers.output.shape


def test_one_host_output_serves_every_problem_and_grows_to_the_largest(kept):
    small, large = kept.problem(("small",)), kept.problem(("large",))
    first = small.host_output((4, 5, 1))
    assert np.shares_memory(first, large.host_output((1, 4, 5)))
    bigger = large.host_output((6, 6, 1))
    assert bigger.shape == (6, 6, 1) and not np.shares_memory(first, bigger)
    assert np.shares_memory(small.host_output((2, 3)), bigger)
    assert kept.nbytes == 0  # outside the problems' bytes, which hold nothing else here
    kept.clear()
    assert not np.shares_memory(small.host_output((2, 3)), bigger)  # a cleared cache lets go of it


def resident_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not Path("/proc/self/statm").is_file(), reason="reads the process's resident size from /proc")
def test_the_round_trips_host_output_is_resident_before_any_copy_into_it():
    """np.empty maps its pages on first touch, which a copy into it would pay inside its time."""
    size = 64 << 20
    before = resident_bytes()
    untouched = np.empty(size // 4, dtype=np.float32)
    assert resident_bytes() - before < size // 4
    unkept = SharedProblem().host_output((size // 4,))
    assert resident_bytes() - before > size * 0.9
    assert unkept.flags.writeable and unkept.dtype == np.float32
    del untouched


def test_each_layout_has_its_own_master(kept):
    backend, shared = CpuBackend(), kept.problem(("a problem",))
    image = np.random.default_rng(0).random((6, 5, 3), dtype=np.float32)
    operands = ConvOperands(ConvProblem(6, 5, 3, 2, 3, 1, 1), image, np.ones((2, 3, 3, 3), np.float32))
    hwc = {"input": "hwc", "weights": "oihw", "output": "hwc"}
    chw = {"input": "chw", "weights": "ohwi", "output": "chw"}
    host_hwc, buffers_hwc = operands.place(backend, hwc, shared)
    host_chw, buffers_chw = operands.place(backend, chw, shared)
    assert buffers_hwc.image.shape == (6, 5, 3) and buffers_chw.image.shape == (3, 6, 5)
    np.testing.assert_array_equal(buffers_chw.image, image.transpose(2, 0, 1))
    np.testing.assert_array_equal(buffers_chw.weights, operands.weights.transpose(0, 2, 3, 1))
    assert np.isnan(buffers_chw.output).all() and buffers_chw.output.shape == (2, 6, 5)
    assert host_hwc["input"] is not host_chw["input"]


def test_the_reference_and_the_operands_are_made_once_for_all_cells_of_a_problem(picture, bandwidth, kept,
                                                                                 monkeypatch):
    made = {"reference": 0, "operands": 0}
    reference, load_operands = ConvOperands.reference, steps.load_operands

    def counted_reference(self, xp):
        made["reference"] += 1
        return reference(self, xp)

    def counted_operands(cell, image_path=None):
        made["operands"] += 1
        return load_operands(cell, image_path)

    monkeypatch.setattr(ConvOperands, "reference", counted_reference)
    monkeypatch.setattr(steps, "load_operands", counted_operands)
    cells = one_problem(cpu_cells())
    rows = [run_cell(cell, picture, bandwidth) for cell in cells]
    assert [row["status"] for row in rows] == ["ok"] * len(cells)
    assert made == {"reference": 1, "operands": 1}


def test_capacity_0_keeps_nothing(picture, bandwidth, monkeypatch):
    assert PROBLEMS.capacity == 0  # a one-shot process's
    made = []
    reference = ConvOperands.reference
    monkeypatch.setattr(ConvOperands, "reference", lambda self, xp: made.append(1) or reference(self, xp))
    cells = one_problem(cpu_cells())
    inputs = [load_inputs(cell, picture) for cell in cells[:2]]
    assert inputs[0].operands is not inputs[1].operands and not inputs[0].shared.kept
    assert not inputs[0].shared.long_lived
    for cell in cells[:2]:
        assert run_cell(cell, picture, bandwidth)["status"] == "ok"
    assert len(made) == 2 and len(PROBLEMS) == 0
    off = ProblemCache(0)
    shared = off.problem(("key",))
    master = np.ones(3)
    assert shared.device_input("input", "hwc", lambda: master, np) is master  # no copy, as a cell alone
    assert shared.reference(np, lambda: master) is master and len(off) == 0 and off.nbytes == 0


def test_the_least_recently_used_problem_leaves_first_and_bytes_bound_the_rest():
    cache = ProblemCache(capacity=2, max_bytes=1000)
    small = lambda: np.zeros(10)  # noqa: E731 (80 bytes)
    a, b = cache.problem(("a",)), cache.problem(("b",))
    a.reference(np, small)
    b.reference(np, small)
    cache.problem(("a",))  # used again: b is now the oldest
    c = cache.problem(("c",))
    assert len(cache) == 2 and cache.problem(("a",)) is a and not b.kept and c.kept
    big = cache.problem(("big",))
    value = big.reference(np, lambda: np.zeros(200))  # 1600 bytes: more than all may hold
    assert value.shape == (200,) and not big.kept and len(cache) == 1  # its cell still has it
    assert cache.nbytes <= 1000


def test_a_kept_array_that_changed_since_it_was_made_is_made_again(capsys):
    shared = ProblemCache(capacity=1).problem(("p",))
    made = []

    def master():
        made.append(1)
        return np.arange(12, dtype=np.float32)

    first = shared.device_input("input", "hwc", master, np)
    kept = shared._kept[("device", "input", "hwc")].value
    kept.flags.writeable = True
    kept[5] = np.nan  # a kernel that wrote past its own buffers, into the master
    second = shared.device_input("input", "hwc", master, np)
    np.testing.assert_array_equal(second, first)
    assert len(made) == 2 and "changed since it was made" in capsys.readouterr().err


def test_the_checksum_is_of_the_bits_and_its_order_of_summation_does_not_matter():
    values = np.random.default_rng(3).random(1001)
    assert checksum(np, values) == checksum(np, values[::-1].copy()[::-1])
    assert checksum(np, values) != checksum(np, np.where(np.arange(1001) == 500, -values, values))
    assert checksum(np, np.float32([0.0])) != checksum(np, np.float32([-0.0]))
    # the words' sum wraps modulo 2**64, as the device kernel's does
    assert checksum(np, np.array([2**64 - 1, 2], dtype=np.uint64)) == 1
    assert checksum(np, np.float64([])) == 0


def test_the_same_rows_with_and_without_sharing(picture, bandwidth, kept):
    chosen = {("conv2d", "direct"), ("conv2d", "cudnn"), ("tiling", "direct"), ("winograd_layers", "winograd_batched"),
              ("gemm", "sgemm_naive")}
    cells = [c for c in cpu_cells() if (c.experiment, c.kernel) in chosen]
    assert {(c.experiment, c.kernel) for c in cells} == chosen
    kept.capacity = 0
    alone = [run_cell(cell, picture if cell.image else None, bandwidth) for cell in cells]
    kept.capacity = 4
    shared = [run_cell(cell, picture if cell.image else None, bandwidth) for cell in cells]
    again = [run_cell(cell, picture if cell.image else None, bandwidth) for cell in cells]  # all from the cache now
    for one, two, three, cell in zip(alone, shared, again, cells):
        assert [one[c] for c in VERDICT] == [two[c] for c in VERDICT] == [three[c] for c in VERDICT], cell.path
        assert one["status"] == "ok", (cell.path, one["reason"])


def test_the_output_is_compared_on_the_device_in_a_worker_and_on_the_host_for_small_problems_or_alone():
    class Gpu:
        xp = object()  # stands for cupy

    def inputs(size: int, shared: SharedProblem) -> CellInputs:
        problem = ConvProblem(size, size, 3, 3, 3, 1, 1)
        operands = ConvOperands(problem, np.zeros((size, size, 3), np.float32), np.zeros((3, 3, 3, 3), np.float32))
        return CellInputs(cpu_cells()[0], None, operands, shared)

    worker, alone = SharedProblem(long_lived=True), SharedProblem()
    assert comparing_module(Gpu(), inputs(128, worker)) is Gpu.xp  # 2.6e6 FLOPs
    assert comparing_module(Gpu(), inputs(128, alone)) is np  # a fresh process would load float64 kernels
    assert comparing_module(Gpu(), inputs(1024, alone)) is Gpu.xp  # 1.7e8 FLOPs
    assert comparing_module(Gpu(), inputs(32, worker)) is np  # too small to repay the launches
    assert comparing_module(CpuBackend(), inputs(1024, worker)) is np


def test_placing_without_a_shared_problem_is_placing_for_one_cell():
    backend = CpuBackend()
    image = np.random.default_rng(1).random((4, 4, 3), dtype=np.float32)
    operands = ConvOperands(ConvProblem(4, 4, 3, 1, 3, 1, 1), image, np.ones((1, 3, 3, 3), np.float32))
    host, buffers = operands.place(backend, {"input": "hwc", "weights": "oihw", "output": "hwc"})
    assert host["input"] is image and image.flags.writeable  # nothing frozen, nothing kept
    np.testing.assert_array_equal(buffers.image, image)
