"""Recording a run's launches into a CUDA graph, for timing mode ``graph`` (convlab.measure.timing).

Stream capture records what is launched on the capturing stream instead of running it. A run
whose libraries refuse capture (CuPy's cuBLAS calls raise NotImplementedError, a synchronous
copy raises RuntimeError) or invalidate it (work on the legacy default stream) is refused, and
the caller times it per launch instead.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress

import cupy

from convlab.measure.timing import GraphRefused


def _refused(error: BaseException) -> GraphRefused:
    return GraphRefused(f"{type(error).__name__}: {error}")


def record_graph(stream: cupy.cuda.Stream, run: Callable[[], None], launches: int) -> cupy.cuda.Graph:
    """The graph of ``launches`` back-to-back runs, captured on ``stream`` (the current stream),
    or GraphRefused saying why not."""
    try:
        stream.begin_capture()
    except (cupy.cuda.runtime.CUDARuntimeError, RuntimeError) as error:
        raise _refused(error) from error
    try:
        for _ in range(launches):
            run()
    except Exception as error:  # run() has just run outside the capture: what fails now is the capture
        with suppress(Exception):  # ends capture mode; the capture's own error is the one to report
            stream.end_capture()
        raise _refused(error) from error
    try:
        return stream.end_capture()
    except (cupy.cuda.runtime.CUDARuntimeError, cupy.cuda.driver.CUDADriverError) as error:
        raise _refused(error) from error
