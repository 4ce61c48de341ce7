"""Device-wide work, each under the device's lock like any cell: the copy bandwidth and the
compute ceiling (written as JSON with the backend and device they ran on), the floor benchmark,
the gallery's edge maps (one kernel run, no timing), and compiling the grid's kernels ahead of
its cells."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from convlab.atomicfile import write_text_atomically
from convlab.backends import get_backend
from convlab.backends.base import Backend
from convlab.backends.devicelock import exclusive_device, untimed_device
from convlab.backends.sourcemodule import grid_modules
from convlab.bench.floor import format_table, run_benchmark, write_results
from convlab.bench.sgemm import format_gemm_table, run_gemm_benchmark
from convlab.console import Console
from convlab.plan.cell import Cell
from convlab.plan.gridfile import read_grid
from convlab.report.gallery import render_edge_map


def measure_device_record(backend_name: str, out: str, measure: Callable[[Backend], dict[str, Any]]) -> dict[str, Any]:
    """A device-wide measurement under the device lock, written as JSON with the backend and device
    it ran on."""
    backend = get_backend(backend_name)
    with exclusive_device(backend.device_key()):
        record = {"backend": backend.name, "device": backend.device_info()["device"], **measure(backend),
                  # said once here, not in every row: why the rows' telemetry columns are empty
                  "telemetry": backend.telemetry().unavailable or "NVML"}
    write_text_atomically(out, json.dumps(record, indent=2) + "\n")
    return record


def bandwidth(args: argparse.Namespace, console: Console) -> int:
    record = measure_device_record(args.backend, args.out,
                                   lambda backend: {"copy_gbps": backend.copy_bandwidth_gbps()})
    console.say(f"{record['device']}: device-to-device copy {record['copy_gbps']:.1f} GB/s (read + write)")
    return 0


def ceiling(args: argparse.Namespace, console: Console) -> int:
    record = measure_device_record(args.backend, args.out, lambda backend: backend.sgemm_ceiling())
    console.say(f"{record['device']}: SGEMM {record['sgemm_gflops']:.0f} GFLOPS at {record['size']} ({record['math']})")
    return 0


def bench(args: argparse.Namespace, console: Console) -> int:
    """The floor benchmark: our kernel, cuDNN best, the naive kernel and a copy, in one process."""
    backend = get_backend("cuda")  # one clear line where there is no GPU, before any work
    with exclusive_device(backend.device_key()):
        results = run_benchmark(args.sizes, args.strides, args.data) if args.sizes else []
        gemm = run_gemm_benchmark(backend, args.gemm_sizes) if args.gemm_sizes else []
    if results:
        write_results(results, args.out, format_table(results))
        console.say(format_table(results))
    if gemm:
        write_results(gemm, args.gemm_out, format_gemm_table(gemm))
        console.say(format_gemm_table(gemm))
    return 0


def gallery(args: argparse.Namespace, console: Console) -> int:
    cell = Cell.from_json(args.spec)
    failed = render_edge_map(cell, args.image, args.out)
    if failed:
        console.warn(f"warning: {args.out}: {cell.kernel} did not run ({failed[:300]}); the gallery shows why")
    return 0


def compile_kernels(args: argparse.Namespace, console: Console) -> int:
    """The grid's source modules compiled before its cells ask for them, in parallel: into this
    process's module cache (a service worker's, whose cells then neither compile nor load) and
    CuPy's disk cache (which the other workers load from). A module that does not compile is left
    to its cells, which report their own compile error. A backend that compiles nothing (the cpu)
    only writes the record."""
    backend = get_backend(args.backend)
    cells = read_grid(args.grid).cells if backend.compiles_sources else []
    modules = grid_modules(cells)
    # its threads take every core: no cell is timed meanwhile, but a worker's warm-up (untimed) may run
    with untimed_device(backend.device_key()):
        report = backend.compile_ahead(modules)
    record = {"backend": backend.name, "cells": len(cells), **report.record()}
    write_text_atomically(args.out, json.dumps(record, indent=2) + "\n")
    console.say(f"{backend.name}: {report.modules} modules of {len(cells)} cells: {report.compiled} compiled, "
                f"{report.cached} already cached, {report.failed} failed ({report.seconds:.1f} s, "
                f"{report.threads} compiling at once)")
    if report.failed_kernels:
        console.say(f"did not compile (their cells will say why): {', '.join(report.failed_kernels)}")
    return 0
