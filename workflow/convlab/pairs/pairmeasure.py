"""The `pair` step's measurements: each candidate (convlab.history.pairing) measured side by side
with its previous kernel version on the device (convlab.run.paired), into its row of
verdicts/paired.csv (convlab.history.pairfile), or that row with the reason it has none.

The step's settings are the config's `verdicts` section (convlab.history.verdictpolicy); each
previous version is restored from the database once, and every version's module compiled in one
compiler process before the first pair. A preview (convlab.pairs.previewverdicts) and the A/A
self-check (convlab.pairs.selfcheck) measure their pairs by this same code.
"""

from __future__ import annotations

import re
import sqlite3
import tempfile
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from convlab.backends import get_backend
from convlab.backends.base import Backend
from convlab.backends.devicelock import exclusive_device
from convlab.backends.sourcemodule import SourceModule, source_module
from convlab.history.kernelversions import VersionUnavailable
from convlab.history.pairfile import PairRow
from convlab.history.pairing import Candidate, candidates, restore_previous
from convlab.history.verdictpolicy import DRIFT_FLOOR, VerdictPolicy, floor_for
from convlab.history.verdictrule import Ratio
from convlab.history.vouching import why_unvouched
from convlab.pairs.whyprofile import WhyProfiler, pair_to_explain, with_why
from convlab.plan.cell import Cell
from convlab.plan.families import family
from convlab.plan.registry import KernelSpec, get_kernel, read_kernel_folder
from convlab.run.paired import PairRefused, Recorded, measure_pair


def previous_spec(candidate: Candidate, connection: sqlite3.Connection | None, scratch: Path,
                  restored: dict[str, KernelSpec], twins: bool = False) -> KernelSpec:
    """The candidate's previous version as a kernel, restored once per version (``twins``: a cpu
    twin's too)."""
    if candidate.previous_hash not in restored:
        folder, name = restore_previous(connection, candidate, scratch, twins)
        restored[candidate.previous_hash] = read_kernel_folder(folder)[name]
    return restored[candidate.previous_hash]


def drift_tolerance(candidate: Candidate, threshold: float) -> float:
    """How far two runs of one version may differ in time: the drift floor for the cell (wider for
    launch-bound times), at least the threshold."""
    return max(threshold, floor_for(candidate.previous_ms or 0, DRIFT_FLOOR))


def previous_modules(chosen: list[Candidate], connection: sqlite3.Connection | None, scratch: Path,
                     restored: dict[str, KernelSpec]) -> dict[SourceModule, list[str]]:
    """The modules the candidates' previous versions compile, so that one compiler process makes
    them all before the first pair (a version that cannot be restored is left to its pair)."""
    modules: dict[SourceModule, list[str]] = {}
    for candidate in chosen:
        try:
            spec = previous_spec(candidate, connection, scratch, restored)
        except VersionUnavailable:
            continue
        if spec.source is None or spec.library:
            continue
        cell = candidate.cell
        module = source_module(spec, cell.tunables, family(cell.experiment).problem(cell))
        modules.setdefault(module, []).append(spec.name)
    return modules


def measured_pair(candidate: Candidate, connection: sqlite3.Connection | None, scratch: Path,
                  restored: dict[str, KernelSpec], policy: VerdictPolicy, backend: Backend,
                  new_spec: KernelSpec | None = None) -> PairRow:
    """One candidate's pair, or its row with the reason it has none. ``new_spec``: a preview's copy
    of the new version's files, which has no row yet; both versions are then copies of their
    files, so a cpu twin's previous version is paired too."""
    cell = candidate.cell
    base = PairRow(cell.path, cell.kernel, candidate.previous_hash, candidate.kernel_hash)
    new_row = (recorded_side(candidate.new_module, candidate.new_ms, candidate.new_row)
               if new_spec is None else None)
    recorded = (recorded_side(candidate.previous_module, candidate.previous_ms, candidate.previous_row), new_row)
    try:
        previous = previous_spec(candidate, connection, scratch, restored, twins=new_spec is not None)
        result = measure_pair(cell, cell.image or None, previous, policy.pair_precision, policy.pair_budget_s, backend,
                              recorded, drift_tolerance(candidate, policy.threshold), same_code_is_same=True,
                              new_spec=new_spec)
    except (VersionUnavailable, PairRefused) as why:
        return replace(base, note=" ".join(str(why).split()))
    return replace(base, ratio=Ratio(result.ratio, result.low, result.high, result.rounds),
                   previous_ms=result.previous_ms, new_ms=result.new_ms, stop=result.stop,
                   clock_normalised="yes" if result.clock_normalised else "no",
                   neighbours=result.neighbours, neighbour_names=result.neighbour_names, sampling=result.sampling,
                   unproved=result.unproved)


def recorded_side(module_hash: str, kernel_ms: float | None, row: Mapping[str, object]) -> Recorded:
    """What one version's row says it ran, how it was timed and whether the lab vouches for its time."""
    return Recorded(module_hash, kernel_ms, str(row.get("timing_applied") or row.get("timing_mode") or ""),
                    why_unvouched(row) or "")


def run_pairs(config: dict[str, Any], cells: list[Cell], backend_name: str, results: str | Path,
              run_id: str) -> tuple[list[PairRow], float]:
    """The pair step: each of the run's re-measured cells whose kernel files changed, measured side
    by side with its previous version on the device, under its lock (none where pairs are off or
    no run is named); and the seconds the candidates' own measurements took this run."""
    policy = VerdictPolicy.from_config(config)
    if not (policy.paired and run_id):
        return [], 0.0
    chosen, connection = candidates(results, cells, run_id)
    own_s = sum(c.service_ms or 0.0 for c in chosen) / 1e3
    if not chosen:
        if connection is not None:
            connection.close()
        return [], own_s
    backend = get_backend(backend_name)
    profiler = WhyProfiler(backend_name)
    try:
        with tempfile.TemporaryDirectory(prefix="convlab-versions-") as scratch:
            restored: dict[str, KernelSpec] = {}
            if policy.why:
                profiler.ready()  # Nsight Compute starts while the pairs are measured
            with exclusive_device(backend.device_key()):
                backend.compile_ahead(previous_modules(chosen, connection, Path(scratch), restored))
                rows = [measured_pair(c, connection, Path(scratch), restored, policy, backend) for c in chosen]
            if policy.why:
                # after the rounds and outside the lock: the profiled process takes it
                versions = {c.cell.path: (pair_to_explain(c.cell, restored[c.previous_hash], get_kernel(c.cell.kernel),
                                                          registered_new=True))
                            for c in chosen if c.previous_hash in restored}
                rows, _ = with_why(rows, versions, profiler, policy.threshold)
    finally:
        profiler.close()
        connection.close()
    return rows, own_s


def refusal_kind(note: str) -> str:
    """A pair's refusal without its numbers, so that one line stands for every cell refused alike."""
    number = r"(?:[0-9a-f]{8,}|x?[0-9][0-9.]*%?)"
    return re.sub(rf"\({number}\)|\b{number}(?![\w.])", "…", note)
