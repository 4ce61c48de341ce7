"""The tiling, CNN-layer and GEMM kernels on the GPU against float64 (marker gpu).

Odd and non-square shapes that are not multiples of any tile, every tunable value. A refused
launch is accepted only where the block exceeds 1024 threads.
"""

import itertools
from collections.abc import Iterable

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


def check_every_variant(backend, family: str, kernel: str, cases: Iterable[tuple[str, object, dict]]) -> None:
    """Each case (its name, its operands, its cell's fields) measured with every tunable value of ``kernel``,
    and checked (check)."""
    rows = []
    for name, operands, fields in cases:
        for tunables in variants(REGISTRY[kernel]):
            c = cell(family, kernel, tunables, **fields)
            row = measure_cell(CellInputs(c, REGISTRY[kernel], operands), backend=backend)
            rows.append((f"{kernel} {tunables} {name}", row))
    check(rows)


def random_operands(rng: np.random.Generator, problem: ConvProblem, seed: int) -> ConvOperands:
    """A random picture of ``problem``'s shape (a batch of them where it is batched) and random weights."""
    shape = (problem.height, problem.width, problem.in_channels)
    image = rng.random((problem.batch, *shape) if problem.batched else shape, dtype=np.float32)
    weights = make_weights("random", problem.out_channels, problem.in_channels, problem.filter_size, seed=seed)
    return ConvOperands(problem, image, weights)


def single_channel_tiling_cases(rng: np.random.Generator):
    for (height, width), k in itertools.product([(257, 130), (33, 70)], (3, 5, 9)):
        problem = ConvProblem(height, width, 1, 1, k, 1, (k - 1) // 2)
        yield (f"{height}x{width} k{k}", random_operands(rng, problem, seed=k),
               dict(size=height, width=width, filter_size=k, padding=(k - 1) // 2))


def batched_layer_cases(rng: np.random.Generator):
    for (n, c, h, w, k) in [(1, 3, 17, 9, 5), (3, 64, 14, 14, 32), (2, 130, 7, 10, 66)]:
        problem = ConvProblem(h, w, c, k, 3, 1, 1, batch=n, batched=True)
        yield f"N{n} C{c} {h}x{w} K{k}", random_operands(rng, problem, seed=c), dict(
            size=h, width=w, in_channels=c, out_channels=k, batch=n)


def gemm_cases_of_any_shape(rng: np.random.Generator):
    for m, n, k in [(257, 130, 31), (64, 64, 64), (1, 5, 300), (515, 129, 260)]:
        a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
        b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
        yield f"{m}x{n}x{k}", GemmOperands(GemmProblem(m, n, k), a, b), dict(
            size=m, stride=0, filter_size=0, padding=0, in_channels=0, out_channels=0)


# Each family: the seed of its random data, and its cases (each one's name, operands and cell fields).
FAMILY_CASES = {"tiling": (3, single_channel_tiling_cases), "winograd_layers": (4, batched_layer_cases),
                "gemm": (5, gemm_cases_of_any_shape)}


@pytest.mark.gpu
@pytest.mark.parametrize(("family", "kernel"), [(family, kernel) for family in FAMILY_CASES for kernel in members(family)])
def test_every_variant_of_a_familys_kernels_on_odd_shapes(backend, family, kernel):
    seed, cases = FAMILY_CASES[family]
    check_every_variant(backend, family, kernel, cases(np.random.default_rng(seed)))
