"""The cuda backend: CuPy arrays, .cu kernels compiled with cupy.RawModule, CUDA-event timing
(per launch, or per replay of a CUDA graph of many launches)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

import cupy
import numpy as np
from cupy.cuda import nvtx
from cupy.cuda import profiler as cuda_profiler

from convlab.backends.base import Backend, KernelBuffers, PreparedKernel
from convlab.backends.cleanbuild import Built, build_modules
from convlab.backends.compileahead import CompileReport, usable_cores
from convlab.backends.cudagraph import record_graph
from convlab.backends.libraries import library_kernels
from convlab.backends.sharedmem import shared_limit
from convlab.backends.sourcemodule import SourceModule, source_module
from convlab.measure.ncureport import cell_range
from convlab.measure.telemetry import GpuTelemetry, Neighbours
from convlab.measure.timing import Sampler, StagedSample
from convlab.plan.launch import dims, evaluate, problem_names, stage_shared_bytes
from convlab.plan.registry import KernelSpec
from convlab.status import DeviceOutOfMemory, KernelFailure, LaunchConfigError

# Occupies the GPU while the host enqueues a batch, so per-repeat event pairs time the
# kernel alone and not the host's launch gaps. %globaltimer counts nanoseconds.
SPIN_SOURCE = r"""
extern "C" __global__ void convlab_spin(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
}
"""
LAUNCH_ERRORS = ("CUDA_ERROR_INVALID_VALUE", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
                 "cudaErrorInvalidConfiguration", "CUDA_ERROR_INVALID_CONFIGURATION")
MAX_SPIN_MS = 200.0

# Loaded modules by their code and options, for the whole process: compile-kernels fills it
# through a backend of its own, and the cells its worker measures next find their modules here.
# Their machine code comes from a compiler process of its own (convlab.backends.cleanbuild), never
# from this one, whose NVRTC gives other code once cuDNN has compiled its engines here.
MODULES: dict[SourceModule, cupy.RawModule] = {}
# Each loaded module's machine code, by its hash: what a row says ran (module_hash).
MODULE_HASHES: dict[SourceModule, str] = {}


def _text(dims3: tuple[int, int, int]) -> str:
    return "x".join(str(d) for d in dims3)


def _elapsed(start: cupy.cuda.Event, end: cupy.cuda.Event) -> float:
    return cupy.cuda.get_elapsed_time(start, end)


def _fill_constant(module: cupy.RawModule, symbol: str, buffer: cupy.ndarray) -> None:
    """Copy a buffer into a __constant__ array of the module (setup time)."""
    pointer = module.get_global(symbol)
    # CuPy reports the symbol's size as 0 on some versions: check it only where it is known.
    if 0 < pointer.mem.size < buffer.nbytes:
        raise KernelFailure(f"__constant__ {symbol} holds {pointer.mem.size} bytes, needs {buffer.nbytes}", "setup")
    pointer.copy_from_device(buffer.data, buffer.nbytes)


def nvrtc_compiler() -> str:
    """NVRTC as rows and the module store name it (nvrtc 13.0)."""
    major, minor = cupy.cuda.nvrtc.getVersion()
    return f"nvrtc {major}.{minor}"


def gpu_uuid(properties: dict) -> str:
    """'GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx', as nvidia-smi and CUDA_VISIBLE_DEVICES write it.

    CuPy hands the UUID's 16 bytes over as a C string, so a UUID with a zero byte arrives cut
    short (GPU-008f... arrives empty); such a GPU is then found by its PCI address instead."""
    raw = properties.get("uuid", b"")
    text = raw.hex() if isinstance(raw, bytes) else str(raw).replace("-", "")
    if len(text) != 32:
        return uuid_by_pci_address(properties)
    return f"GPU-{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def pci_address(properties: dict) -> str | None:
    """The GPU's PCI address as NVML and nvidia-smi write it (00000000:1B:00.0), if known."""
    try:
        return f"{int(properties['pciDomainID']):08X}:{int(properties['pciBusID']):02X}:" \
               f"{int(properties['pciDeviceID']):02X}.0"
    except (KeyError, TypeError, ValueError):
        return None


def uuid_by_pci_address(properties: dict) -> str:
    """The UUID of the GPU at the properties' PCI address, from NVML, else nvidia-smi; '' where
    neither can tell."""
    address = pci_address(properties)
    if address is None:
        return ""
    try:
        import pynvml

        pynvml.nvmlInit()
        uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByPciBusId(address))
        return uuid.decode() if isinstance(uuid, bytes) else str(uuid)
    except Exception:  # no NVML here, or it does not know the address: ask nvidia-smi
        pass
    try:
        listing = subprocess.run(["nvidia-smi", "--query-gpu=pci.bus_id,uuid", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    for line in listing.splitlines():
        bus, _, uuid = (part.strip() for part in line.partition(","))
        if bus.upper() == address:
            return uuid
    return ""


def _matmul(stage: dict, operands: dict, names: dict) -> Callable[[], None]:
    """out = a @ b on views of the operands (no copies), through cuBLAS; a view of
    [buffer, batch, rows, cols] makes it a batched (strided) GEMM, and a 2-D operand
    is broadcast over the batch."""

    def view(spec: list) -> cupy.ndarray:
        buffer, *shape = spec
        shaped = operands[buffer].reshape(tuple(evaluate(e, names) for e in shape))
        if not shaped.flags.c_contiguous:
            raise ValueError(f"matmul operand {buffer} is not contiguous")
        return shaped

    a, b, out = view(stage["a"]), view(stage["b"]), view(stage["out"])
    return partial(cupy.matmul, a, b, out=out)


class CudaBackend(Backend):
    name = "cuda"
    xp = cupy
    compiles_sources = True

    def __init__(self) -> None:
        self.device = cupy.cuda.Device()
        self.properties = cupy.cuda.runtime.getDeviceProperties(self.device.id)
        self._spin = cupy.RawKernel(SPIN_SOURCE, "convlab_spin")
        # enqueue time per repeat, by what is enqueued
        self._host_ms_per_rep = {"run": 0.05, "stages": 0.05, "graph": 0.05}
        self._graph_stream: cupy.cuda.Stream | None = None
        self._flush_buffer = None
        self._device_info: dict[str, Any] | None = None
        # the index among the GPUs its measurement service uses (0 in a one-shot process)
        self.gpu_index = 0
        self._telemetry = None  # NVML for this GPU, opened at the first cell

    # -- provenance -------------------------------------------------------------------
    def device_info(self) -> dict[str, Any]:
        """Read once per process: importing cuDNN to ask its version costs a tenth of a second."""
        if self._device_info is None:
            self._device_info = self._read_device_info()
        return {**self._device_info, "gpu_index": self.gpu_index}

    def telemetry(self):
        return self._gpu_telemetry().observer()

    def neighbours(self) -> Neighbours | None:
        return self._gpu_telemetry().neighbours()

    @contextmanager
    def profiled(self, index: int):
        """The launches inside, profiled by a profiler that runs this process (Nsight Compute
        started with --profile-from-start off --nvtx), inside an NVTX range that names them as
        cell ``index``'s (convlab.measure.ncureport)."""
        self.synchronize()
        nvtx.RangePush(cell_range(index))
        cuda_profiler.start()
        try:
            yield
            self.synchronize()
        finally:
            cuda_profiler.stop()
            nvtx.RangePop()

    def sm_clock_mhz(self) -> float | None:
        return self._gpu_telemetry().sm_clock_mhz()

    def _gpu_telemetry(self) -> GpuTelemetry:
        if self._telemetry is None:
            self._telemetry = GpuTelemetry(gpu_uuid(self.properties))
        return self._telemetry

    def _read_device_info(self) -> dict[str, Any]:
        props = self.properties
        info = {
            "device": props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"]),
            "gpu_uuid": gpu_uuid(props),
            "compute_capability": f"{props['major']}.{props['minor']}",
            "driver_version": cupy.cuda.runtime.driverGetVersion(),
            "runtime_version": cupy.cuda.runtime.runtimeGetVersion(),
            "cupy_version": cupy.__version__,
            "cudnn_version": "",
            "l2_bytes": int(props.get("l2CacheSize", 0)),
            "sm_count": int(props.get("multiProcessorCount", 0)),
        }
        try:
            import cudnn

            info["cudnn_version"] = str(cudnn.backend_version())
        except Exception:  # cuDNN is optional for kernels that do not use it
            pass
        # the libraries a library kernel calls, and the compiler of the source kernels: each part of
        # the identity of the kernels that use it (a change re-measures them and is named)
        for column, version in (("cublas_version", lambda: cupy.cuda.cublas.getVersion(cupy.cuda.device.get_cublas_handle())),
                                ("cufft_version", lambda: cupy.cuda.cufft.getVersion()),
                                ("compiler", self.compiler)):
            try:
                info[column] = str(version())
            except Exception:  # a library this install lacks: its kernels' cells fail on their own
                info[column] = ""
        return info

    def open_context(self) -> None:
        cupy.empty(1, dtype=cupy.float32)  # the first allocation creates the CUDA context
        self._spin.compile()  # from CuPy's cache after the first job
        self.device_info()

    def device_key(self) -> str:
        return f"cuda-{self.device_info()['gpu_uuid']}"

    def release_memory(self) -> None:
        self.synchronize()
        cupy.get_default_memory_pool().free_all_blocks()
        cupy.get_default_pinned_memory_pool().free_all_blocks()

    def fault(self) -> str | None:
        """A sticky error (illegal address, launch failure) poisons the context for good: after
        one, even a synchronize or a one-element copy fails."""
        try:
            self.device.synchronize()
            probe = cupy.arange(4, dtype=cupy.float32)
            if float(probe.sum()) != 6.0:
                return "the device computed 0+1+2+3 wrongly after this cell"
        except Exception as error:  # any failure here means the context is unusable
            return f"{type(error).__name__}: {error}"
        return None

    def compiler(self) -> str:
        """The compiler of the kernels' source modules, as rows name it (nvrtc 13.0)."""
        return nvrtc_compiler()

    def _arch(self) -> str:
        return str(self.device.compute_capability)

    def _module(self, module: SourceModule) -> cupy.RawModule:
        """The module, compiled (in the compiler process) when a function is first taken from it,
        inside the setup's guard so that a compile error is the cell's, unless compiled ahead."""
        if module not in MODULES:
            built, failed = build_modules([module], self._arch(), self.compiler(), threads=1)
            if module in failed:
                raise KernelFailure(f"compile: {failed[module]}", "compile")
            self._load(module, built[module])
        return MODULES[module]

    def _load(self, module: SourceModule, built: Built) -> None:
        """Load a module's machine code into this process; code the driver refuses (a damaged
        store file) is compiled once more."""
        try:
            loaded = cupy.RawModule(path=str(built.path))
            loaded.compile()
        except (cupy.cuda.driver.CUDADriverError, OSError):
            again, failed = build_modules([module], self._arch(), self.compiler(), threads=1,
                                          again=frozenset([module]))
            if module in failed:
                raise KernelFailure(f"compile: {failed[module]}", "compile") from None
            built = again[module]
            loaded = cupy.RawModule(path=str(built.path))
            loaded.compile()
        MODULES[module] = loaded
        MODULE_HASHES[module] = built.binary_hash

    def compile_ahead(self, modules: Mapping[SourceModule, Sequence[str]]) -> CompileReport:
        """The modules this process lacks, compiled in one compiler process on the usable cores,
        then loaded here. A module that does not compile is left to its cells, which report its
        error; so is one that does not load."""
        started = time.perf_counter()
        missing = [module for module in modules if module not in MODULES]
        threads = min(usable_cores(), len(missing))
        built, failed = build_modules(missing, self._arch(), self.compiler(), threads=threads) if missing else ({}, {})
        not_loaded = set(failed)
        for module, code in built.items():
            try:
                self._load(module, code)
            except KernelFailure:
                not_loaded.add(module)
        kernels = sorted({kernel for module in not_loaded for kernel in modules[module]})
        return CompileReport(modules=len(modules), compiled=len(missing) - len(not_loaded),
                             cached=len(modules) - len(missing), failed=len(not_loaded),
                             failed_kernels=tuple(kernels), seconds=round(time.perf_counter() - started, 3),
                             threads=threads)

    # -- data -------------------------------------------------------------------------
    def to_device(self, host: np.ndarray) -> Any:
        return cupy.asarray(host)

    def to_host(self, array: Any) -> np.ndarray:
        return cupy.asnumpy(array)

    def synchronize(self) -> None:
        self.device.synchronize()

    @contextmanager
    def guard(self, stage: str):
        """Translate CuPy/CUDA errors of the kernel under test into row statuses."""
        try:
            yield
        except cupy.cuda.memory.OutOfMemoryError as error:
            raise DeviceOutOfMemory(f"{stage}: {error}", stage) from error
        except cupy.cuda.compiler.CompileException as error:
            raise KernelFailure(f"compile: {error}", "compile") from error
        except (cupy.cuda.driver.CUDADriverError, cupy.cuda.runtime.CUDARuntimeError) as error:
            text = str(error)
            if stage == "launch" and any(code in text for code in LAUNCH_ERRORS):
                raise LaunchConfigError(f"launch refused: {text}", stage) from error
            if "OUT_OF_MEMORY" in text or "MemoryAllocation" in text:
                raise DeviceOutOfMemory(f"{stage}: {text}", stage) from error
            raise KernelFailure(f"{stage}: {text}", stage) from error

    # -- kernels ----------------------------------------------------------------------
    def prepare(self, spec: KernelSpec, cell_tunables: dict, settings: dict,
                problem: Any, buffers: KernelBuffers) -> PreparedKernel:
        if spec.library:
            return library_kernels()[spec.library].prepare(self, spec, cell_tunables, settings, problem, buffers)
        return self._prepare_source_kernel(spec, cell_tunables, problem, buffers)

    def _prepare_source_kernel(self, spec: KernelSpec, tunables: dict, problem: Any,
                               buffers: KernelBuffers) -> PreparedKernel:
        names = problem_names(problem, tunables)
        described = spec.evaluated_defines(names)
        wanted = source_module(spec, tunables, problem) if spec.source else None
        module = self._module(wanted) if wanted else None
        operands = buffers.named()
        for name, size in spec.scratch.items():
            key = (name, evaluate(size, names))
            if key not in buffers.scratch:
                buffers.scratch[key] = cupy.empty(key[1], dtype=cupy.float32)
            operands[name] = buffers.scratch[key]
        with_defines = {**names, **described}
        for symbol, fill in spec.constants.items():
            if fill.applies(with_defines):
                _fill_constant(module, symbol, operands[fill.buffer])

        parts = [spec.source.name] if spec.source else []
        launches, geometry, limits = [], [], []
        for stage in spec.stages:
            if "op" in stage:
                launches.append((stage["name"], _matmul(stage, operands, names)))
                parts.append("cupy.matmul (cuBLAS SGEMM, TF32 " + (
                    "on)" if os.environ.get("CUPY_TF32") == "1" else "off)"))
                continue
            function = module.get_function(stage["function"])  # compiles, or loads CuPy's cache
            block, grid = dims(stage["block"], names), dims(stage["grid"], names)
            shared = stage_shared_bytes(stage, names)
            limits.append(self._allow_shared(function, shared))
            args = tuple(operands[a] if isinstance(a, str) and a in operands else np.int32(evaluate(a, names))
                         for a in stage["args"])
            launches.append((stage["name"], partial(function, grid, block, args, shared_mem=shared)))
            geometry.append(f"{stage['name']}: grid {_text(grid)} block {_text(block)} smem {shared} "
                            f"regs {getattr(function, 'num_regs', '?')}")
        info = {"implementation": " + ".join(parts), "launch": "; ".join(geometry),
                "smem_limit_bytes": max(limits, default=None),
                "module_hash": MODULE_HASHES.get(wanted) if wanted else None}

        def run() -> None:
            for _, launch in launches:
                launch()

        return PreparedKernel(run, info, stages=launches if len(launches) > 1 else [])

    def _allow_shared(self, function: Any, dynamic: int) -> int:
        """The per-block shared-memory limit the function's launches run under: above the default
        48 KiB it opts in, where the GPU allows that much (else LaunchConfigError, before any launch)."""
        static = int(function.shared_size_bytes)
        limit, opt_in = shared_limit(static + dynamic, int(self.properties["sharedMemPerBlock"]),
                                     int(self.properties.get("sharedMemPerBlockOptin", 0)))
        if opt_in:
            function.max_dynamic_shared_size_bytes = dynamic
        return limit

    # -- timing -----------------------------------------------------------------------
    def _flush_l2(self) -> None:
        if self._flush_buffer is None:
            l2 = max(int(self.properties.get("l2CacheSize", 0)), 8 << 20)
            self._flush_buffer = cupy.empty(2 * l2 // 4, dtype=cupy.float32)
        self._flush_buffer.fill(1.0)

    def time_batch(self, run: Callable[[], None], n: int, cold: bool) -> list[float]:
        return [_elapsed(marks[0], marks[-1]) for marks in self._time_events([run], n, "run", self._flush_l2 if cold else None)]

    def time_stages(self, stages: Sequence[Callable[[], None]], n: int, cold: bool) -> list[StagedSample]:
        timed = self._time_events(stages, n, "stages", self._flush_l2 if cold else None)
        return [StagedSample(_elapsed(marks[0], marks[-1]), tuple(map(_elapsed, marks, marks[1:]))) for marks in timed]

    def _time_events(self, launches: Sequence[Callable[[], None]], n: int, kind: str,
                     before: Callable[[], None] | None = None) -> list[list[cupy.cuda.Event]]:
        """``n`` back-to-back runs of ``launches`` in order on the current stream, an event before
        each run and after each of its launches; each run's events, synchronized."""
        runs = [[cupy.cuda.Event() for _ in range(len(launches) + 1)] for _ in range(n)]
        spin_ms = min(MAX_SPIN_MS, 0.2 + 1.5 * n * self._host_ms_per_rep[kind])
        started = time.perf_counter()
        self._spin((1,), (1,), (np.uint64(int(spin_ms * 1e6)),))
        for marks in runs:
            if before:
                before()
            marks[0].record()
            for launch, mark in zip(launches, marks[1:], strict=True):
                launch()
                mark.record()
        enqueue_ms = (time.perf_counter() - started) * 1e3
        runs[-1][-1].synchronize()
        self._host_ms_per_rep[kind] = enqueue_ms / n
        return runs

    def capture_graph(self, run: Callable[[], None], launches: int) -> Sampler:
        """``launches`` runs recorded once into a CUDA graph on a stream of its own (every launch
        of a run goes to the current stream: RawKernel, CuPy and cuFFT do, and cuDNN's handle
        follows it); each sample is one replay between two events, in ms per run."""
        if self._graph_stream is None:
            self._graph_stream = cupy.cuda.Stream(non_blocking=True)
        stream = self._graph_stream
        self.synchronize()  # nothing of the warm-up may overlap the replays
        with stream:
            graph = record_graph(stream, run, launches)
            graph.upload(stream)

        def samples(n: int) -> list[float]:
            with stream:
                replays = self._time_events([lambda: graph.launch(stream)], n, "graph")
                return [_elapsed(marks[0], marks[-1]) / launches for marks in replays]

        return samples

    def end_to_end_ms(self, run: Callable[[], None], host_inputs: dict[str, np.ndarray],
                      buffers: KernelBuffers, host_output: np.ndarray, reps: int) -> float:
        samples = []
        for _ in range(reps):
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            buffers.output.fill(np.nan)  # before the start event: in the stream, outside the time
            start.record()
            for name, host in host_inputs.items():
                buffers.inputs[name].set(host)
            run()
            buffers.output.get(out=host_output)
            end.record()
            end.synchronize()
            samples.append(cupy.cuda.get_elapsed_time(start, end))
        return float(np.median(samples))

    def copy_bandwidth_gbps(self) -> float:
        source = cupy.ones(256 << 20, dtype=cupy.float32)  # 1 GiB, far above any L2
        target = cupy.empty_like(source)
        samples = self.time_batch(lambda: cupy.copyto(target, source), 3, False)
        samples = self.time_batch(lambda: cupy.copyto(target, source), 20, False)
        moved = 2 * source.nbytes  # read + write
        return moved / (float(np.median(samples)) / 1e3) / 1e9

    def sgemm_ceiling(self) -> dict[str, Any]:
        if os.environ.get("CUPY_TF32") == "1":
            raise RuntimeError("CUPY_TF32=1 would measure TF32, not the FP32 ceiling; unset it")
        size = 8192
        a = cupy.random.default_rng(0).random((size, size), dtype=cupy.float32)
        b = cupy.random.default_rng(1).random((size, size), dtype=cupy.float32)
        out = cupy.empty((size, size), dtype=cupy.float32)
        samples = self.time_batch(lambda: cupy.matmul(a, b, out=out), 3, False)
        samples = self.time_batch(lambda: cupy.matmul(a, b, out=out), 10, False)
        gflops = 2 * size**3 / (float(np.median(samples)) / 1e3) / 1e9
        return {"sgemm_gflops": gflops, "size": size, "math": "cupy.matmul, cuBLAS SGEMM, TF32 off"}
