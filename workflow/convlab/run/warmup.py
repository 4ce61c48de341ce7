"""A fresh measurement worker's first pass through the device work every cell does, before its first
cell: placing operands, making the float64 reference and comparing with it.

In a new process each of these first loads what CuPy builds on first use (its elementwise and
reduction kernels for each dtype and rank, from CuPy's disk cache or, on a cold cache, compiled,
and cuBLAS for the float64 products). On an H100 with a cold cache the first cell of a worker
spent about 8.5 s there (place 3.7-3.9 s, verify 4.7 s) against under 0.2 s for a later problem
of that size. Paid at the worker's start, every GPU of a host pays it at once, before any cell,
instead of in each worker's first cell.

The pass runs on random operands of small problems of each shape the run's cells have (a picture
in an image layout, a batch of them, a GEMM: the run names them, by WARM_SHAPES_ENV, and a worker
with no such word warms every shape a cell can have) in a cache of its own, which is emptied
afterwards: no cell shares anything with it. It holds the device's lock for untimed work, so that
no timed work of another process on this GPU runs beside it, while other untimed work (the
compile-ahead) may.

On a backend whose first use compiles (CuPy's kernels, on cuda), one process per shape first runs
that shape's pass beside the others (``python -m convlab.run.warmup BACKEND SHAPE``): CuPy
compiles one kernel after another within a process, and these fill its disk cache on the host's
cores at once, so that the worker's own pass then loads what they compiled. They run at a lower
priority than the compile-ahead beside them, which the first cell waits for as well.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from functools import partial

import numpy as np

from convlab.backends import get_backend
from convlab.backends.base import Backend
from convlab.backends.devicelock import untimed_device
from convlab.plan.cell import Cell
from convlab.plan.families import family
from convlab.plan.operands import ConvOperands, GemmOperands, Operands
from convlab.plan.problemcache import ProblemCache
from convlab.plan.registry import KernelSpec, get_kernel
from convlab.problem.geometry import ConvProblem, GemmProblem
from convlab.problem.verify import compare

WARM_SIZE = 32
# each pair of an image layout and its weights' and output's, as kernels declare them
LAYOUTS = {"hwc": {"input": "hwc", "weights": "ohwi", "output": "hwc"},
           "chw": {"input": "chw", "weights": "oihw", "output": "chw"}}
# The shapes a run's cells have, handed by the run to the service it starts (its workers inherit it).
WARM_SHAPES_ENV = "CONVLAB_WARM_SHAPES"
# A shape: a picture ("conv", its output layout), a batch of them ("batch", layout), or a product of
# two matrices ("matrix").
MATRIX = "matrix"
ALL_SHAPES = frozenset({("conv", "hwc"), ("conv", "chw"), ("batch", "hwc"), ("batch", "chw"), (MATRIX, "")})


def grid_shapes(cells: Iterable[Cell], kernel_of: Callable[[str], KernelSpec] = get_kernel) -> frozenset:
    """The shapes of the problems ``cells`` measure, each as its warm-up problem names it."""
    shapes = set()
    # a problem's kind and batching follow from its family, kernel and batch: one problem of each
    firsts = {(cell.experiment, cell.kernel, cell.batch): cell for cell in cells}
    for cell in firsts.values():
        problem = family(cell.experiment).problem(cell)
        if isinstance(problem, GemmProblem):
            shapes.add((MATRIX, ""))
        else:
            output = kernel_of(cell.kernel).layout.get("output", "hwc")
            shapes.add(("batch" if problem.batched else "conv", output if output in LAYOUTS else "hwc"))
    return frozenset(shapes)


def shapes_text(shapes: Collection[tuple[str, str]]) -> str:
    """The shapes as WARM_SHAPES_ENV holds them: ``batch:chw,conv:hwc,matrix:``."""
    return ",".join(sorted(f"{kind}:{layout}" for kind, layout in shapes))


def shapes_from_environment() -> frozenset:
    """The shapes the run named for this worker, or every shape where it named none."""
    text = os.environ.get(WARM_SHAPES_ENV)
    if text is None:
        return ALL_SHAPES
    named = {tuple(item.split(":", 1)) for item in text.split(",") if ":" in item}
    return frozenset(named) & ALL_SHAPES


def warm_problems(shapes: Collection[tuple[str, str]] = ALL_SHAPES) -> Iterator[tuple[Operands, dict[str, str]]]:
    """Small operands of each of ``shapes``, random (never zeros), in the layout each comes in."""
    rng = np.random.default_rng(0)

    def random(*shape: int) -> np.ndarray:
        return rng.uniform(0.5, 1.0, shape).astype(np.float32)

    for kind, batch in (("conv", 1), ("batch", 2)):
        layouts = [LAYOUTS[layout] for layout in LAYOUTS if (kind, layout) in shapes]
        if not layouts:
            continue
        problem = ConvProblem(height=WARM_SIZE, width=WARM_SIZE, in_channels=3, out_channels=4, filter_size=3,
                              stride=1, padding=1, batch=batch, batched=batch > 1)
        image = random(*((batch,) if batch > 1 else ()), WARM_SIZE, WARM_SIZE, 3)
        operands = ConvOperands(problem, image, random(4, 3, 3, 3))
        for layout in layouts:
            yield operands, layout
    if (MATRIX, "") in shapes:
        gemm = GemmProblem(WARM_SIZE, WARM_SIZE, WARM_SIZE)
        yield GemmOperands(gemm, random(WARM_SIZE, WARM_SIZE), random(WARM_SIZE, WARM_SIZE)), {}


def warm_up(backend: Backend, shapes: Collection[tuple[str, str]] = ALL_SHAPES) -> float:
    """Place, reference and compare each warm problem of ``shapes`` on ``backend`` (its context
    open), twice, as a worker's cells of one problem do; the seconds it took. Leaves nothing kept."""
    started = time.perf_counter()
    cache = ProblemCache(capacity=1)
    with untimed_device(backend.device_key()):
        for number, (operands, layout) in enumerate(warm_problems(shapes)):
            shared = cache.problem(("warm-up", number))
            for _ in range(2):  # the second time takes a kept problem's path: copies and checksums
                _, buffers = operands.place(backend, layout, shared)
                buffers.output[...] = 1.0
                reference = shared.reference(backend.xp, partial(operands.reference, backend.xp))
                compare(operands.comparable_output(buffers.output, layout), reference, 1.0, backend.xp)
            backend.synchronize()
        cache.clear()
        backend.release_memory()
    return time.perf_counter() - started


# A helper that has not warmed its shape by then is left: the worker's own pass compiles what is missing.
HELPER_TIMEOUT_S = 180.0


def warm_up_beside(backend: Backend, shapes: Collection[tuple[str, str]]) -> float:
    """The worker's warm-up: on a backend whose first use compiles, a helper process per shape
    first (beside each other), then the worker's own pass on every shape; the seconds it took."""
    started = time.perf_counter()
    if backend.compiles_sources and len(shapes) > 1:
        helpers = [subprocess.Popen([sys.executable, "-m", "convlab.run.warmup", backend.name, shapes_text({shape})],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
                   for shape in sorted(shapes)]
        for helper in helpers:
            try:
                helper.wait(timeout=max(1.0, HELPER_TIMEOUT_S - (time.perf_counter() - started)))
            except subprocess.TimeoutExpired:
                helper.kill()
                helper.wait()
    warm_up(backend, shapes)
    return time.perf_counter() - started


# A helper's scheduling priority: below the compile-ahead's, which runs beside it on every core and
# which the first cell waits for too, and which takes longer on a cold cache.
HELPER_NICENESS = 10


def warm_one_process(backend_name: str, shapes: str) -> int:
    """A helper's pass: ``shapes`` (WARM_SHAPES_ENV's form) in a context of its own, yielding the cores
    to the compile-ahead."""
    os.nice(HELPER_NICENESS)
    os.environ[WARM_SHAPES_ENV] = shapes
    backend = get_backend(backend_name)
    backend.open_context()
    warm_up(backend, shapes_from_environment())
    return 0


if __name__ == "__main__":
    sys.exit(warm_one_process(sys.argv[1], sys.argv[2]))
