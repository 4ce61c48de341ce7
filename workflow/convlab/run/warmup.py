"""A fresh measurement worker's first pass through the device work every cell does, before its first
cell: placing operands, making the float64 reference and comparing with it.

In a new process each of these first loads what CuPy builds on first use (its elementwise and
reduction kernels for each dtype and rank, from CuPy's disk cache or, on a cold cache, compiled,
and cuBLAS for the float64 products). On an H100 with a cold cache the first cell of a worker
spent about 8.5 s there (place 3.7-3.9 s, verify 4.7 s) against under 0.2 s for a later problem
of that size. Paid at the worker's start, every GPU of a host pays it at once, before any cell,
instead of in each worker's first cell.

The pass runs on random operands of small problems of each shape a cell can have (a picture in
both image layouts, a batch of them, a GEMM) in a cache of its own, which is emptied afterwards:
no cell shares anything with it. It holds the device's lock like a cell's measurement, so that no
timed work of another process on this GPU runs beside it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import partial

import numpy as np

from convlab.backends.base import Backend
from convlab.backends.devicelock import exclusive_device
from convlab.plan.operands import ConvOperands, GemmOperands, Operands
from convlab.plan.problemcache import ProblemCache
from convlab.problem.geometry import ConvProblem, GemmProblem
from convlab.problem.verify import compare

WARM_SIZE = 32
# each pair of an image layout and its weights' and output's, as kernels declare them
LAYOUTS = ({"input": "hwc", "weights": "ohwi", "output": "hwc"},
           {"input": "chw", "weights": "oihw", "output": "chw"})


def warm_problems() -> Iterator[tuple[Operands, dict[str, str]]]:
    """Small operands of each kind of problem, random (never zeros), in each layout they come in."""
    rng = np.random.default_rng(0)

    def random(*shape: int) -> np.ndarray:
        return rng.uniform(0.5, 1.0, shape).astype(np.float32)

    for batch in (1, 2):
        problem = ConvProblem(height=WARM_SIZE, width=WARM_SIZE, in_channels=3, out_channels=4, filter_size=3,
                              stride=1, padding=1, batch=batch, batched=batch > 1)
        image = random(*((batch,) if batch > 1 else ()), WARM_SIZE, WARM_SIZE, 3)
        operands = ConvOperands(problem, image, random(4, 3, 3, 3))
        for layout in LAYOUTS:
            yield operands, layout
    gemm = GemmProblem(WARM_SIZE, WARM_SIZE, WARM_SIZE)
    yield GemmOperands(gemm, random(WARM_SIZE, WARM_SIZE), random(WARM_SIZE, WARM_SIZE)), {}


def warm_up(backend: Backend) -> float:
    """Place, reference and compare each warm problem on ``backend`` (its context open), twice, as a
    worker's cells of one problem do; the seconds it took. Leaves nothing kept."""
    started = time.perf_counter()
    cache = ProblemCache(capacity=1)
    with exclusive_device(backend.device_key()):
        for number, (operands, layout) in enumerate(warm_problems()):
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
