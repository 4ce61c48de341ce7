"""Shared memory above 48 KiB per block on a real GPU (marker gpu): a tile that needs more opts in
and is verified as usual where the GPU allows it (227 KiB on Hopper); one beyond the GPU's opt-in
limit is invalid_config naming that limit, decided before any launch."""

import numpy as np
import pytest
from gpu_helpers import QUICK_TIMING, VERIFY, make_cell

from convlab.backends.sharedcount import cell_shared_bytes, large_shared_cells
from convlab.backends.sharedmem import DEFAULT_SHARED_BYTES, kib
from convlab.paths import DEFAULT_CONFIG
from convlab.plan.cell import Cell
from convlab.plan.config import load_config
from convlab.plan.grid import build_cells
from convlab.plan.operands import ConvOperands, GemmOperands
from convlab.plan.registry import get_kernel
from convlab.problem.geometry import ConvProblem, GemmProblem
from convlab.problem.weights import make_weights
from convlab.run.runner import CellInputs, measure_cell


def optin_limit(backend) -> int:
    return int(backend.properties["sharedMemPerBlockOptin"])


def measure_tiled(backend, kernel: str, stride: int, block: int = 32, size: int = 256) -> dict:
    spec = get_kernel(kernel)
    image = np.random.default_rng(size + stride).random((size, size, 3), dtype=np.float32)
    problem = ConvProblem(size, size, 3, 3, 3, stride, 1)
    cell = make_cell(spec, size, stride, 3, 3, {"block": block})
    operands = ConvOperands(problem, image, make_weights("random", 3, 3, 3, seed=stride))
    return measure_cell(CellInputs(cell, spec, operands), backend=backend)


@pytest.mark.gpu
def test_a_tile_above_48_kib_opts_in_and_is_verified(backend):
    """tiled_output, block 32, stride 2, 3 channels: 3 x 65 x 65 floats = 49.5 KiB per block."""
    need = cell_shared_bytes(make_cell(get_kernel("tiled_output"), 256, 2, 3, 3, {"block": 32}),
                             get_kernel("tiled_output"))
    assert need > DEFAULT_SHARED_BYTES
    assert need <= optin_limit(backend), "this GPU cannot opt in to 49.5 KiB (pre-Volta?)"
    row = measure_tiled(backend, "tiled_output", stride=2)
    assert row["status"] == "ok", row["reason"]
    assert row["max_rel_err"] < 1e-5 and row["kernel_ms"] > 0
    assert row["smem_limit_bytes"] == optin_limit(backend)
    assert f"smem {need} " in row["launch"]


@pytest.mark.gpu
def test_a_tile_of_exactly_48_kib_runs_under_the_default_limit(backend):
    row = measure_tiled(backend, "tiled_cached", stride=2)  # 3 x 64 x 64 floats = 48 KiB
    assert row["status"] == "ok", row["reason"]
    assert row["smem_limit_bytes"] == int(backend.properties["sharedMemPerBlock"]) == DEFAULT_SHARED_BYTES


@pytest.mark.gpu
def test_a_tile_beyond_the_opt_in_limit_is_invalid_config_naming_it(backend):
    optin = optin_limit(backend)
    spec = get_kernel("tiled_output")
    stride = next(s for s in range(2, 16)
                  if cell_shared_bytes(make_cell(spec, 256, s, 3, 3, {"block": 32}), spec) > optin)
    need = cell_shared_bytes(make_cell(spec, 256, stride, 3, 3, {"block": 32}), spec)
    row = measure_tiled(backend, "tiled_output", stride=stride)
    assert row["status"] == "invalid_config"
    assert row["reason"] == (f"needs {kib(need)} of shared memory per block; this GPU allows {kib(optin)} "
                             f"(sharedMemPerBlockOptin)")
    assert row["smem_limit_bytes"] == optin and row["kernel_ms"] is None


def measure_gemm(backend, kernel: str, tunables: dict, size: int = 256) -> dict:
    """One GEMM cell of the kernel's tunables on random size^3 operands."""
    rng = np.random.default_rng(size)
    a = rng.uniform(-1, 1, (size, size)).astype(np.float32)
    b = rng.uniform(-1, 1, (size, size)).astype(np.float32)
    cell = Cell(experiment="gemm", backend="cuda", kernel=kernel, size=size, stride=0, filter_size=0, padding=0,
                in_channels=0, out_channels=0, filter="random", tunables=dict(tunables),
                settings=dict(get_kernel(kernel).settings), timing=QUICK_TIMING, verify=VERIFY)
    return measure_cell(CellInputs(cell, get_kernel(kernel), GemmOperands(GemmProblem(size, size, size), a, b)),
                        backend=backend)


@pytest.mark.gpu
def test_every_default_grid_cell_above_48_kib_now_runs(backend):
    """The cells of config/config.yaml that need more than 48 KiB per block (python -m convlab
    shared-memory lists them): each image kernel, block and stride once at 128^2, and each GEMM
    kernel's tunables once at 256^3 (its tiles have no block edge)."""
    large = large_shared_cells(build_cells(load_config(DEFAULT_CONFIG), "cuda"))
    images = sorted({(c.kernel, c.tunables["block"], c.stride) for c, _ in large if "block" in c.tunables})
    gemms = sorted({(c.kernel, tuple(sorted(c.tunables.items()))) for c, _ in large if "block" not in c.tunables})
    assert images and gemms
    failures = []
    for kernel, block, stride in images:
        row = measure_tiled(backend, kernel, stride, block, size=128)
        if row["status"] != "ok":
            failures.append(f"{kernel} block {block} stride {stride}: {row['status']} {row['reason']}")
    for kernel, tunables in gemms:
        row = measure_gemm(backend, kernel, dict(tunables))
        if row["status"] != "ok":
            failures.append(f"{kernel} {dict(tunables)}: {row['status']} {row['reason']}")
    print(f"{len(large)} default-grid cells need more than 48 KiB; {len(images) + len(gemms)} kinds checked")
    assert not failures, "\n".join(failures)
