"""The NVML observer's columns, from a stand-in NVML (the real one is exercised on the device)."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

import pytest

from convlab.backends.cpu import CpuBackend
from convlab.measure.row import COLUMNS as ROW_COLUMNS
from convlab.measure.telemetry import COLUMNS, NvmlObserver


class FakeNvml:
    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 0, 1, 0

    class NVMLError(Exception):
        pass

    def __init__(self, sm_mhz: list[int], reasons: int = 0) -> None:
        self.sm_mhz, self.reasons, self.calls, self.energy_mj = sm_mhz, reasons, 0, 1_000_000

    def nvmlDeviceGetClockInfo(self, handle, which):  # noqa: N802 (NVML's names)
        if which == self.NVML_CLOCK_MEM:
            return 2619
        self.calls += 1
        return self.sm_mhz[min(self.calls - 1, len(self.sm_mhz) - 1)]

    def nvmlDeviceGetPowerUsage(self, handle):  # noqa: N802
        return 400_000  # mW

    def nvmlDeviceGetTemperature(self, handle, sensor):  # noqa: N802
        return 61

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):  # noqa: N802
        return self.reasons

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):  # noqa: N802
        self.energy_mj += 2000
        return self.energy_mj


def timed(kernel_ms: float, flops: float) -> SimpleNamespace:
    """What an observer reads of a cell's result (convlab.run.steps.Result)."""
    return SimpleNamespace(kernel_ms=kernel_ms, flops=flops)


def observe(nvml: FakeNvml) -> dict:
    with NvmlObserver(nvml, handle=None, default_sm_mhz=1980.0) as observer:
        time.sleep(0.03)
    return observer.columns(timed(kernel_ms=0.5, flops=2e9))


def test_a_steady_gpu_gives_clocks_power_energy_and_not_throttled():
    columns = observe(FakeNvml([1980]))
    assert columns["throttled"] == "no" and columns["throttle_reasons"] == ""
    assert columns["sm_clock_min_mhz"] == columns["sm_clock_median_mhz"] == 1980
    assert columns["power_median_w"] == 400 and columns["temperature_max_c"] == 61
    assert columns["energy_per_rep_mj"] == pytest.approx(200)  # 400 W x 0.5 ms
    assert columns["gflop_per_j"] == pytest.approx(2 / 0.2)
    assert columns["energy_j"] == pytest.approx(2.0) and columns["telemetry_samples"] >= 2
    assert set(columns) <= set(COLUMNS) <= set(ROW_COLUMNS)


def test_a_low_clock_or_a_slowing_reason_is_throttled():
    assert observe(FakeNvml([1980, 1200, 1980]))["throttled"] == "yes"  # below 75 % of 1980 MHz
    power_capped = observe(FakeNvml([1980], reasons=0x4))
    assert power_capped["throttled"] == "yes" and power_capped["throttle_reasons"] == "sw_power_cap"
    idle = observe(FakeNvml([1980], reasons=0x1))
    assert idle["throttled"] == "no" and idle["throttle_reasons"] == "gpu_idle"


class SlowEndNvml(FakeNvml):
    """NVML whose energy counter and process list take 0.2 s each, as a busy driver's may."""

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):  # noqa: N802
        time.sleep(0.2)
        return super().nvmlDeviceGetTotalEnergyConsumption(handle)

    def nvmlDeviceGetComputeRunningProcesses(self, handle):  # noqa: N802
        time.sleep(0.2)
        return [SimpleNamespace(pid=os.getpid())]


def test_the_window_opens_and_ends_without_waiting_for_nvml_and_its_columns_wait_for_the_end_reading():
    nvml = SlowEndNvml([1980])
    observer = NvmlObserver(nvml, handle=None, default_sm_mhz=1980.0)
    opening = time.perf_counter()
    observer.__enter__()
    assert time.perf_counter() - opening < 0.1  # the repeats start at once
    time.sleep(0.02)
    ending = time.perf_counter()
    observer.__exit__(None, None, None)
    assert time.perf_counter() - ending < 0.1  # the cell's next step starts at once
    columns = observer.columns(timed(kernel_ms=0.5, flops=2e9))
    assert columns["energy_j"] == pytest.approx(2.0)  # the end reading, one step of the counter on
    assert columns["telemetry_samples"] >= 2 and columns["gpu_neighbours"] == 0


def test_the_cpu_backend_has_empty_columns_and_says_why():
    with CpuBackend().telemetry() as observer:
        pass
    assert observer.columns(timed(1.0, 1e9)) == {} and "no GPU telemetry" in observer.unavailable


def test_throttled_cells_are_said_in_the_summary_warning_and_the_findings():
    import pandas as pd

    from convlab.report.aggregate import throttled_note

    summary = pd.DataFrame({"throttled": ["no", "yes", "yes", ""], "throttle_reasons": ["", "sw_power_cap", "", ""]})
    note = throttled_note(summary)
    assert note and note.startswith("2 of 4 cells were timed while the GPU was throttled (sw_power_cap)")
    assert throttled_note(summary.assign(throttled="no")) is None
