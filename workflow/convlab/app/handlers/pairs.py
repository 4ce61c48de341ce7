"""`pair`: a run's re-measured cells whose kernel files changed, each measured side by side with
its previous kernel version on the device (in the device's worker, under its lock), into
verdicts/paired.csv for the record step."""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from convlab.backends import get_backend
from convlab.backends.base import Backend
from convlab.backends.devicelock import exclusive_device
from convlab.backends.sourcemodule import SourceModule, source_module
from convlab.console import Console
from convlab.history.kernelversions import VersionUnavailable
from convlab.history.noise import MIN_FLOOR
from convlab.history.pairfile import PairRow, write_pairs
from convlab.history.pairing import Candidate, candidates, restore_previous
from convlab.history.verdictrule import DEFAULT_THRESHOLD, LAUNCH_BOUND_MS, LAUNCH_BOUND_THRESHOLD
from convlab.plan.families import family
from convlab.plan.grid import build_cells
from convlab.plan.registry import KernelSpec, read_kernel_folder
from convlab.run.paired import PairRefused, Recorded, measure_pair

# The interval a pair aims for: a quarter of the threshold each side, so that a change just past
# the threshold is told apart from it.
PRECISION_SHARE = 0.25


def pair_settings(config: dict[str, Any]) -> tuple[bool, float, float, float]:
    """Whether pairs are measured, the threshold, the precision aimed for and the budget per cell."""
    verdicts = config.get("verdicts") or {}
    threshold = float(verdicts.get("threshold", MIN_FLOOR))
    return (bool(verdicts.get("paired", True)), threshold, threshold * PRECISION_SHARE,
            float(verdicts.get("pair_budget_s", 1.0)))


def previous_spec(candidate: Candidate, connection, scratch: Path, restored: dict[str, KernelSpec],
                  twins: bool = False) -> KernelSpec:
    """The candidate's previous version as a kernel, restored once per version (``twins``: a cpu
    twin's too)."""
    if candidate.previous_hash not in restored:
        folder, name = restore_previous(connection, candidate, scratch, twins)
        restored[candidate.previous_hash] = read_kernel_folder(folder)[name]
    return restored[candidate.previous_hash]


def drift_tolerance(candidate: Candidate, threshold: float) -> float:
    """How far two runs of one version may differ in time: the rule's common floor for the cell
    (wider for launch-bound times), at least the threshold."""
    launch_bound = (candidate.previous_ms or 0) < LAUNCH_BOUND_MS
    return max(threshold, LAUNCH_BOUND_THRESHOLD if launch_bound else DEFAULT_THRESHOLD)


def previous_modules(chosen: list[Candidate], connection, scratch: Path,
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


def measured_pair(candidate: Candidate, connection, scratch: Path, restored: dict[str, KernelSpec], precision: float,
                  budget_s: float, backend: Backend, threshold: float = MIN_FLOOR,
                  new_spec: KernelSpec | None = None) -> PairRow:
    """One candidate's pair, or its row with the reason it has none. ``new_spec``: a preview's copy
    of the new version's files, which has no row yet; both versions are then copies of their
    files, so a cpu twin's previous version is paired too."""
    cell = candidate.cell
    base = PairRow(cell.path, cell.kernel, candidate.previous_hash, candidate.kernel_hash)
    new_row = Recorded(candidate.new_module, candidate.new_ms) if new_spec is None else None
    recorded = (Recorded(candidate.previous_module, candidate.previous_ms), new_row)
    try:
        previous = previous_spec(candidate, connection, scratch, restored, twins=new_spec is not None)
        result = measure_pair(cell, cell.image or None, previous, precision, budget_s, backend, recorded,
                              drift_tolerance(candidate, threshold), same_code_is_same=True, new_spec=new_spec)
    except (VersionUnavailable, PairRefused) as why:
        return replace(base, note=" ".join(str(why).split()))
    return replace(base, ratio=result.ratio, low=result.low, high=result.high, rounds=result.rounds,
                   previous_ms=result.previous_ms, new_ms=result.new_ms, stop=result.stop,
                   clock_normalised="yes" if result.clock_normalised else "no",
                   neighbours=result.neighbours, neighbour_names=result.neighbour_names)


def pair(args: argparse.Namespace, console: Console) -> int:
    config = json.loads(args.config)
    paired, threshold, precision, budget_s = pair_settings(config)
    rows: list[PairRow] = []
    started = time.perf_counter()
    own_s = 0.0
    if paired and args.run_id:
        cells = build_cells(config, args.backend, args.device)
        chosen, connection = candidates(args.results, cells, args.run_id)
        own_s = sum(c.service_ms or 0.0 for c in chosen) / 1e3
        if chosen:
            backend = get_backend(args.backend)
            try:
                with tempfile.TemporaryDirectory(prefix="convlab-versions-") as scratch, \
                        exclusive_device(backend.device_key()):
                    restored: dict[str, KernelSpec] = {}
                    backend.compile_ahead(previous_modules(chosen, connection, Path(scratch), restored))
                    rows = [measured_pair(c, connection, Path(scratch), restored, precision, budget_s, backend,
                                          threshold) for c in chosen]
            finally:
                connection.close()
        elif connection is not None:
            connection.close()
    write_pairs(args.out, rows)
    measured = sum(row.measured for row in rows)
    if rows:
        console.say(f"paired: {measured} of {len(rows)} cells whose kernel files changed measured side by side with "
                    f"their previous version in {time.perf_counter() - started:.2f} s (their own measurements this "
                    f"run: {own_s:.2f} s)")
    else:
        console.say("paired: no re-measured cell's kernel files changed")
    for note, count in sorted(Counter(refusal_kind(row.note) for row in rows if row.note).items()):
        console.say(f"  not paired: {count} {'cell' if count == 1 else 'cells'}: {note} (each cell's reason: {args.out})")
    return 0


def refusal_kind(note: str) -> str:
    """A pair's refusal without its numbers, so that one line stands for every cell refused alike."""
    number = r"(?:[0-9a-f]{8,}|x?[0-9][0-9.]*%?)"
    return re.sub(rf"\({number}\)|\b{number}(?![\w.])", "…", note)
