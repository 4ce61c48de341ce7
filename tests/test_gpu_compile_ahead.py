"""compile-kernels on a real GPU (marker gpu): through the service it compiles a small grid's modules
into the worker that then measures its cells, whose setup no longer compiles; asked again, it finds
everything cached."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from service_helpers import ServiceSandbox, read_row

from convlab.plan.config import validate_config
from convlab.plan.grid import build_cells
from convlab.plan.gridfile import save_grid

pytestmark = pytest.mark.gpu

ONE_GPU = {"CUDA_VISIBLE_DEVICES": "0"}  # one worker: the one that compiled measures the cell


def small_grid() -> dict:
    return validate_config({
        "backend": "cuda", "source_size": 64,
        "conv2d": {"sizes": [64], "strides": [1, 2], "kernels": ["direct", "tiled_output", "cudnn"]},
        "kernels": {"direct": {"block": [16]}, "tiled_output": {"block": [16]}, "cudnn": {"plan": ["heuristic"]}},
        "timing": {"budget_s": 0.05, "min_reps": 3, "e2e_reps": 1},
        **{family: {"enabled": False} for family in ("tiling", "winograd_layers", "gemm")},
    })


def sandbox_with_a_cold_kernel_cache(root: Path) -> ServiceSandbox:
    root.mkdir()
    box = ServiceSandbox(root, "cuda")
    box.env.update(ONE_GPU, CUPY_CACHE_DIR=str(root / "cupy-cache"))
    return box


def test_compile_kernels_fills_the_worker_so_that_a_cells_setup_no_longer_compiles(tmp_path):
    config = small_grid()
    cell = next(c for c in build_cells(config, "cuda") if c.kernel == "direct")
    cold, ahead = (sandbox_with_a_cold_kernel_cache(tmp_path / name) for name in ("cold", "ahead"))
    try:
        assert cold.run(cell, tmp_path / "cold.csv").returncode == 0
        grid = save_grid(config, build_cells(config, "cuda"), "local", tmp_path)
        compile_args = ("compile-kernels", "--grid", str(grid), "--backend", "cuda", "--out", str(tmp_path / "compiled.json"))
        result = ahead.convlab(*compile_args)
        assert result.returncode == 0, result.stderr
        record = json.loads((tmp_path / "compiled.json").read_text())
        assert record["backend"] == "cuda" and record["failed"] == 0, record
        # a module per kernel here (the defines are the channels' and the filter's, the same at both strides)
        assert record["compiled"] == record["modules"] == 2 and record["cached"] == 0
        assert any((tmp_path / "ahead" / "cupy-cache").iterdir())  # the other workers load from here
        assert ahead.run(cell, tmp_path / "ahead.csv").returncode == 0
        again = ahead.convlab(*compile_args)  # a no-op: everything is in the worker already
        assert again.returncode == 0, again.stderr
        record = json.loads((tmp_path / "compiled.json").read_text())
        assert (record["compiled"], record["cached"]) == (0, record["modules"])
    finally:
        cold.close()
        ahead.close()
    cold_row, ahead_row = read_row(tmp_path / "cold.csv"), read_row(tmp_path / "ahead.csv")
    assert cold_row["status"] == ahead_row["status"] == "ok"
    assert float(ahead_row["setup_ms"]) < float(cold_row["setup_ms"]), (ahead_row["setup_ms"], cold_row["setup_ms"])
