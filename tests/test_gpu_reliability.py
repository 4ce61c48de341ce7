"""Faults on a real GPU (marker gpu): out of memory, and repeat-run stability."""

import numpy as np
import pytest
from gpu_helpers import VERIFY

from convlab.plan.cell import Cell
from convlab.plan.operands import ConvOperands
from convlab.plan.registry import get_kernel
from convlab.problem.geometry import ConvProblem
from convlab.problem.weights import make_weights
from convlab.run.runner import CellInputs, measure_cell

TIMING = {"mode": "warm", "warmup": 3, "min_reps": 10, "max_reps": 2000, "batch": 10, "stable_rel": 0.01,
          "budget_s": 1.0, "e2e_reps": 1}


def inputs(kernel: str, size: int, k: int, tunables: dict) -> CellInputs:
    spec = get_kernel(kernel)
    cell = Cell(experiment="conv2d", backend="cuda", kernel=kernel, size=size, stride=1, filter_size=k,
                padding=(k - 1) // 2, in_channels=3, out_channels=3, filter="laplacian", tunables=tunables,
                settings=dict(spec.settings), timing=TIMING, verify=VERIFY)
    image = np.random.default_rng(0).random((size, size, 3), dtype=np.float32)
    problem = ConvProblem(size, size, 3, 3, k, 1, (k - 1) // 2)
    return CellInputs(cell, spec, ConvOperands(problem, image, make_weights("laplacian", 3, 3, k, 0)))


@pytest.mark.gpu
def test_out_of_memory_is_an_oom_row_and_the_next_cell_still_runs(backend):
    """im2col at 16384^2 with a 9x9 filter needs a 261 GB column matrix."""
    row = measure_cell(inputs("im2col_cublas", 16384, 9, {}), backend=backend)
    assert row["status"] == "oom", row["reason"]
    assert "out of memory" in row["reason"].lower() or "OUT_OF_MEMORY" in row["reason"]
    assert row.get("kernel_ms") is None
    after = measure_cell(inputs("direct", 256, 3, {"block": 16}), backend=backend)
    assert after["status"] == "ok", after["reason"]


@pytest.mark.gpu
def test_the_same_cell_twice_agrees_within_the_noise(backend):
    """Two runs of one cell: their medians differ by little next to the spread they record."""
    first = measure_cell(inputs("direct", 4096, 3, {"block": 16}), backend=backend)
    second = measure_cell(inputs("direct", 4096, 3, {"block": 16}), backend=backend)
    assert first["status"] == second["status"] == "ok"
    difference = abs(first["kernel_ms"] - second["kernel_ms"]) / first["kernel_ms"]
    spread = max(first["kernel_ms_iqr"], second["kernel_ms_iqr"]) / first["kernel_ms"]
    print(f"\nrepeat: {first['kernel_ms']:.5f} vs {second['kernel_ms']:.5f} ms, difference {difference:.2%}, "
          f"IQR {first['kernel_ms_iqr']:.5f} / {second['kernel_ms_iqr']:.5f} ms ({spread:.2%}), "
          f"reps {first['reps']}/{second['reps']}")
    assert difference < 0.25  # a gross disagreement means the timing is broken, not noisy
