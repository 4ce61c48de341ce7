"""Compiling ahead without a GPU: a grid's distinct source modules (exactly what its cells' setup
asks for), the thread pool that compiles what the cache lacks and leaves a failure to its cell, and
the compile-kernels command, which on the cpu backend only writes its record."""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from convlab.app.commandtable import parse
from convlab.app.workerentry import run_command
from convlab.backends import cleanbuild, nvrtcbuild
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


def _compile_in_turn(tmp_path: Path, together: int):
    """A stand-in for NVRTC: notes which process compiled what and when; the first ``together`` compiles wait
    until all of them have started (or fail after 10 s), so that they pass only run at once."""

    def compile_one(entry: dict, arch: str) -> str:
        code = entry["code"]
        (tmp_path / f"started-{code}").write_text(str(os.getpid()))
        with open(tmp_path / "order", "a") as order:
            order.write(code + "\n")
        if len(list(tmp_path.glob("started-*"))) <= together:
            deadline = time.monotonic() + 10
            while len(list(tmp_path.glob("started-*"))) < together:
                if time.monotonic() > deadline:
                    raise RuntimeError("compiled alone")
                time.sleep(0.01)
        if code.startswith("bad"):
            raise RuntimeError("kern.cu(3): error: expected a \";\"")
        Path(entry["path"]).write_bytes(b"cubin for " + arch.encode())
        return entry["path"]

    return compile_one


def _request(tmp_path: Path, codes: list[str], threads: int) -> dict:
    return {"arch": "90", "threads": threads,
            "modules": [{"code": code, "options": [], "path": str(tmp_path / f"{index}.cubin")}
                        for index, code in enumerate(codes)]}


def test_the_compiler_compiles_in_several_processes_at_once_and_reports_each_module(tmp_path, monkeypatch):
    notes = tmp_path / "notes"
    notes.mkdir()
    monkeypatch.setattr(nvrtcbuild, "_compile_one", _compile_in_turn(notes, together=2))
    result = nvrtcbuild.build(_request(tmp_path, ["long source a", "bad b", "c"], threads=2))
    assert result["built"] == {"0": str(tmp_path / "0.cubin"), "2": str(tmp_path / "2.cubin")}
    assert result["failed"] == {"1": 'kern.cu(3): error: expected a ";"'}
    pids = {path.read_text() for path in notes.glob("started-*")}
    assert len(pids) >= 2 and str(os.getpid()) not in pids  # forked processes, not this one


def test_a_compiler_process_that_dies_fails_its_module_and_the_build_ends(tmp_path, monkeypatch):
    def compile_one(entry: dict, arch: str) -> str:
        if entry["code"] == "crashes NVRTC":
            os._exit(1)
        Path(entry["path"]).write_bytes(b"cubin")
        return entry["path"]

    monkeypatch.setattr(nvrtcbuild, "_compile_one", compile_one)
    started = time.monotonic()
    result = nvrtcbuild.build(_request(tmp_path, ["crashes NVRTC", "a", "b"], threads=2))
    assert time.monotonic() - started < 60
    assert result["failed"]["0"].startswith("the compiler process died compiling")
    assert set(result["built"]) | set(result["failed"]) == {"0", "1", "2"}


def test_the_compiler_takes_the_longest_sources_first(tmp_path, monkeypatch):
    monkeypatch.setattr(nvrtcbuild, "_compile_one", _compile_in_turn(tmp_path, together=0))
    nvrtcbuild.build(_request(tmp_path, ["bb", "a", "dddd", "ccc"], threads=1))
    assert (tmp_path / "order").read_text().split() == ["dddd", "ccc", "bb", "a"]


def test_a_compiler_started_ahead_takes_its_request_later_or_ends_without_one():
    ahead = cleanbuild.CompilerProcess()
    assert ahead.run({"arch": "90", "threads": 2, "modules": []}) == ({"built": {}, "failed": {}}, None)
    idle = cleanbuild.CompilerProcess()
    scratch = idle.result.parent
    idle.close()
    assert idle.process is not None and idle.process.returncode == 0 and not scratch.exists()


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

