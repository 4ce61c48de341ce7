"""The interface every backend implements (in the spirit of Kernel Tuner's backends)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from convlab.backends.compileahead import CompileReport
from convlab.backends.sourcemodule import SourceModule
from convlab.measure.telemetry import Neighbours, NullObserver
from convlab.measure.timing import GraphRefused, Sampler, StagedSample
from convlab.plan.operands import KernelBuffers
from convlab.plan.registry import KernelSpec

# The setting that names the engine a cell's timed run chose (its row's `engine`): a library that
# searches for one (cuDNN) runs that one instead, as a replay of the measured cell must.
ENGINE_SETTING = "engine"


@dataclass
class PreparedKernel:
    """A kernel bound to its buffers: ``run()`` computes the output once (asynchronously on a GPU)."""

    run: Callable[[], None]
    info: dict[str, Any] = field(default_factory=dict)  # implementation, engine names, ...
    # (name, run) per stage when the kernel has several (im2col, gemm): each has its time too
    stages: list[tuple[str, Callable[[], None]]] = field(default_factory=list)


class Backend(ABC):
    name: str
    xp: Any  # the array module: numpy or cupy
    compiles_sources: bool = False  # whether its cells compile the kernels' source modules

    @abstractmethod
    def device_info(self) -> dict[str, Any]:
        """Provenance of the device: name, capability, driver/runtime and library versions."""

    def layout_for(self, spec: KernelSpec) -> dict[str, str]:
        """The layouts the kernel's buffers are placed in on this backend."""
        return dict(spec.layout)

    @abstractmethod
    def to_device(self, host: np.ndarray) -> Any: ...

    @abstractmethod
    def to_host(self, array: Any) -> np.ndarray: ...

    @abstractmethod
    def synchronize(self) -> None: ...

    @abstractmethod
    def prepare(self, spec: KernelSpec, cell_tunables: dict, settings: dict,
                problem: Any, buffers: KernelBuffers) -> PreparedKernel:
        """Compile / plan / autotune (the setup time) and return a launcher.

        Raises CellFailure subclasses for the kernel's own failures.
        """

    def compile_ahead(self, modules: Mapping[SourceModule, Sequence[str]]) -> CompileReport:
        """Compile ``modules`` (each with the kernels that use it) before their cells ask, into
        this process's module cache; a backend that compiles nothing has nothing to do."""
        return CompileReport(modules=len(modules))

    @abstractmethod
    def time_batch(self, run: Callable[[], None], n: int, cold: bool) -> list[float]:
        """Device time in ms of each of ``n`` back-to-back repeats of ``run``."""

    @abstractmethod
    def time_stages(self, stages: Sequence[Callable[[], None]], n: int, cold: bool) -> list[StagedSample]:
        """``n`` back-to-back runs of ``stages`` in order, the device's clock read before each run
        and after each stage: each run's time and its stages'."""

    def capture_graph(self, run: Callable[[], None], launches: int) -> Sampler:
        """Timing mode ``graph`` (convlab.measure.timing): ``launches`` back-to-back runs recorded
        once; the sampler's n samples are n replays of them, each in ms per run. Raises
        GraphRefused where the runs cannot be recorded."""
        raise GraphRefused(f"no graph timing on the {self.name} backend")

    @abstractmethod
    def end_to_end_ms(self, run: Callable[[], None], host_inputs: dict[str, np.ndarray],
                      buffers: KernelBuffers, host_output: np.ndarray, reps: int) -> float:
        """Median time of copying ``host_inputs`` to their device buffers, computing, and copying
        the output back into ``host_output``; each repeat's output filled with NaN before its time
        starts, so that the output the last one leaves is a fresh run's."""

    @abstractmethod
    def copy_bandwidth_gbps(self) -> float:
        """Device-to-device copy bandwidth, counting bytes read plus bytes written."""

    @abstractmethod
    def sgemm_ceiling(self) -> dict[str, Any]:
        """The FP32 compute ceiling: the library SGEMM's GFLOPS at a large square size, strict
        fp32 (no TF32), with the size and math mode used."""

    def open_context(self) -> None:  # noqa: B027 (an optional hook: nothing to open on the cpu)
        """Create the device context and load the backend's own helpers, outside any timing."""

    def device_key(self) -> str:
        """Names this device's lock (convlab.backends.devicelock): one measurement on it at a time."""
        return self.name

    def release_memory(self) -> None:  # noqa: B027 (an optional hook: the cpu frees as it goes)
        """Give back cached device memory between cells, so one cell's use cannot starve the next."""

    def fault(self) -> str | None:
        """Why this backend can no longer measure (a sticky device error), or None while it can."""
        return None

    def profiled(self, index: int):
        """The launches inside, profiled by a profiler that runs this process, after a marker of
        ``index``; a backend without hardware counters refuses."""
        raise NotImplementedError(f"no hardware counters on the {self.name} backend")

    def sm_clock_mhz(self) -> float | None:
        """The device's SM clock now, where the backend can read it (a pair's rounds compare in
        cycles where the two versions' clocks differ)."""
        return None

    def neighbours(self) -> Neighbours | None:
        """A watch of the device's other users over a window (a pair's rounds), where the backend
        can see them."""
        return None

    def telemetry(self):
        """An observer of the device while a cell's repeats are timed (convlab.measure.telemetry):
        a context manager whose columns() gives the row's clock, power and energy columns."""
        return NullObserver(f"no GPU telemetry on the {self.name} backend")

    def guard(self, stage: str):
        """A context manager that turns this backend's errors into CellFailure subclasses."""
        from contextlib import nullcontext

        return nullcontext()
