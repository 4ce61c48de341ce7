"""A cell's kernel measured side by side with an earlier version of it: the same problem, the
same operands, the same GPU and process, interleaved (convlab.measure.interleave).

Both versions go through the cell's own steps up to the launch (place, set up, launch), on one
placement of the operands; the earlier version is verified too, as a version whose output is
wrong here times something else.

Then the rounds. Both versions are sampled the same way, chosen once for the pair: a launch-bound
pair (the faster version under GRAPH_BELOW_MS a run) as replays of CUDA graphs of as many launches
each, where an event pair around one launch would time the events as much as the kernel; any other
pair per launch; a cell timed cold, cold. Sampled each its own way, two copies of one kernel near
the line differed by a third (one per launch, one per replay).

A ratio is only trusted between the two versions as their rows measured them, so the pair proves
that first and refuses where it cannot (PairRefused, with why):
- each side runs the machine code its row names (``module_hash``): the previous version, compiled
  again, must give the code it was measured with;
- after the rounds, the previous version's time here, scaled by how the new version's time here
  differs from its own row's (the pair's sampling and this moment's clocks), must agree with the
  previous row's time within the run-to-run tolerance the caller gives. That scaling cancels the
  pair's sampling only where the two rows were timed alike (the same applied mode), and a row the
  lab cannot vouch for (convlab.history.vouching: timed beside another process, say) is no
  measure of its version's speed: then nothing is checked, the pair measured now stands on its own,
  and its result says why it was not checked (``unproved``).
The GPU's other users during the rounds are watched too (convlab.measure.telemetry.Neighbours).

Two versions that load the same machine code and launch it the same way (an edit of comments or
whitespace, say) run the same instructions: the pair says so (SAME_CODE, ratio 1) instead of
timing them, as two loaded copies of one binary can differ by a few percent for reasons that are
not the code's (where each module lands in memory) and a verdict on them would name a change that
does not exist.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from convlab.backends import get_backend
from convlab.backends.base import Backend
from convlab.measure.interleave import PairedResult, Side, interleave
from convlab.measure.timing import GraphRefused, capture_graph
from convlab.plan.cell import Cell
from convlab.plan.registry import KernelSpec
from convlab.run.steps import CellInputs, Placed, Prepared, launch, load_inputs, place, set_up, verify
from convlab.status import CellFailure

GRAPH_BELOW_MS = 0.05
PER_RUN_SAMPLES = 3  # runs of each version, untimed warm-up, whose median decides how the pair is sampled
SAME_CODE = "same_code"  # a pair's stop when both versions run the same machine code the same way
# What a kernel's description says of how its code is launched; the source file's name and text
# are left out, as the module's hash stands for what the compiler made of them.
LAUNCH_FIELDS = ("layout", "precision", "tunables", "settings", "supports", "defines", "scratch", "constants",
                 "stages", "library", "experiments", "requires")


class PairRefused(Exception):
    """The two versions cannot be measured side by side here; the message says why."""


@dataclass(frozen=True)
class Recorded:
    """What a version's row says it ran: the hash of its machine code ('' for a kernel that
    compiles none), its time, the mode that timed it (its ``timing_applied``: warm, cold, graph) and
    why the lab cannot vouch for that time ('' where it can)."""

    module_hash: str | None
    kernel_ms: float | None
    timing: str = ""
    unvouched: str = ""


def prove_same_code(prepared: Prepared, recorded: Recorded, which: str) -> None:
    """PairRefused unless ``prepared`` runs the machine code its row names."""
    now = prepared.kernel.info.get("module_hash")
    if not now:
        return  # compiles nothing: its identity is its files (and its library's version)
    if not recorded.module_hash:
        raise PairRefused(f"the {which} version's row does not name the machine code it ran (measured before "
                          "convlab recorded it)")
    if now != recorded.module_hash:
        raise PairRefused(f"the {which} version compiles to other machine code here ({now}) than its row ran "
                          f"({recorded.module_hash})")


def unproved(previous: Recorded, new: Recorded | None) -> str:
    """Why the pair's times cannot be checked against the rows ('' where they can): a side without
    a row (a preview), a row the lab cannot vouch for, or two rows timed in different modes."""
    if new is None:
        return "the new version has no row yet"
    if not (previous.kernel_ms and new.kernel_ms):
        return "a row has no time"
    if previous.unvouched:
        return f"the previous row was measured while {previous.unvouched}"
    if new.unvouched:
        return f"the new row was measured while {new.unvouched}"
    if previous.timing and new.timing and previous.timing != new.timing:
        return f"the rows were timed in different modes ({previous.timing}, {new.timing})"
    return ""


def prove_same_speed(result: PairedResult, previous: Recorded, new: Recorded | None, tolerance: float) -> str:
    """PairRefused unless the previous version ran here as its row measured it, once the new
    version's own difference from its row (sampling, clocks) is taken out; where the rows cannot
    tell (unproved()), nothing is checked and that reason is returned ('' where it was proved)."""
    why = unproved(previous, new)
    if why or not (result.previous_ms > 0 and result.new_ms > 0):
        return why or "the pair has no time"
    drift = result.new_ms / new.kernel_ms
    off = result.previous_ms / (previous.kernel_ms * drift)
    if abs(math.log(off)) > math.log1p(tolerance):
        raise PairRefused(f"the previous version ran x{off:.3f} its recorded time here (tolerance "
                          f"{tolerance:.0%}): not as it was measured")
    return ""


def same_code(previous: Prepared, previous_spec: KernelSpec, new: Prepared, new_spec: KernelSpec) -> bool:
    """Both versions load the same machine code (by hash) and launch it alike: the same launch
    description, and the same grid, block, shared memory and registers here."""
    code = previous.kernel.info.get("module_hash")
    if not code or code != new.kernel.info.get("module_hash"):
        return False
    if previous.kernel.info.get("launch") != new.kernel.info.get("launch"):
        return False
    return all(getattr(previous_spec, name) == getattr(new_spec, name) for name in LAUNCH_FIELDS)


def prepared_version(backend: Backend, inputs: CellInputs, placements: dict[tuple, Placed], check: bool) -> Prepared:
    """One version set up and launched once (and verified where ``check``), on the placement its
    layout shares with the other version: both read the same input buffers and write the same
    output buffer, as a buffer's address alone moves a memory-bound kernel's time by percents."""
    layout = backend.layout_for(inputs.spec)
    key = tuple(sorted(layout.items()))
    if key not in placements:
        placements[key] = place(backend, inputs, layout)
    placed = placements[key]
    prepared = set_up(backend, inputs, placed)
    launch(backend, prepared)
    if check:
        verified = verify(backend, inputs, placed, prepared)
        if not verified.verdict.passed:
            raise PairRefused(f"the previous version's output is wrong here: {verified.verdict.reason}")
    return prepared


def clocked(backend: Backend, sample: Callable[[int], list[float]]) -> Callable[[int], tuple[list[float], float | None]]:
    """A sampler whose every batch comes with the SM clock read as it ends."""
    def taken(n: int) -> tuple[list[float], float | None]:
        return sample(n), backend.sm_clock_mhz()
    return taken


def sides(backend: Backend, previous: Prepared, new: Prepared, cold: bool) -> tuple[Side, Side, str]:
    """Both versions' samplers, chosen once for the pair so that the two are sampled alike, and
    how ("graph of N launches", "per launch", "per launch, cold"): graph replays of as many launches
    each where the faster version runs under GRAPH_BELOW_MS (sized by it, so that its replay lasts
    about a millisecond), per launch otherwise or where either version cannot be captured."""
    runs = (previous.kernel.run, new.kernel.run)
    if cold:
        return (*(Side(clocked(backend, lambda n, run=run: backend.time_batch(run, n, True))) for run in runs),
                "per launch, cold")
    per_run_ms = [statistics.median(backend.time_batch(run, PER_RUN_SAMPLES, False)) for run in runs]
    faster = 0 if per_run_ms[0] <= per_run_ms[1] else 1
    if per_run_ms[faster] < GRAPH_BELOW_MS:
        try:
            samplers: list = [None, None]
            samplers[faster], launches, _ = capture_graph(runs[faster], backend.capture_graph, per_run_ms[faster])
            samplers[1 - faster] = backend.capture_graph(runs[1 - faster], launches)
            return (*(Side(clocked(backend, sampler), launches) for sampler in samplers), f"graph of {launches} launches")
        except GraphRefused:
            pass
    return (*(Side(clocked(backend, lambda n, run=run: backend.time_batch(run, n, False))) for run in runs),
            "per launch")


def measure_pair(cell: Cell, image_path: str | Path | None, previous_spec: KernelSpec, precision: float,
                 budget_s: float, backend: Backend | None = None,
                 recorded: tuple[Recorded, Recorded | None] | None = None, tolerance: float = 0.08,
                 same_code_is_same: bool = False, new_spec: KernelSpec | None = None) -> PairedResult:
    """The cell's kernel (new) against ``previous_spec`` (an earlier version of it), interleaved
    until the ratio is known to ± ``precision`` or ``budget_s`` is spent. ``recorded``: what the
    previous and the new row say they ran, which the pair must prove before its ratio counts
    (``tolerance``: how far two runs of one version may differ in time); the new one None where it
    has no row yet (a preview). PairRefused where either version fails here or cannot be proved
    the one measured. ``same_code_is_same``: two versions that run the same machine code alike are
    SAME without rounds (a self-check measures them). ``new_spec``: the new version as a kernel of
    its own (a preview's copy of the files as saved) instead of the cell's registered kernel."""
    backend = backend or get_backend(cell.backend)
    new_inputs = load_inputs(cell, image_path)
    if new_spec is not None:
        new_inputs = replace(new_inputs, spec=new_spec)
    previous_inputs = replace(new_inputs, spec=previous_spec)
    cold = cell.timing["mode"] == "cold"
    try:
        placements: dict[tuple, Placed] = {}
        previous = prepared_version(backend, previous_inputs, placements, check=True)
        # A kernel as its own previous version (a self-check of one that compiles nothing of its own:
        # a library's wrapper, a cpu twin) is set up once for both sides: two setups of a library
        # kernel may choose two engines, and an autotuned cuDNN plan did, x0.98 against itself.
        same_kernel = new_inputs.spec is previous_spec
        new = previous if same_kernel else prepared_version(backend, new_inputs, placements, check=False)
        if recorded:
            prove_same_code(previous, recorded[0], "previous")
            if recorded[1] is not None:
                prove_same_code(new, recorded[1], "new")
        if same_code_is_same and same_code(previous, previous_spec, new, new_inputs.spec):
            previous_ms = recorded[0].kernel_ms if recorded else None
            new_ms = recorded[1].kernel_ms if recorded and recorded[1] is not None else previous_ms
            return PairedResult(1.0, 1.0, 1.0, 0, previous_ms or math.nan, new_ms or math.nan, SAME_CODE,
                                clock_normalised=False, batch=0, sampling="not timed: the same machine code")
        watch = backend.neighbours()
        with backend.guard("timing"):
            if watch:
                watch.start()
            previous_side, new_side, sampling = sides(backend, previous, new, cold)
            result = replace(interleave(previous_side, new_side, precision, budget_s), sampling=sampling)
            if watch:
                watch.stop()
    except CellFailure as failure:
        where = f" in {failure.stage}" if failure.stage else ""
        raise PairRefused(f"{failure.status}{where}: {failure.reason}") from failure
    why = prove_same_speed(result, recorded[0], recorded[1], tolerance) if recorded else "no row to check against"
    seen = watch.columns() if watch else {}
    return replace(result, neighbours=seen.get("gpu_neighbours"), neighbour_names=seen.get("gpu_neighbour_names") or "",
                   unproved=why)
