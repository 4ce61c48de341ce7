"""The cpu backend: NumPy/OpenCV twins of the kernels, so the whole DAG runs without a GPU."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from convlab.backends.base import Backend, KernelBuffers, PreparedKernel
from convlab.measure.hostinfo import cpu_name
from convlab.measure.timing import Sampler, StagedSample
from convlab.paths import REPO_ROOT
from convlab.plan.registry import CPU_TWINS_DIR, KernelSpec, RegistryError
from convlab.problem.geometry import ConvProblem, GemmProblem
from convlab.status import DeviceOutOfMemory, KernelFailure, UnsupportedCell

TWIN_LAYOUT = {"input": "hwc", "weights": "oihw", "output": "hwc"}
FLUSH_BYTES = 64 << 20  # larger than any CPU's last-level cache we expect
# The twins are measured on one thread. With BLAS's, OpenMP's and OpenCV's pools left at the
# machine's cores, they fought the measurement worker and the run's other jobs on a 2-core host: a
# twin's time then jumped to multiples of the scheduler's slice (8 ms for a 0.25 ms cell).
CPU_THREADS = 1


def limit_threads(threads: int) -> int:
    """Limit every BLAS and OpenMP pool this process loaded (threadpoolctl) and OpenCV's own to
    ``threads``; the most threads any pool reports it may use afterwards."""
    import cv2  # here: OpenCV's pool exists once it is loaded, and only the cpu backend needs it

    threadpool_limits(limits=threads)
    cv2.setNumThreads(threads)
    return max([pool["num_threads"] for pool in threadpool_info()] + [max(cv2.getNumThreads(), 1)])


def load_twin(spec: KernelSpec) -> ModuleType:
    """The cpu twin's module: one of convlab/backends/cpu_twins/, or a file beside the kernel's
    description. KernelFailure (stage compile) for a twin that does not load: its file, line and
    error, as a .cu that does not compile is recorded, not a fault of the measuring process."""
    if spec.twin_path is None:
        raise RegistryError(f"kernel {spec.name!r} has no cpu twin")
    try:
        if spec.twin_path.parent == CPU_TWINS_DIR:
            return importlib.import_module(f"convlab.backends.cpu_twins.{spec.cpu_twin}")
        name = f"convlab_extra_twins.{spec.name}"
        if name not in sys.modules:
            loader_spec = importlib.util.spec_from_file_location(name, spec.twin_path)
            module = importlib.util.module_from_spec(loader_spec)
            loader_spec.loader.exec_module(module)
            sys.modules[name] = module
        return sys.modules[name]
    except SyntaxError as error:
        where = f"{relative_path(error.filename or spec.twin_path)}:{error.lineno}"
        raise KernelFailure(f"compile: {where}: {type(error).__name__}: {error.msg}", "compile") from None
    except Exception as error:  # the twin's own code failed as it loaded: the kernel's fault, said as such
        raise KernelFailure(f"compile: {relative_path(spec.twin_path)} does not load: {type(error).__name__}: {error}",
                            "compile") from None


def relative_path(path: str | os.PathLike) -> str:
    """A twin's path as the user names it: from the repository root where it lies under it."""
    try:
        return str(Path(path).resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


class CpuBackend(Backend):
    name = "cpu"
    xp = np

    def __init__(self) -> None:
        self._flush_buffer = None
        self.threads = limit_threads(CPU_THREADS)

    def device_info(self) -> dict[str, Any]:
        import cv2

        return {
            "device": f"{cpu_name()} ({os.cpu_count()} cores)",
            "host_threads": self.threads,
            "compute_capability": "",
            "driver_version": "",
            "runtime_version": f"numpy {np.__version__}, opencv {cv2.__version__}",
            "cupy_version": "",
            "cudnn_version": "",
        }

    def layout_for(self, spec: KernelSpec) -> dict[str, str]:
        """Twins take HWC images and OIHW weights whatever the GPU kernel's layout."""
        return TWIN_LAYOUT

    def to_device(self, host: np.ndarray) -> np.ndarray:
        return np.array(host, copy=True)

    def to_host(self, array: np.ndarray) -> np.ndarray:
        return np.asarray(array)

    def synchronize(self) -> None:
        pass

    @contextmanager
    def guard(self, stage: str):
        try:
            yield
        except MemoryError as error:
            raise DeviceOutOfMemory(f"{stage}: host memory exhausted ({error})", stage) from error

    def prepare(self, spec: KernelSpec, cell_tunables: dict, settings: dict,
                problem: ConvProblem | GemmProblem, buffers: KernelBuffers) -> PreparedKernel:
        if not spec.cpu_twin:
            raise UnsupportedCell(f"kernel {spec.name!r} has no cpu twin", "setup")
        twin = load_twin(spec)

        if isinstance(problem, GemmProblem):
            def run() -> None:
                twin.multiply(buffers.inputs["a"], buffers.inputs["b"], problem, buffers.output)
        elif problem.batched:
            # twins convolve one image: a batch is a loop over its images
            def run() -> None:
                for image, out in zip(buffers.image, buffers.output):
                    twin.convolve(image, buffers.weights, problem, out)
        else:
            def run() -> None:
                twin.convolve(buffers.image, buffers.weights, problem, buffers.output)

        return PreparedKernel(run, {"implementation": twin.IMPLEMENTATION})

    def _flush_cache(self) -> None:
        if self._flush_buffer is None:
            self._flush_buffer = np.empty(FLUSH_BYTES, dtype=np.uint8)
        self._flush_buffer.fill(1)

    def time_batch(self, run: Callable[[], None], n: int, cold: bool) -> list[float]:
        return [sample.run_ms for sample in self.time_stages([run], n, cold)]

    def time_stages(self, stages: Sequence[Callable[[], None]], n: int, cold: bool) -> list[StagedSample]:
        samples = []
        for _ in range(n):
            if cold:
                self._flush_cache()
            marks = [time.perf_counter()]
            for stage in stages:
                stage()
                marks.append(time.perf_counter())
            samples.append(StagedSample((marks[-1] - marks[0]) * 1e3,
                                        tuple((end - start) * 1e3 for start, end in zip(marks, marks[1:]))))
        return samples

    def capture_graph(self, run: Callable[[], None], launches: int) -> Sampler:
        """The cpu has no graphs: each sample is ``launches`` back-to-back runs timed together and
        divided, the same measurement without the per-launch clock reads (and the mode runs in CI)."""

        def samples(n: int) -> list[float]:
            times = []
            for _ in range(n):
                start = time.perf_counter()
                for _ in range(launches):
                    run()
                times.append((time.perf_counter() - start) * 1e3 / launches)
            return times

        return samples

    def end_to_end_ms(self, run: Callable[[], None], host_inputs: dict[str, np.ndarray],
                      buffers: KernelBuffers, host_output: np.ndarray, reps: int) -> float:
        """Copy in, compute, copy out in host memory: the cpu analogue of the GPU round trip."""
        samples = []
        for _ in range(reps):
            buffers.output.fill(np.nan)
            start = time.perf_counter()
            for name, host in host_inputs.items():
                np.copyto(buffers.inputs[name], host)
            run()
            np.copyto(host_output, buffers.output)
            samples.append((time.perf_counter() - start) * 1e3)
        return float(np.median(samples))

    def copy_bandwidth_gbps(self) -> float:
        source = np.ones(64 << 20, dtype=np.float32)  # 256 MiB
        target = np.empty_like(source)
        samples = self.time_batch(lambda: np.copyto(target, source), 5, False)
        return 2 * source.nbytes / (float(np.median(samples)) / 1e3) / 1e9

    def sgemm_ceiling(self) -> dict[str, Any]:
        size = 2048
        rng = np.random.default_rng(0)
        a, b = rng.random((size, size), dtype=np.float32), rng.random((size, size), dtype=np.float32)
        out = np.empty((size, size), dtype=np.float32)
        samples = self.time_batch(lambda: np.matmul(a, b, out=out), 5, False)
        gflops = 2 * size**3 / (float(np.median(samples)) / 1e3) / 1e9
        return {"sgemm_gflops": gflops, "size": size, "math": f"numpy.matmul float32 ({np.__version__})"}
