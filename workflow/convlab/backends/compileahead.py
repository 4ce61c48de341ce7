"""What a compile-ahead did (CompileReport), and the cores it may compile on: a grid's modules
compiled before its cells ask for them, in the compiler process (convlab.backends.nvrtcbuild),
which the measuring process only loads from."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class CompileReport:
    """What one compile-ahead did. ``compiled``: compiled now (or read from the compiler's disk
    cache, which looks the same from here); ``cached``: already in the module cache; ``failed``:
    did not compile (``failed_kernels`` names their kernels)."""

    modules: int = 0
    compiled: int = 0
    cached: int = 0
    failed: int = 0
    failed_kernels: tuple[str, ...] = ()
    seconds: float = 0.0
    threads: int = 0

    def record(self) -> dict[str, Any]:
        return {**asdict(self), "failed_kernels": list(self.failed_kernels)}


def usable_cores() -> int:
    """The cores this process may run on (a Slurm job's or a cpuset's share, not the host's all)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
