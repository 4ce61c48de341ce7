"""The run's first build of its grids' source modules into the module store, started as the run starts
measuring, beside the measurement service's own start:

    python -m convlab.backends.storebuild GRID [GRID ...]

A device worker's compile-ahead (the compile-kernels command) can only begin once the worker has
started: CuPy imported and the GPU's context made, 1 to 2 s on an H200 host, and on a cold cache
the first cell waits for the compile-ahead. This process needs neither, so the compiling starts that
much earlier. The worker's compile-ahead waits for it on the store's build lock
(convlab.backends.cleanbuild), then finds every module in the store and only loads them; where this
process fails or is late, the worker compiles what is missing itself, as before.

It compiles for each GPU this process sees (CUDA_VISIBLE_DEVICES), in the same clean compiler process
as every build (convlab.backends.nvrtcbuild), on the usable cores, and holds each of those GPUs' locks
for untimed work meanwhile, as the compile-ahead does: nothing is timed on them beside it.
"""

from __future__ import annotations

import sys
import time
from contextlib import ExitStack

import cupy

from convlab.backends.cleanbuild import CompilerProcess, build_modules
from convlab.backends.compileahead import usable_cores
from convlab.backends.cuda import gpu_uuid, nvrtc_compiler
from convlab.backends.devicelock import untimed_device
from convlab.backends.sourcemodule import grid_modules
from convlab.plan.gridfile import read_grid
from convlab.status import UserError


def visible_gpus() -> list[tuple[str, str]]:
    """Each GPU this process sees: its architecture as the compiler names it, and its lock's key."""
    gpus = []
    for index in range(cupy.cuda.runtime.getDeviceCount()):
        properties = cupy.cuda.runtime.getDeviceProperties(index)
        gpus.append((f"{properties['major']}{properties['minor']}", f"cuda-{gpu_uuid(properties)}"))
    return gpus


def build_store(grid_paths: list[str]) -> list[str]:
    """Every module of the grids compiled into the store for each visible GPU's architecture; a line
    per architecture saying what it did."""
    # the first architecture's compiler imports NVRTC's binding while the modules and the GPUs are found
    compiler: CompilerProcess | None = CompilerProcess()
    lines = []
    try:
        modules = list(grid_modules([cell for path in grid_paths for cell in read_grid(path).cells]))
        gpus = visible_gpus()
        with ExitStack() as held:
            for key in sorted({key for _, key in gpus}):
                held.enter_context(untimed_device(key))
            for arch in sorted({arch for arch, _ in gpus}):
                started = time.perf_counter()
                built, failed = build_modules(modules, arch, nvrtc_compiler(), threads=usable_cores(),
                                              started=compiler)
                compiler = None
                lines.append(f"sm_{arch}: {len(built)} of {len(modules)} modules in the store, {len(failed)} did "
                             f"not compile ({time.perf_counter() - started:.1f} s)")
    finally:
        if compiler is not None:  # no GPU, or no grid: it got no request
            compiler.close()
    return lines


def main(argv: list[str]) -> int:
    try:
        for line in build_store(argv):
            print(line, flush=True)
    except (UserError, cupy.cuda.runtime.CUDARuntimeError) as error:
        print(f"the store was not built ahead ({error}): each worker's compile-ahead builds it", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
