"""What setup chose and how long it took: a row's setup columns."""

from __future__ import annotations

from typing import Any

from convlab.measure.observers.base import Observer, ResultView

# The kernel's own words on what ran (PreparedKernel.info), copied into its row.
INFO_COLUMNS = ("implementation", "engine", "engine_heuristic", "launch", "smem_limit_bytes", "module_hash")


class SetupObserver(Observer):
    """What setup chose (implementation, cuDNN engines, launch geometry) and how long it took."""

    def columns(self, result: ResultView) -> dict[str, Any]:
        if result.prepared is None:
            return {}
        info = result.prepared.kernel.info
        return {"setup_ms": result.prepared.setup_ms, **{key: info.get(key) for key in INFO_COLUMNS}}
