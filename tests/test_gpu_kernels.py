"""Every registered kernel on the GPU against the float64 reference (marker gpu).

Non-square and odd sizes, strides 1-3, filters 3/5/7, random weights, every tunable value.
A launch is allowed to be refused (invalid_config) only where its geometry exceeds CUDA's
limits (over 1024 threads, or more shared memory per block than the GPU allows when a kernel
opts in above the default 48 KiB); anything else must be ok.
"""

import numpy as np
import pytest
from gpu_helpers import make_cell

from convlab.plan.launch import dims, evaluate, holds, problem_names
from convlab.plan.operands import ConvOperands
from convlab.plan.registry import load_registry
from convlab.problem.geometry import ConvProblem
from convlab.problem.weights import make_weights
from convlab.run.runner import CellInputs, measure_cell

MAX_THREADS = 1024
# odd rows (4-byte copies), and widths of a multiple of 4 (16-byte copies of aligned rows)
PROBLEMS = [(257, 130), (31, 17), (67, 132), (300, 256)]
# the image-convolution kernels (3 channels); tests/test_gpu_families.py covers the other families
CUDA_KERNELS = sorted(name for name, spec in load_registry().items() if "conv2d" in spec.experiments)


def variants(spec):
    """Every value of every tunable at least once: the first combination, then each other value
    of one tunable with the others at their first value (the full product of a kernel with three
    tunables would spend minutes compiling)."""
    first = {key: values[0] for key, values in spec.tunables.items()}
    chosen = [first]
    for key, values in sorted(spec.tunables.items()):
        chosen += [{**first, key: value} for value in values[1:]]
    return chosen


def beyond_limits(spec, tunables, problem, max_shared: int) -> bool:
    names = problem_names(problem, tunables)
    if not all(holds(condition, names) for condition in spec.requires):
        return True
    for stage in spec.stages:
        if "function" not in stage:
            continue
        block = dims(stage["block"], names)
        if block[0] * block[1] * block[2] > MAX_THREADS:
            return True
        if evaluate(stage.get("shared_bytes", 0), names) > max_shared:
            return True
    return False


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", CUDA_KERNELS)
def test_kernel_matches_float64_everywhere(backend, kernel):
    spec = load_registry()[kernel]
    rng = np.random.default_rng(7)
    failures = []
    for height, width in PROBLEMS:
        image = rng.random((height, width, 3), dtype=np.float32)
        for k in (3, 5, 7):
            weights = make_weights("random", 3, 3, k, seed=k)
            for stride in (1, 2, 3):
                problem = ConvProblem(height, width, 3, 3, k, stride, (k - 1) // 2)
                for tunables in variants(spec):
                    cell = make_cell(spec, height, stride, k, 3, tunables)
                    row = measure_cell(CellInputs(cell, spec, ConvOperands(problem, image, weights)), backend=backend)
                    where = f"{kernel} {tunables} {height}x{width} k{k} s{stride}"
                    if spec.unsupported_reason(stride, k):
                        expected = "unsupported"
                    elif beyond_limits(spec, tunables, problem, int(backend.properties["sharedMemPerBlockOptin"])):
                        expected = "invalid_config"
                    else:
                        expected = "ok"
                    if row["status"] != expected:
                        failures.append(f"{where}: {row['status']} (expected {expected}) {row.get('reason')}")
    assert not failures, "\n".join(failures[:20]) + f"\n({len(failures)} failures)"


@pytest.mark.gpu
def test_more_output_channels(backend):
    """K = 8 output channels: kernels must not assume the seed's 3."""
    rng = np.random.default_rng(1)
    image = rng.random((40, 33, 3), dtype=np.float32)
    weights = make_weights("random", 8, 3, 3, seed=1)
    problem = ConvProblem(40, 33, 3, 8, 3, 1, 1)
    failures = []
    for kernel in CUDA_KERNELS:
        spec = load_registry()[kernel]
        for tunables in variants(spec)[:1]:
            cell = make_cell(spec, 40, 1, 3, 8, tunables)
            row = measure_cell(CellInputs(cell, spec, ConvOperands(problem, image, weights)), backend=backend)
            if row["status"] != "ok":
                failures.append(f"{kernel} {tunables}: {row['status']} {row.get('reason')}")
    assert not failures, "\n".join(failures)



FLOOR_KERNELS = ["conv_floor_hwc", "conv_floor_nchw"]
# 512 x 512 outputs is the largest image whose floor kernels read the filter into registers;
# one more row and they take it from constant memory
REGISTERS, CONSTANT = (512, 512), (513, 512)


def floor_names(spec, height: int, width: int, stride: int, filter_size: int = 3) -> dict[str, int]:
    """The names a floor kernel's launch sees: the problem's, the first tunables and its defines."""
    problem = ConvProblem(height, width, 3, 3, filter_size, stride, filter_size // 2)
    names = problem_names(problem, {key: values[0] for key, values in spec.tunables.items()})
    return {**names, **spec.evaluated_defines(names)}


def taps_in_registers(spec, height: int, width: int, stride: int, filter_size: int = 3) -> int:
    return floor_names(spec, height, width, stride, filter_size)["FLOOR_TAPS_IN_REGISTERS"]


@pytest.mark.parametrize("kernel", FLOOR_KERNELS)
def test_floor_kernels_read_the_filter_into_registers_only_for_launch_bound_images(kernel):
    spec = load_registry()[kernel]
    assert taps_in_registers(spec, *REGISTERS, 1) == 1
    assert taps_in_registers(spec, *CONSTANT, 1) == 0
    assert [taps_in_registers(spec, n, n, 1) for n in (128, 256, 1024, 4096)] == [1, 1, 0, 0]
    # the outputs count, not the input: 1024^2 at stride 2 has 512^2 outputs
    assert taps_in_registers(spec, 1024, 1024, 2) == 1
    # 5x5 filters (225 taps) do not fit beside the rest: constant memory at every size
    assert taps_in_registers(spec, 128, 128, 1, filter_size=5) == 0


@pytest.mark.parametrize("kernel", FLOOR_KERNELS)
def test_floor_kernels_fill_the_constant_filter_exactly_where_they_declare_it(kernel):
    """The kernel declares c_weights only where it reads the filter from it (not in registers):
    the runner fills it there and nowhere else (a module with the symbol is dearer to launch)."""
    spec = load_registry()[kernel]
    fill = spec.constants["c_weights"]
    assert fill.buffer == "weights"
    for size, stride, filter_size in ((128, 1, 3), (512, 1, 3), (513, 1, 3), (1024, 2, 3), (4096, 1, 3), (128, 1, 5)):
        names = floor_names(spec, size, size, stride, filter_size)
        assert fill.applies(names) == (names["FLOOR_TAPS_IN_REGISTERS"] == 0), (size, stride, filter_size)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", FLOOR_KERNELS)
def test_floor_kernels_match_float64_with_the_filter_in_registers_and_in_constant_memory(backend, kernel):
    spec = load_registry()[kernel]
    rng = np.random.default_rng(3)
    weights = make_weights("random", 3, 3, 3, seed=3)
    failures = []
    for height, width in (REGISTERS, CONSTANT):
        image = rng.random((height, width, 3), dtype=np.float32)
        problem = ConvProblem(height, width, 3, 3, 3, 1, 1)
        for tunables in variants(spec):
            cell = make_cell(spec, height, 1, 3, 3, tunables)
            row = measure_cell(CellInputs(cell, spec, ConvOperands(problem, image, weights)), backend=backend)
            if row["status"] != "ok":
                failures.append(f"{kernel} {tunables} {height}x{width}: {row['status']} {row.get('reason')}")
    assert not failures, "\n".join(failures)
