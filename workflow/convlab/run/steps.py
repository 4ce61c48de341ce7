"""The steps of one cell (convlab.run.runner runs them in order), each returning what it produced.

Every device step runs under ``backend.guard(step)``, which turns the kernel's own failures into
CellFailure for that step; anything else raises.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from convlab.backends.base import Backend, KernelBuffers, PreparedKernel
from convlab.measure.timing import Stages, TimingResult, measure, time_stages_alone
from convlab.plan.cell import Cell
from convlab.plan.families.inputs import load_operands
from convlab.plan.operands import Operands
from convlab.plan.problemcache import PROBLEMS, SharedProblem, problem_key
from convlab.plan.registry import KernelSpec, get_kernel
from convlab.problem.geometry import ConvProblem, GemmProblem
from convlab.problem.verify import Verdict, compare, reference_scale
from convlab.status import OK, WRONG

E2E_SINGLE_REP_BYTES = 256 << 20
# Up to these FLOPs the output is compared on the host. In a fresh process the GPU path spends
# ~0.1 s loading CuPy's float64 kernels, which NumPy's few milliseconds beat up to large problems;
# a long-lived worker loads them once, and the device's few launches then beat the copy to the host
# and NumPy's passes for all but the smallest problems (some ten thousand outputs).
HOST_REFERENCE_FLOPS = 1e8
LONG_LIVED_HOST_REFERENCE_FLOPS = 1e6


@dataclass(frozen=True)
class CellInputs:
    """What a cell needs before it touches the device: its kernel and host-side operands, and what
    it shares with the other cells of its problem (in a one-shot process, nothing)."""

    cell: Cell
    spec: KernelSpec
    operands: Operands
    shared: SharedProblem = field(default_factory=SharedProblem)

    @property
    def problem(self) -> ConvProblem | GemmProblem:
        return self.operands.problem


@dataclass(frozen=True)
class Placed:
    """The operands on the device in the kernel's layouts, and the host arrays the round trip copies
    in and out of."""

    layout: dict[str, str]
    host_inputs: dict[str, np.ndarray]
    buffers: KernelBuffers
    host_output: np.ndarray


@dataclass(frozen=True)
class Prepared:
    kernel: PreparedKernel
    setup_ms: float


@dataclass(frozen=True)
class Timed:
    timing: TimingResult
    e2e_ms: float


@dataclass
class Run:
    """A cell's run so far, as the observers' hooks see it: the backend, the inputs, and what
    the steps have produced up to now."""

    backend: Backend
    inputs: CellInputs
    placed: Placed | None = None
    prepared: Prepared | None = None


@dataclass(frozen=True)
class Verified:
    verdict: Verdict

    @property
    def status(self) -> str:
        return OK if self.verdict.passed else WRONG


@dataclass(frozen=True)
class Result:
    """What the steps produced, for the observers. A failed cell keeps what its setup found but
    has no time and no verdict: its time would be that of a kernel that did not finish the cell."""

    problem: ConvProblem | GemmProblem
    prepared: Prepared | None = None
    timed: Timed | None = None
    verified: Verified | None = None
    copy_gbps: float | None = None

    @property
    def kernel_ms(self) -> float | None:
        return self.timed.timing.median_ms if self.timed else None

    @property
    def flops(self) -> int:
        return self.problem.flops


def load_inputs(cell: Cell, image_path: str | Path | None = None) -> CellInputs:
    """Host only: the picture (or random data) and the filter weights, made once per problem where
    the process keeps problems (convlab.plan.problemcache)."""
    spec = get_kernel(cell.kernel)
    shared = PROBLEMS.problem(problem_key(cell, image_path))
    return CellInputs(cell, spec, shared.operands(lambda: load_operands(cell, image_path)), shared)


def place(backend: Backend, inputs: CellInputs, layout: dict[str, str]) -> Placed:
    """The operands on the device, in the layouts the kernel declares, a NaN-filled output, and the
    host array the round trip copies it into (its pages mapped, so that the copy's time is the copy's)."""
    with backend.guard("place"):
        host_inputs, buffers = inputs.operands.place(backend, layout, inputs.shared)
        backend.synchronize()
    return Placed(layout, host_inputs, buffers, inputs.shared.host_output(tuple(buffers.output.shape)))


def set_up(backend: Backend, inputs: CellInputs, placed: Placed) -> Prepared:
    """Compile, build plans, autotune: timed apart from the kernel."""
    cell = inputs.cell
    started = time.perf_counter()
    with backend.guard("setup"):
        kernel = backend.prepare(inputs.spec, cell.tunables, cell.settings, inputs.problem, placed.buffers)
        backend.synchronize()
    return Prepared(kernel, (time.perf_counter() - started) * 1e3)


def launch(backend: Backend, prepared: Prepared) -> None:
    """One launch on its own: a refused launch is invalid_config, never a time."""
    with backend.guard("launch"):
        prepared.kernel.run()
        backend.synchronize()


def time_kernel(backend: Backend, inputs: CellInputs, prepared: Prepared) -> TimingResult:
    """Warm-up, then repeats until the median is stable or the budget ends; a kernel of several
    stages has each stage's time too, from its own repeats or, for a short run, each timed alone."""
    kernel, settings = prepared.kernel, inputs.cell.timing
    stages = Stages(tuple(kernel.stages), backend.time_stages) if kernel.stages else None
    with backend.guard("timing"):
        timing = measure(kernel.run, backend.time_batch, settings, backend.capture_graph, stages)
        if stages and not timing.stages_in_run:
            timing = replace(timing, stage_ms=time_stages_alone(stages.named, backend.time_batch, settings,
                                                                backend.capture_graph))
    return timing


def round_trip(backend: Backend, inputs: CellInputs, placed: Placed, prepared: Prepared, timing: TimingResult) -> float:
    """Copy in, compute, copy out (ms), each repeat on a NaN-filled output: the output the last one
    leaves is a fresh run's, after the timing's, which verify_output compares. Its failures read as
    the timing's, of which it is part."""
    # the round trip is dominated by copies: a slow kernel or a large transfer needs one repeat,
    # not five
    small = timing.median_ms < 100 and inputs.problem.bytes_moved < E2E_SINGLE_REP_BYTES
    reps = inputs.cell.timing["e2e_reps"] if small else 1
    with backend.guard("timing"):
        return backend.end_to_end_ms(prepared.kernel.run, placed.host_inputs, placed.buffers, placed.host_output, reps)


def precision(inputs: CellInputs) -> str:
    """The precision the cell computes in, under its own settings (the config's overrides included): what it is
    verified in, and what its row records for the report to rank it by."""
    return inputs.spec.precision_under(inputs.cell.settings)


def tolerance(inputs: CellInputs) -> float:
    return inputs.cell.verify["tolerance"][precision(inputs)]


def comparing_module(backend: Backend, inputs: CellInputs) -> Any:
    """Where the output is compared with the reference: the array module of that side (numpy: the
    host). The cpu backend's is the host; on a GPU, the host for a problem too small to repay the
    device's launches and loads (HOST_REFERENCE_FLOPS)."""
    limit = LONG_LIVED_HOST_REFERENCE_FLOPS if inputs.shared.long_lived else HOST_REFERENCE_FLOPS
    return np if backend.xp is np or inputs.problem.flops <= limit else backend.xp


def verify(backend: Backend, inputs: CellInputs, placed: Placed, prepared: Prepared) -> Verified:
    """NaN-poisoned output, one run, compared with the float64 reference (verify_output)."""
    with backend.guard("verify"):
        placed.buffers.output.fill(np.nan)
        prepared.kernel.run()
        backend.synchronize()
    return verify_output(backend, inputs, placed)


def verify_output(backend: Backend, inputs: CellInputs, placed: Placed) -> Verified:
    """The output a run on a NaN-poisoned output left, compared with the float64 reference (made once
    per problem where the process keeps problems, on the side it is compared on)."""
    operands, output = inputs.operands, placed.buffers.output
    with backend.guard("verify"):
        comparable: Any = operands.comparable_output(output, placed.layout)
        xp = comparing_module(backend, inputs)
        if xp is np:
            comparable = backend.to_host(comparable)
        reference = inputs.shared.reference(xp, lambda: operands.reference(xp))
        scale = inputs.shared.reference_scale(xp, lambda: reference_scale(reference, xp))
        verdict = compare(comparable, reference, tolerance(inputs), xp, scale)
        backend.synchronize()
    return Verified(verdict)
