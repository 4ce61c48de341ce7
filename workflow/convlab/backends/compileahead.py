"""Compiling a grid's modules ahead of its cells, many at once, into a module cache (the compiler
process's, convlab.backends.nvrtcbuild: the measuring process only loads what it made).

Each compile runs on a thread of a pool as large as the cores this process may use: NVRTC's
compile call releases the GIL (CuPy's nvrtc binding calls it ``with nogil``, since CuPy 8) and
NVRTC compiles programs on several threads independently, so the threads compile in parallel. The
results enter the cache on the calling thread only. A module that fails to compile is left out
of the cache: the cell that needs it compiles it again and reports its own error, as it would
without compiling ahead.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Hashable, Mapping, MutableMapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

Key = TypeVar("Key", bound=Hashable)


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


def compile_ahead(modules: Mapping[Key, Sequence[str]], cache: MutableMapping[Key, Any],
                  compile_one: Callable[[Key], Any], threads: int | None = None) -> CompileReport:
    """Compile each of ``modules`` (each with the kernels that use it) that ``cache`` lacks with
    ``compile_one``, on ``threads`` threads at most (default: the usable cores), and keep what
    compiled in ``cache``."""
    started = time.perf_counter()
    missing = [module for module in modules if module not in cache]
    pool_size = min(threads or usable_cores(), len(missing))
    failed: list[Key] = []
    if missing:
        with ThreadPoolExecutor(pool_size, thread_name_prefix="compile-ahead") as pool:
            futures = {pool.submit(compile_one, module): module for module in missing}
            for future in as_completed(futures):
                try:
                    cache[futures[future]] = future.result()
                except Exception:  # the kernel's own error: its cell compiles it again and says why
                    failed.append(futures[future])
    kernels = sorted({kernel for module in failed for kernel in modules[module]})
    return CompileReport(modules=len(modules), compiled=len(missing) - len(failed), cached=len(modules) - len(missing),
                         failed=len(failed), failed_kernels=tuple(kernels),
                         seconds=round(time.perf_counter() - started, 3), threads=pool_size)
