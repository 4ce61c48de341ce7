"""Device-wide measurements, each under the device's lock like any cell: the copy bandwidth and the
compute ceiling (written as JSON with the backend and device they ran on), the floor benchmark,
and the gallery's edge maps (one kernel run, no timing)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from convlab.app.console import Console
from convlab.atomicfile import write_text_atomically
from convlab.backends import get_backend
from convlab.backends.base import Backend
from convlab.backends.devicelock import exclusive_device
from convlab.bench.floor import format_table, run_benchmark, write_results
from convlab.bench.sgemm import format_gemm_table, run_gemm_benchmark
from convlab.plan.cell import Cell
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
    render_edge_map(Cell.from_json(args.spec), args.image, args.out)
    return 0
