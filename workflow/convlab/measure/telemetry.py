"""GPU clocks, power, temperature, throttling and energy while a cell's repeats are timed.

An observer samples NVML (nvidia-ml-py) on a thread during the timing and returns its row
columns (convlab.measure.observers.standard), as Kernel Tuner's NVMLObserver does. Like nvbench, a sample
whose SM clock is below 75 % of the GPU's default clock counts as throttled, as does any throttle
reason that slows the chip (power cap, thermal or hardware slowdown). Where NVML is missing, the
observer is a null one: its columns stay empty and `unavailable` says why (the device record keeps
that line once).

It also sees the GPU's other users: a process other than this one that used the GPU while the
repeats ran (NVML's per-process utilisation samples of the window; where the GPU keeps none, the
processes holding a compute context at its start or end). Their work shares the GPU's time with
the kernel, so a time taken beside them is no measurement of the kernel alone: the row counts and
names them (``gpu_neighbours``), and its verdict is unconfirmed.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from convlab.measure.observers.base import Observer, ResultView, RunView

SAMPLE_INTERVAL_S = 0.005
# NVML samples each process's utilisation every sixth of a second or so: a window shorter than
# that may hold no sample, so the window reaches this far back before the repeats began
NEIGHBOUR_LOOKBACK_S = 1.0
THROTTLED_CLOCK_SHARE = 0.75  # nvbench's cut-off for a sample taken at a reduced clock
COLUMNS = ("sm_clock_min_mhz", "sm_clock_median_mhz", "mem_clock_min_mhz", "mem_clock_median_mhz",
           "power_median_w", "energy_j", "energy_per_rep_mj", "gflop_per_j", "temperature_max_c",
           "throttle_reasons", "throttled", "telemetry_samples", "gpu_neighbours", "gpu_neighbour_names")
# NVML's clock-event (throttle) reason bits that slow the chip, and their names in the row.
SLOWING_REASONS = {0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x20: "sw_thermal", 0x40: "hw_thermal",
                   0x80: "hw_power_brake"}
OTHER_REASONS = {0x1: "gpu_idle", 0x2: "applications_clocks", 0x10: "sync_boost", 0x100: "display_clocks"}


class NullObserver(Observer):
    """No telemetry here; ``unavailable`` says why."""

    def __init__(self, unavailable: str) -> None:
        self.unavailable = unavailable

    def __enter__(self) -> NullObserver:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def columns(self, result: ResultView) -> dict[str, Any]:
        return {}


def process_name(nvml: Any, pid: int) -> str:
    """A process's name where this host shows it ('' where it does not: another container's)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        pass
    try:
        name = nvml.nvmlSystemGetProcessName(pid)
        return (name.decode() if isinstance(name, bytes) else str(name)).rsplit("/", 1)[-1]
    except Exception:  # NVML may not know it either
        return ""


class Neighbours:
    """The GPU's other users during a window: from ``start()`` to ``stop()``. ``pids`` is None
    where this process cannot be told from others (NVML numbers processes of another PID
    namespace), which leaves the count unknown rather than wrong."""

    def __init__(self, nvml: Any, handle: Any, own_pid: int | None = None) -> None:
        self.nvml, self.handle = nvml, handle
        self.own_pid = own_pid if own_pid is not None else os.getpid()
        self.since_us = 0
        self.present: set[int] | None = None
        self.pids: dict[int, str] | None = {}

    def _contexts(self) -> set[int] | None:
        try:
            return {int(p.pid) for p in self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle)}
        except Exception:  # not supported here: nothing known
            return None

    def start(self) -> None:
        self.since_us = int((time.time() - NEIGHBOUR_LOOKBACK_S) * 1e6)
        self.present = self._contexts()

    def stop(self) -> None:
        at_end = self._contexts()
        listed = self.present is not None or at_end is not None
        holders = (self.present or set()) | (at_end or set())
        if listed and self.own_pid not in holders:
            self.pids = None  # this process holds a context but is not listed: other PID numbers
            return
        active = self._active()
        if active is None and not listed:
            self.pids = None  # NVML lists neither contexts nor samples here: nothing is known
            return
        others = (active if active is not None else holders) - {self.own_pid}
        self.pids = {pid: process_name(self.nvml, pid) for pid in sorted(others)}

    def _active(self) -> set[int] | None:
        """The processes with SM or memory activity in the window, or None where NVML keeps no
        per-process samples here."""
        try:
            samples = self.nvml.nvmlDeviceGetProcessUtilization(self.handle, self.since_us)
        except self.nvml.NVMLError as error:
            if "not found" in str(error).lower():
                return set()  # no process was sampled in the window
            return None
        except Exception:  # an older binding without it
            return None
        return {int(s.pid) for s in samples
                if int(s.timeStamp) >= self.since_us and (int(s.smUtil) > 0 or int(s.memUtil) > 0)}

    def columns(self) -> dict[str, Any]:
        if self.pids is None:
            return {}
        return {"gpu_neighbours": len(self.pids),
                "gpu_neighbour_names": ";".join(f"{pid} {name}".strip() for pid, name in self.pids.items()) or None}


class NvmlObserver(Observer):
    """Samples one GPU (by its NVML handle) from ``__enter__`` to ``__exit__``."""

    unavailable = ""

    def __init__(self, nvml: Any, handle: Any, default_sm_mhz: float | None) -> None:
        self.nvml, self.handle, self.default_sm_mhz = nvml, handle, default_sm_mhz
        self.samples: list[tuple[int, int, float, int, int]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._energy_mj: list[int] = []
        self.neighbours = Neighbours(nvml, handle)

    def _energy(self) -> int | None:
        try:
            return int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))
        except self.nvml.NVMLError:
            return None  # before Volta: no energy counter

    def _sample(self) -> None:
        nvml, handle = self.nvml, self.handle
        try:
            reasons = nvml.nvmlDeviceGetCurrentClocksEventReasons(handle)
        except (AttributeError, nvml.NVMLError):
            reasons = nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)
        self.samples.append((nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM),
                             nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM),
                             nvml.nvmlDeviceGetPowerUsage(handle) / 1e3,
                             nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU),
                             int(reasons)))

    def _run(self) -> None:
        # The window's readings at both ends are this thread's: the energy counter takes 2.5 ms of
        # NVML on an H200 and the processes' utilisation samples 1.4 ms, which the repeats need not
        # wait for at the start, nor the cell's next step at the end.
        self.neighbours.start()
        self._sample()
        start = self._energy()
        self._energy_mj = [start] if start is not None else []
        while not self._stop.wait(SAMPLE_INTERVAL_S):
            self._sample()
        # The window's end, read the moment it is marked: the energy first, since it is the reading
        # that stands for that moment; then the last sample and the process list.
        try:
            end = self._energy()
            self._sample()  # at least one sample, however short the timing
            self.neighbours.stop()
        except self.nvml.NVMLError:  # a GPU gone mid-cell: its step says so; no end, no energy
            return
        if self._energy_mj and end is not None:
            self._energy_mj.append(end)

    def __enter__(self) -> NvmlObserver:
        self._thread = threading.Thread(target=self._run, name="nvml-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        """Marks the window's end; the sampler reads it and finishes on its own (columns() waits for it)."""
        self._stop.set()

    def finished(self) -> None:
        """Waits for the sampler's reading of the window's end."""
        if self._thread is not None:
            self._thread.join()

    def columns(self, result: ResultView) -> dict[str, Any]:
        """The row's telemetry columns. Energy per repeat is the median power times the median
        kernel time: the energy counter's steps are too coarse for one sub-millisecond launch."""
        self.finished()
        if not self.samples:
            return {}
        kernel_ms, flops = result.kernel_ms, result.flops
        sm, mem, power, temperature, reasons = (list(values) for values in zip(*self.samples))
        seen = 0
        for bits in reasons:
            seen |= bits
        names = [name for bit, name in {**SLOWING_REASONS, **OTHER_REASONS}.items() if seen & bit]
        slow_clock = bool(self.default_sm_mhz) and min(sm) < THROTTLED_CLOCK_SHARE * self.default_sm_mhz
        power_median = statistics.median(power)
        per_rep_mj = power_median * kernel_ms if kernel_ms else None
        columns: dict[str, Any] = {
            "sm_clock_min_mhz": min(sm), "sm_clock_median_mhz": statistics.median(sm),
            "mem_clock_min_mhz": min(mem), "mem_clock_median_mhz": statistics.median(mem),
            "power_median_w": power_median, "temperature_max_c": max(temperature),
            "throttle_reasons": ";".join(names), "telemetry_samples": len(self.samples),
            "throttled": "yes" if slow_clock or any(seen & bit for bit in SLOWING_REASONS) else "no",
            "energy_per_rep_mj": per_rep_mj,
            "gflop_per_j": flops / 1e9 / (per_rep_mj / 1e3) if flops and per_rep_mj else None,
        }
        if len(self._energy_mj) == 2:
            columns["energy_j"] = (self._energy_mj[1] - self._energy_mj[0]) / 1e3
        return {**columns, **self.neighbours.columns()}


class TimedWorkTelemetry(Observer):
    """The device watched during the timed work, from the start of the repeats to the end of the
    round trip: the backend's telemetry (an NVML sampler on a GPU, a null one elsewhere) entered
    before the `timing` step and left after the `e2e` step. A cell that fails in between reports
    none of it."""

    FIRST, LAST = "timing", "e2e"

    def __init__(self) -> None:
        self._watch: Any = None
        self._watched: Any = None

    def before(self, step: str, run: RunView) -> None:
        if step == self.FIRST:
            self._watch = run.backend.telemetry()
            self._watch.__enter__()

    def after(self, step: str, run: RunView) -> None:
        if step == self.LAST and self._watch is not None:
            self._watch.__exit__(None, None, None)
            self._watched, self._watch = self._watch, None

    def abandon(self) -> None:
        if self._watch is not None:
            self._watch.__exit__(None, None, None)
        self._watch = self._watched = None

    def columns(self, result: ResultView) -> dict[str, Any]:
        return self._watched.columns(result) if self._watched is not None else {}


class GpuTelemetry:
    """NVML for one GPU, opened once per process; observers for each cell's timing."""

    def __init__(self, uuid: str) -> None:
        self.unavailable = ""
        self.nvml: Any = None
        self.handle: Any = None
        self.default_sm_mhz: float | None = None
        try:
            import pynvml
        except ImportError:
            self.unavailable = "no GPU telemetry: nvidia-ml-py is not installed (pip install nvidia-ml-py)"
            return
        try:
            pynvml.nvmlInit()
            self.handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
            self.nvml = pynvml
        except pynvml.NVMLError as error:
            self.unavailable = f"no GPU telemetry: NVML cannot open {uuid} ({error})"
            return
        try:
            self.default_sm_mhz = float(pynvml.nvmlDeviceGetDefaultApplicationsClock(self.handle, pynvml.NVML_CLOCK_SM))
        except pynvml.NVMLError:
            self.default_sm_mhz = None

    def sm_clock_mhz(self) -> float | None:
        """The SM clock now (one NVML call: cheap enough to read after every batch of a pair)."""
        if self.nvml is None:
            return None
        try:
            return float(self.nvml.nvmlDeviceGetClockInfo(self.handle, self.nvml.NVML_CLOCK_SM))
        except self.nvml.NVMLError:
            return None

    def neighbours(self) -> Neighbours | None:
        """A watch of the GPU's other users (a pair's rounds), or None without NVML."""
        return Neighbours(self.nvml, self.handle) if self.nvml is not None else None

    def observer(self) -> NvmlObserver | NullObserver:
        if self.nvml is None:
            return NullObserver(self.unavailable)
        return NvmlObserver(self.nvml, self.handle, self.default_sm_mhz)

