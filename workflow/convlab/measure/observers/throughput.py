"""GFLOPS, GB/s and the distance from the copy-bandwidth floor."""

from __future__ import annotations

from typing import Any

from convlab.measure.observers.base import Observer, ResultView
from convlab.problem import metrics


class ThroughputObserver(Observer):
    """GFLOPS, GB/s and the distance from the copy-bandwidth floor (convlab.problem.metrics)."""

    def columns(self, result: ResultView) -> dict[str, Any]:
        if result.kernel_ms is None or result.copy_gbps is None:
            return {}
        return {"copy_gbps": result.copy_gbps,
                **metrics.throughput(result.problem, result.kernel_ms, result.copy_gbps)}
