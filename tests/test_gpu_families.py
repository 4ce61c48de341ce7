"""The tiling, CNN-layer and GEMM kernels on the GPU against float64 (marker gpu).

Odd and non-square shapes that are not multiples of any tile, every tunable value. A refused
launch is accepted only where the block exceeds 1024 threads.
"""

import itertools

import numpy as np
import pytest
from gpu_helpers import QUICK_TIMING, VERIFY

from convlab.plan.cell import Cell
from convlab.plan.operands import ConvOperands, GemmOperands
from convlab.plan.registry import load_registry
from convlab.problem.geometry import ConvProblem, GemmProblem
from convlab.problem.weights import make_weights
from convlab.run.runner import CellInputs, measure_cell

REGISTRY = load_registry()


def members(family: str) -> list[str]:
    return sorted(name for name, spec in REGISTRY.items() if family in spec.experiments)


def variants(spec) -> list[dict]:
    keys = sorted(spec.tunables)
    return [dict(zip(keys, values)) for values in itertools.product(*(spec.tunables[k] for k in keys))]


def cell(family: str, kernel: str, tunables: dict, **fields) -> Cell:
    defaults = dict(size=1, stride=1, filter_size=3, padding=1, in_channels=1, out_channels=1, filter="random")
    return Cell(experiment=family, backend="cuda", kernel=kernel, tunables=tunables,
                settings=dict(REGISTRY[kernel].settings), timing=QUICK_TIMING, verify=VERIFY, **{**defaults, **fields})


def check(rows: list[tuple[str, dict]]) -> None:
    def refused_as_declared(row: dict) -> bool:
        # over 1024 threads, or a condition the kernel's description states (tile >= filter)
        return row["status"] == "invalid_config" and (
            (row.get("block") or 0) ** 2 > 1024 or " requires " in (row.get("reason") or ""))

    bad = [f"{where}: {row['status']} {row.get('reason')}" for where, row in rows
           if row["status"] != "ok" and not refused_as_declared(row)]
    assert not bad, "\n".join(bad)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", members("tiling"))
def test_single_channel_tiling_kernels(backend, kernel):
    rng = np.random.default_rng(3)
    rows = []
    for (height, width), k in itertools.product([(257, 130), (33, 70)], (3, 5, 9)):
        image = rng.random((height, width, 1), dtype=np.float32)
        problem = ConvProblem(height, width, 1, 1, k, 1, (k - 1) // 2)
        operands = ConvOperands(problem, image, make_weights("random", 1, 1, k, seed=k))
        for tunables in variants(REGISTRY[kernel]):
            c = cell("tiling", kernel, tunables, size=height, width=width, filter_size=k, padding=(k - 1) // 2)
            row = measure_cell(CellInputs(c, REGISTRY[kernel], operands), backend=backend)
            rows.append((f"{kernel} {tunables} {height}x{width} k{k}", row))
    check(rows)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", members("winograd_layers"))
def test_batched_layer_kernels(backend, kernel):
    rng = np.random.default_rng(4)
    rows = []
    for (n, c, h, w, k) in [(1, 3, 17, 9, 5), (3, 64, 14, 14, 32), (2, 130, 7, 10, 66)]:
        image = rng.random((n, h, w, c), dtype=np.float32)
        problem = ConvProblem(h, w, c, k, 3, 1, 1, batch=n, batched=True)
        operands = ConvOperands(problem, image, make_weights("random", k, c, 3, seed=c))
        for tunables in variants(REGISTRY[kernel]):
            cl = cell("winograd_layers", kernel, tunables, size=h, width=w, in_channels=c, out_channels=k, batch=n)
            row = measure_cell(CellInputs(cl, REGISTRY[kernel], operands), backend=backend)
            rows.append((f"{kernel} {tunables} N{n} C{c} {h}x{w} K{k}", row))
    check(rows)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", members("gemm"))
def test_gemm_kernels_any_shape(backend, kernel):
    rng = np.random.default_rng(5)
    rows = []
    for m, n, k in [(257, 130, 31), (64, 64, 64), (1, 5, 300), (515, 129, 260)]:
        a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
        b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
        operands = GemmOperands(GemmProblem(m, n, k), a, b)
        for tunables in variants(REGISTRY[kernel]):
            c = cell("gemm", kernel, tunables, size=m, stride=0, filter_size=0, padding=0, in_channels=0,
                     out_channels=0)
            row = measure_cell(CellInputs(c, REGISTRY[kernel], operands), backend=backend)
            rows.append((f"{kernel} {tunables} {m}x{n}x{k}", row))
    check(rows)
