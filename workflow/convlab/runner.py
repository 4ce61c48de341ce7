"""Run one cell: load -> place on device -> set up -> launch -> time -> verify -> one row.

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
from convlab.grid import Cell
from convlab.measure import metrics, provenance
from convlab.measure import problem as problem_mod
from convlab.measure.reference import conv2d_reference
from convlab.measure.timing import measure
from convlab.measure.verify import compare
from convlab.registry import KernelSpec, get_kernel
from convlab.status import OK, UNSUPPORTED, WRONG, CellFailure

DEVICE_COLUMNS = ("device", "compute_capability", "driver_version", "runtime_version", "cupy_version",
                  "cudnn_version")


@dataclass(frozen=True)
class CellInputs:
    """What a cell needs before it touches the device: its kernel, problem, image and filter."""

    cell: Cell
    spec: KernelSpec
    problem: problem_mod.ConvProblem
    image: np.ndarray  # HWC float32 in [0, 1], as OpenCV reads it
    weights: np.ndarray  # OIHW float32


def problem_of(cell: Cell) -> problem_mod.ConvProblem:
    return problem_mod.ConvProblem(
        height=cell.size, width=cell.size, in_channels=cell.in_channels,
        out_channels=cell.out_channels, filter_size=cell.filter_size,
        stride=cell.stride, padding=cell.padding,
    )


def load_inputs(cell: Cell, image_path: str | Path) -> CellInputs:
    """Step 1, host only: the image as OpenCV reads it and the filter weights."""
    problem = problem_of(cell)
    image = problem_mod.load_image(image_path)
    if image.shape[:2] != (problem.height, problem.width):
        raise ValueError(f"{image_path} is {image.shape[1]}x{image.shape[0]}, the cell needs {cell.size}x{cell.size}")
    weights = problem_mod.make_weights(cell.filter, problem.out_channels, problem.in_channels,
                                       problem.filter_size, cell.verify["seed"])
    return CellInputs(cell, get_kernel(cell.kernel), problem, image, weights)


def place(backend: Backend, inputs: CellInputs, layout: dict[str, str]) -> tuple[np.ndarray, KernelBuffers]:
    """The image and weights on the device in the kernel's layouts, and a NaN-filled output.
    Returns the host image in the input layout too (the end-to-end time copies it)."""
    xp = backend.xp
    host_image = problem_mod.image_to_layout(inputs.image, layout["input"])
    buffers = KernelBuffers(
        image=backend.to_device(host_image),
        weights=backend.to_device(problem_mod.to_layout(inputs.weights, layout["weights"])),
        output=xp.full(problem_mod.output_shape(inputs.problem, layout["output"]), np.nan, dtype=xp.float32),
    )
    return host_image, buffers


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
        "backend": cell.backend, "layout": layout["input"],
        "H": problem.height, "W": problem.width, "C_in": problem.in_channels,
        "C_out": problem.out_channels, "filter_size": problem.filter_size,
        "stride": problem.stride, "padding": problem.padding,
        "OH": problem.out_height, "OW": problem.out_width,
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
    row.update(provenance.host_provenance())
    device = backend.device_info()
    row.update({k: v for k, v in device.items() if k in DEVICE_COLUMNS})
    unsupported = spec.unsupported_reason(problem.stride, problem.filter_size)
    if unsupported:
        row.update(status=UNSUPPORTED, reason=unsupported, finished_at=provenance.now_utc())
        return row
    xp = backend.xp
    try:
        # 2. place on device, in the layouts the kernel declares
        with backend.guard("place"):
            host_image, buffers = place(backend, inputs, layout)
        # 3. set up: compile, plan build, autotune -- timed apart from the kernel
        started = time.perf_counter()
        with backend.guard("setup"):
            prepared = backend.prepare(spec, cell.tunables, cell.settings, problem, buffers)
            backend.synchronize()
        row["setup_ms"] = (time.perf_counter() - started) * 1e3
        for key in ("implementation", "engine", "engine_heuristic", "launch"):
            row[key] = prepared.info.get(key)
        # 4. one launch on its own: a refused launch is invalid_config, never a time
        with backend.guard("launch"):
            prepared.run()
            backend.synchronize()
        # 5. time: warm-up, then repeats until the median is stable or the budget ends
        with backend.guard("timing"):
            timing = measure(prepared.run, backend.time_batch, cell.timing)
            if prepared.stages:
                row["stage_ms"] = _stage_times(prepared.stages, backend, cell.timing)
            # the round trip is dominated by copies; a slow kernel needs one repeat, not five
            e2e_reps = cell.timing["e2e_reps"] if timing.median_ms < 100 else 1
            e2e_ms = backend.end_to_end_ms(prepared.run, host_image, buffers, e2e_reps)
        # 6. verify: NaN-poisoned output, one run, compare with the float64 reference
        with backend.guard("verify"):
            buffers.output.fill(np.nan)
            prepared.run()
            backend.synchronize()
            output_hwc = problem_mod.output_to_hwc(buffers.output, layout["output"])
            reference = conv2d_reference(backend.to_device(inputs.image), backend.to_device(inputs.weights),
                                         problem, xp)
            verdict = compare(output_hwc, reference, _tolerance(inputs), xp)
        copy_gbps = copy_bandwidth(backend, device["device"], bandwidth_path)
    except CellFailure as failure:
        row.update(status=failure.status, reason=failure.reason[:2000], finished_at=provenance.now_utc())
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
    )
    row["finished_at"] = provenance.now_utc()
    return row


def run_cell(cell: Cell, image_path: str | Path, bandwidth_path: str | Path | None = None,
             backend: Backend | None = None) -> dict[str, Any]:
    """Load, then measure: the whole cell in one call."""
    return measure_cell(load_inputs(cell, image_path), bandwidth_path, backend)
