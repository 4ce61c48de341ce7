"""Compiling ahead without a GPU: a grid's distinct source modules (exactly what its cells' setup
asks for), the thread pool that compiles what the cache lacks and leaves a failure to its cell, and
the compile-kernels command, which on the cpu backend only writes its record."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from convlab.app.commandtable import parse
from convlab.app.workerentry import run_command
from convlab.backends.compileahead import compile_ahead
from convlab.backends.sourcemodule import STANDARD, grid_modules, source_module
from convlab.plan.config import load_config
from convlab.plan.families import family
from convlab.plan.grid import build_cells
from convlab.plan.gridfile import save_grid
from convlab.plan.registry import get_kernel

CONFIGS = Path(__file__).resolve().parents[1] / "config"
TINY, DEFAULT = CONFIGS / "tiny-cpu.yaml", CONFIGS / "config.yaml"


@pytest.fixture(scope="module")
def cuda_cells():
    """The default config's cuda grid (built without a GPU)."""
    return build_cells(load_config(DEFAULT), "cuda")


def test_a_cells_module_is_its_source_and_its_problems_and_descriptions_defines(cuda_cells):
    cell = next(c for c in cuda_cells if c.kernel == "direct")
    spec, problem = get_kernel("direct"), family(cell.experiment).problem(cell)
    module = source_module(spec, cell.tunables, problem)
    assert module.code == spec.source.read_text()
    assert module.options[0] == STANDARD
    assert {f"-D{key}={value}" for key, value in problem.defines().items()} <= set(module.options)


def test_the_grid_compiles_each_module_once_and_library_kernels_none(cuda_cells):
    modules = grid_modules(cuda_cells)
    wanted = set()
    for cell in cuda_cells:
        spec = get_kernel(cell.kernel)
        if spec.source is None or spec.library or spec.unsupported_reason(cell.stride, cell.filter_size):
            continue
        wanted.add(source_module(spec, cell.tunables, family(cell.experiment).problem(cell)))
    assert set(modules) == wanted and len(wanted) < len(cuda_cells)
    assert "cudnn" not in {kernel for kernels in modules.values() for kernel in kernels}
    assert all(kernels and len(set(kernels)) == len(kernels) for kernels in modules.values())


def test_a_refused_cell_compiles_nothing(cuda_cells):
    winograd = next(c for c in cuda_cells if c.kernel == "winograd")
    tiled = next(c for c in cuda_cells if c.kernel == "tiled_input")
    assert grid_modules([winograd]) and grid_modules([tiled])
    at_stride_2 = replace(winograd, stride=2)  # no code for it: unsupported
    under_a_wider_filter = replace(tiled, filter_size=tiled.tunables["block"] + 2)  # requires block >= R
    assert grid_modules([at_stride_2, under_a_wider_filter]) == {}


def test_the_pool_compiles_what_the_cache_lacks_on_several_threads_and_leaves_failures_out():
    seen: set[str] = set()
    both_running = threading.Barrier(2, timeout=10)  # two compiles at once, or the barrier breaks

    def compile_one(module: str) -> str:
        seen.add(threading.current_thread().name)
        if module in ("a", "b"):
            both_running.wait()
        if module == "bad":
            raise RuntimeError("does not compile")
        return module.upper()

    cache = {"kept": "KEPT"}
    modules = {"a": ["k1"], "b": ["k2"], "bad": ["k3", "k4"], "kept": ["k1"]}
    report = compile_ahead(modules, cache, compile_one, threads=4)
    assert cache == {"kept": "KEPT", "a": "A", "b": "B"}
    assert (report.modules, report.compiled, report.cached, report.failed) == (4, 2, 1, 1)
    assert report.failed_kernels == ("k3", "k4") and report.threads == 3 and len(seen) >= 2


def test_with_everything_cached_the_pool_does_nothing():
    started = time.perf_counter()
    report = compile_ahead({"a": ["k"]}, {"a": 1}, lambda module: pytest.fail("compiled again"))
    assert (report.compiled, report.cached, report.threads) == (0, 1, 0)
    assert time.perf_counter() - started < 0.5


def test_compile_kernels_on_the_cpu_writes_its_record_and_compiles_nothing(tmp_path):
    config = load_config(TINY)
    grid = str(save_grid(config, build_cells(config, "cpu"), "local", tmp_path))
    out = tmp_path / "compiled.json"
    command, args = parse(["compile-kernels", "--grid", grid, "--backend", "cpu", "--out", str(out)])
    assert command.worker_pool(args) == "cpu"
    reply = run_command(["compile-kernels", "--grid", grid, "--backend", "cpu", "--out", str(out)], str(tmp_path))
    assert reply["exit_code"] == 0, reply["stderr"]
    record = json.loads(out.read_text())
    assert record == {"backend": "cpu", "cells": 0, "modules": 0, "compiled": 0, "cached": 0, "failed": 0,
                      "failed_kernels": [], "seconds": record["seconds"], "threads": 0}
    assert record["seconds"] < 1.0

