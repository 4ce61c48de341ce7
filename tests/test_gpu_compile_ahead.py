"""compile-kernels on a real GPU (marker gpu): through the service it compiles a small grid's modules
into the worker that then measures its cells, whose setup no longer compiles; asked again, it finds
everything cached. The run's store build (convlab.backends.storebuild) compiles them first, and the
worker's compile-ahead then only loads them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
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


def test_the_runs_store_build_compiles_the_grid_and_the_workers_compile_ahead_only_loads_it(tmp_path):
    config = small_grid()
    cells = build_cells(config, "cuda")
    box = sandbox_with_a_cold_kernel_cache(tmp_path / "box")
    try:
        grid = save_grid(config, cells, "local", tmp_path)
        built = subprocess.run([sys.executable, "-m", "convlab.backends.storebuild", str(grid)], env=box.env,
                               capture_output=True, text=True, timeout=300)
        assert built.returncode == 0, built.stdout + built.stderr
        assert re.fullmatch(r"sm_\d+: 2 of 2 modules in the store, 0 did not compile \(\d+\.\d s\)\n", built.stdout)
        store = tmp_path / "box" / "convlab_modules"
        made = {path: path.stat().st_mtime_ns for path in store.glob("*.cubin")}
        assert len(made) == 2
        compiled = box.convlab("compile-kernels", "--grid", str(grid), "--backend", "cuda",
                               "--out", str(tmp_path / "compiled.json"))
        assert compiled.returncode == 0, compiled.stderr
        record = json.loads((tmp_path / "compiled.json").read_text())
        assert (record["compiled"], record["failed"]) == (2, 0), record  # loaded into the worker
        # nothing was compiled again: the store holds the same two files, untouched
        assert {path: path.stat().st_mtime_ns for path in store.glob("*.cubin")} == made
        cell = next(c for c in cells if c.kernel == "direct")
        assert box.run(cell, tmp_path / "row.csv").returncode == 0
        assert read_row(tmp_path / "row.csv")["status"] == "ok"
    finally:
        box.close()
