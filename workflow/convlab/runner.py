"""Run one cell: load -> place on device -> set up -> launch -> time -> verify -> one row.

Every experiment family goes through the same steps; its operands (convlab.operands) know
how to place themselves, their float64 reference and the output layout to compare in.

A failure of the kernel under test (refused launch, out of memory, unsupported problem,
compile or runtime fault) is recorded in the row with its reason and no time. A wrong
result keeps its time but is flagged ``wrong``. Anything else is a pipeline bug and raises.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from convlab.backends import get_backend
from convlab.backends.base import Backend, KernelBuffers
from convlab.cell import Cell
from convlab.families import load_operands
from convlab.launch import holds, problem_names
from convlab.measure import metrics, provenance
from convlab.measure.phases import PhaseClock
from convlab.measure.problem import ConvProblem, GemmProblem
from convlab.measure.timing import measure
from convlab.measure.verify import compare
from convlab.operands import Operands
from convlab.registry import KernelSpec, get_kernel
from convlab.status import ERROR, INVALID_CONFIG, OK, UNSUPPORTED, WRONG, CellFailure

E2E_SINGLE_REP_BYTES = 256 << 20
HOST_REFERENCE_FLOPS = 1e8
DEVICE_COLUMNS = ("device", "gpu_index", "gpu_uuid", "compute_capability", "driver_version", "runtime_version", "cupy_version",
                  "cudnn_version")


@dataclass(frozen=True)
class CellInputs:
    """What a cell needs before it touches the device: its kernel and host-side operands."""

    cell: Cell
    spec: KernelSpec
    operands: Operands

    @property
    def problem(self) -> ConvProblem | GemmProblem:
        return self.operands.problem


def load_inputs(cell: Cell, image_path: str | Path | None = None) -> CellInputs:
    """Step 1, host only: the picture (or random data) and the filter weights."""
    return CellInputs(cell, get_kernel(cell.kernel), load_operands(cell, image_path))


def place(backend: Backend, inputs: CellInputs, layout: dict[str, str]) -> tuple[dict[str, np.ndarray],
                                                                                 KernelBuffers]:
    """The operands on the device in the kernel's layouts, and a NaN-filled output.
    Returns the host arrays the end-to-end time copies in, too."""
    return inputs.operands.place(backend, layout)


def foreign_device(device: str, label: str, bandwidth_path: str | Path | None) -> str | None:
    """Why this device may not measure a cell of ``label``, or None. A label's device is the one
    its copy bandwidth was measured on: a cell that lands on another model (a Slurm group on
    another node type, say) must not mix into that label's summary."""
    if not bandwidth_path or not Path(bandwidth_path).is_file():
        return None
    recorded = json.loads(Path(bandwidth_path).read_text()).get("device")
    if recorded and recorded != device:
        return (f"measured on {device}, but results/{label}/ holds results of {recorded} (its copy bandwidth "
                f"was measured there); run this device under its own config device label")
    return None


def copy_bandwidth(backend: Backend, device: str, bandwidth_path: str | Path | None) -> float:
    """The measured copy bandwidth for this device: from the bandwidth rule's file when it
    was measured on the same device, else measured now."""
    if bandwidth_path and Path(bandwidth_path).is_file():
        recorded = json.loads(Path(bandwidth_path).read_text())
        if recorded.get("device") == device and recorded.get("backend") == backend.name:
            return float(recorded["copy_gbps"])
    return backend.copy_bandwidth_gbps()


def describe(inputs: CellInputs, layout: dict[str, str]) -> dict[str, Any]:
    cell, problem = inputs.cell, inputs.problem
    return {
        "experiment": cell.experiment, "kernel": cell.kernel, "variant": cell.variant,
        "backend": cell.backend, "layout": layout["input"], "size": cell.size,
        **inputs.operands.describe(),
        "block": cell.tunables.get("block"),
        "flops": problem.flops, "bytes": problem.bytes_moved,
        "timing_mode": cell.timing["mode"],
    }


def _tolerance(inputs: CellInputs) -> float:
    precision = "tf32" if inputs.cell.settings.get("math") == "tf32" else inputs.spec.precision
    return inputs.cell.verify["tolerance"][precision]


def _stage_times(stages, backend: Backend, timing: dict) -> str:
    """Each stage of a multi-stage kernel timed alone (e.g. im2col=0.12;gemm=0.31)."""
    parts = [f"{name}={measure(run, backend.time_batch, timing).median_ms:.6g}" for name, run in stages]
    return ";".join(parts)


def measure_cell(inputs: CellInputs, bandwidth_path: str | Path | None = None,
                 backend: Backend | None = None) -> dict[str, Any]:
    cell, spec, problem = inputs.cell, inputs.spec, inputs.problem
    backend = backend or get_backend(cell.backend)
    layout = backend.layout_for(spec)
    row = describe(inputs, layout)
    row["started_at"] = provenance.now_utc()
    row.update(provenance.host_provenance(cell.backend))
    device = backend.device_info()
    row.update({k: v for k, v in device.items() if k in DEVICE_COLUMNS})
    foreign = foreign_device(device["device"], cell.device, bandwidth_path)
    if foreign:
        row.update(status=ERROR, reason=foreign, finished_at=provenance.now_utc())
        return row
    unsupported = spec.unsupported_reason(cell.stride, cell.filter_size)
    if unsupported:
        row.update(status=UNSUPPORTED, reason=unsupported, finished_at=provenance.now_utc())
        return row
    names = problem_names(problem, cell.tunables)
    unmet = [condition for condition in spec.requires if not holds(condition, names)]
    if unmet:
        row.update(status=INVALID_CONFIG, reason=f"{spec.name} requires {' and '.join(unmet)} "
                   f"({', '.join(f'{k}={v}' for k, v in sorted(names.items()))})", finished_at=provenance.now_utc())
        return row
    phases = PhaseClock()
    try:
        # 2. place on device, in the layouts the kernel declares
        with backend.guard("place"):
            host_inputs, buffers = place(backend, inputs, layout)
            backend.synchronize()
        phases.lap("place")
        # 3. set up: compile, plan build, autotune -- timed apart from the kernel
        started = time.perf_counter()
        with backend.guard("setup"):
            prepared = backend.prepare(spec, cell.tunables, cell.settings, problem, buffers)
            backend.synchronize()
        row["setup_ms"] = (time.perf_counter() - started) * 1e3
        phases.lap("setup")
        for key in ("implementation", "engine", "engine_heuristic", "launch"):
            row[key] = prepared.info.get(key)
        # 4. one launch on its own: a refused launch is invalid_config, never a time
        with backend.guard("launch"):
            prepared.run()
            backend.synchronize()
        phases.lap("launch")
        # 5. time: warm-up, then repeats until the median is stable or the budget ends
        with backend.guard("timing"), backend.telemetry() as observer:
            timing = measure(prepared.run, backend.time_batch, cell.timing)
            if prepared.stages:
                row["stage_ms"] = _stage_times(prepared.stages, backend, cell.timing)
            phases.lap("timing")
            # the round trip is dominated by copies: a slow kernel or a large transfer needs one
            # repeat, not five
            small = timing.median_ms < 100 and problem.bytes_moved < E2E_SINGLE_REP_BYTES
            e2e_reps = cell.timing["e2e_reps"] if small else 1
            e2e_ms = backend.end_to_end_ms(prepared.run, host_inputs, buffers, e2e_reps)
            phases.lap("e2e")
        # 6. verify: NaN-poisoned output, one run, compare with the float64 reference
        with backend.guard("verify"):
            buffers.output.fill(np.nan)
            prepared.run()
            backend.synchronize()
            output = inputs.operands.comparable_output(buffers.output, layout)
            # a small problem is checked on the host: NumPy takes a few ms where the GPU path
            # spends ~0.1 s loading its float64 kernels into a fresh process
            xp = np if problem.flops <= HOST_REFERENCE_FLOPS else backend.xp
            if xp is np:
                output = backend.to_host(output)
            verdict = compare(output, inputs.operands.reference(xp), _tolerance(inputs), xp)
            backend.synchronize()
        phases.lap("verify")
        copy_gbps = copy_bandwidth(backend, device["device"], bandwidth_path)
    except CellFailure as failure:
        row.update(status=failure.status, reason=failure.reason[:2000], phase_ms=phases.text(),
                   finished_at=provenance.now_utc())
        return row

    # 7. one row
    row.update(
        status=OK if verdict.passed else WRONG,
        reason=verdict.reason,
        kernel_ms=timing.median_ms, kernel_ms_min=timing.min_ms, kernel_ms_max=timing.max_ms,
        kernel_ms_iqr=timing.iqr_ms, reps=timing.reps, timing_stop=timing.stop,
        e2e_ms=e2e_ms, copy_gbps=copy_gbps,
        max_rel_err=verdict.max_rel_err, rel_l2_err=verdict.rel_l2_err,
        tolerance=verdict.tolerance, nonfinite=verdict.nonfinite,
        **metrics.throughput(problem, timing.median_ms, copy_gbps),
        **observer.columns(timing.median_ms, problem.flops),
        phase_ms=phases.text(),
    )
    row["finished_at"] = provenance.now_utc()
    return row


def run_cell(cell: Cell, image_path: str | Path | None = None, bandwidth_path: str | Path | None = None,
             backend: Backend | None = None) -> dict[str, Any]:
    """Load, then measure: the whole cell in one call."""
    return measure_cell(load_inputs(cell, image_path), bandwidth_path, backend)
