"""Derived figures of a timed cell: throughput and distance from the memory floor."""

from __future__ import annotations

from convlab.problem.geometry import ConvProblem


def throughput(problem: ConvProblem, kernel_ms: float, copy_gbps: float) -> dict[str, float]:
    """GFLOPS, GB/s (input + weights + output once), the byte floor and how close we are to it.

    floor_ms is the time the measured device-to-device copy bandwidth needs for
    those bytes; pct_of_floor = floor_ms / kernel_ms * 100 (100 = at the floor).
    """
    seconds = kernel_ms / 1e3
    floor_ms = problem.bytes_moved / (copy_gbps * 1e9) * 1e3
    return {
        "gflops": problem.flops / seconds / 1e9,
        "gbps": problem.bytes_moved / seconds / 1e9,
        "floor_ms": floor_ms,
        "pct_of_floor": floor_ms / kernel_ms * 100.0,
    }

