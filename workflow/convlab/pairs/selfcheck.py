"""The A/A self-check behind `check-verdicts`: a sample of the last run's ok cells, each measured
side by side with itself (a source kernel as a second module of its own files, as a pair's
previous version is; any other kernel as itself), by the pair step's rounds and intervals and the
threshold (convlab.history.verdictpolicy), on this machine now.

Every FASTER or SLOWER is a false call; the intervals' half-widths say the smallest change a pair
here would call. The host is quiet enough for `compare --fail-on slower` when no cell was falsely
called and no other process used the GPU.
"""

from __future__ import annotations

import csv
import io
import json
import math
import random
import sqlite3
import statistics
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from convlab.backends import get_backend
from convlab.backends.base import Backend
from convlab.backends.devicelock import exclusive_device
from convlab.codeversion import file_contents
from convlab.history import store
from convlab.history.kernelversions import copy_kernel_version
from convlab.history.record import RUN_CONFIG
from convlab.history.verdictpolicy import VerdictPolicy
from convlab.history.verdictrule import FASTER, SLOWER, Ratio, verdict_of_interval
from convlab.paths import REPO_ROOT
from convlab.plan.cell import Cell
from convlab.plan.config import validate_config
from convlab.plan.registry import KernelSpec, get_kernel, read_kernel_folder
from convlab.plan.runconfig import run_config
from convlab.run.paired import PairRefused, measure_pair

CELLS_SHOWN = 10  # false calls and cells not measured named in the lines; every cell is in --details


def measured_config(files: list[str], folder: Path) -> dict[str, Any]:
    """With ``files`` (--configfile), the config as `snakemake` reads it (config/config.yaml, each
    file on top); without, the config of the run that recorded last in ``folder``, else
    config/config.yaml."""
    recorded = folder / RUN_CONFIG
    if not files and recorded.is_file():
        try:
            return validate_config(json.loads(recorded.read_text()), source=str(recorded))
        except ValueError:
            pass  # damaged: the config on disk is the next best guess
    config, _ = run_config(files)
    return config


def last_run_ok_cells(connection: sqlite3.Connection) -> tuple[str, set[str]] | None:
    """The last recorded run's id and the paths of the cells it measured ok (None: no run yet)."""
    finished = store.runs(connection)
    if not finished:
        return None
    run_id = finished[-1][0]
    return run_id, {m.cell for m in store.measurements(connection, run_ids=[run_id], with_rows=False)
                    if m.status == "ok"}


def sample(cells: list[Cell], count: int, seed: int = 0) -> list[Cell]:
    """Up to ``count`` cells, spread over the kernels (round robin), the same ones for the same input."""
    by_kernel: dict[str, list[Cell]] = {}
    for cell in sorted(cells, key=lambda c: c.path):
        by_kernel.setdefault(cell.kernel, []).append(cell)
    rng = random.Random(seed)
    for group in by_kernel.values():
        rng.shuffle(group)
    chosen: list[Cell] = []
    while len(chosen) < count and any(by_kernel.values()):
        for kernel in sorted(by_kernel):
            if by_kernel[kernel] and len(chosen) < count:
                chosen.append(by_kernel[kernel].pop())
    return chosen


def itself(spec: KernelSpec, backend: str, scratch: Path) -> KernelSpec:
    """The kernel's second self: a source kernel's files as a kernel of their own (a module of its
    own, as a previous version is); any other kernel, itself."""
    if backend != "cuda" or spec.source is None or spec.library:
        return spec
    folder = scratch / spec.name
    name = copy_kernel_version(spec.name, "self", file_contents(spec.files(backend), root=REPO_ROOT), folder)
    return read_kernel_folder(folder)[name]


@dataclass(frozen=True)
class SelfCheckCell:
    """One cell measured side by side with itself: its verdict and interval, or why it was not
    measured (``note``)."""

    cell: Cell
    verdict: str = ""
    ratio: Ratio = Ratio()
    stop: str = ""
    sampling: str = ""
    previous_ms: float | None = None
    new_ms: float | None = None
    neighbours: str = ""
    note: str = ""

    def named(self) -> str:
        """The cell as a line names it: its kernel and its path under the device folder."""
        return f"{self.cell.kernel} {self.cell.path.split('/cells/', 1)[-1]}"

    def said(self) -> str:
        """What the check saw of it, in a line: the ratio, the interval, the rounds and the sampling."""
        if not self.ratio.bounded:
            return f"not measured: {self.note}"
        return (f"x{self.ratio.value:.3f} [{self.ratio.low:.3f}, {self.ratio.high:.3f}], {self.ratio.rounds} rounds, "
                f"sampled {self.sampling}")


DETAILS_COLUMNS = ("cell", "experiment", "kernel", "variant", "verdict", "ratio", "ratio_low", "ratio_high",
                   "paired_rounds", "stop", "sampling", "previous_ms", "new_ms", "neighbours", "note")


@dataclass
class SelfCheck:
    """What the cells measured side by side with themselves showed, cell by cell, and the device
    they ran on."""

    threshold: float
    backend: str = "cuda"
    cells: list[SelfCheckCell] = field(default_factory=list)
    device: str = ""

    @property
    def calls(self) -> Counter:
        return Counter(c.verdict for c in self.cells if c.verdict)

    @property
    def timed(self) -> int:
        return sum(self.calls.values())

    @property
    def false_calls(self) -> list[SelfCheckCell]:
        return [c for c in self.cells if c.verdict in (FASTER, SLOWER)]

    @property
    def refused(self) -> list[SelfCheckCell]:
        return [c for c in self.cells if not c.verdict]

    @property
    def neighbours(self) -> set[str]:
        return {name for c in self.cells for name in c.neighbours.split(";") if name}

    def lines(self, device_label: str, run_id: str) -> list[str]:
        """The check's figures: the calls, the intervals' half-widths, and each false call and each
        cell not measured by name (at most CELLS_SHOWN of each)."""
        timed, false_calls = self.timed, len(self.false_calls)
        lines = [f"self-check: {timed} cells of {device_label} (run {run_id}) measured side by side with themselves "
                 f"on {self.device}: " + ", ".join(f"{n} {w}" for w, n in self.calls.most_common())
                 + f"; false calls {false_calls} of {timed} ({false_calls / max(timed, 1):.0%})"]
        halves = [c.ratio.half_width for c in self.cells if c.ratio.bounded and c.ratio.half_width is not None]
        if halves:
            half = statistics.median(halves)
            smallest = (1 + self.threshold) * math.exp(half) - 1
            lines.append(f"  the interval's half-width: median ±{math.expm1(half):.2%}, widest "
                         f"±{math.expm1(max(halves)):.2%}: a change of {smallest:.1%} or more is called "
                         f"(threshold {self.threshold:.0%})")
        for label, listed in (("false call", self.false_calls), ("not measured", self.refused)):
            lines += [f"  {label}: {c.verdict + ' ' if c.verdict else ''}{c.named()}: "
                      f"{c.said().removeprefix('not measured: ')}" for c in listed[:CELLS_SHOWN]]
            if len(listed) > CELLS_SHOWN:
                lines.append(f"  ... and {len(listed) - CELLS_SHOWN} more {label}s (each in --details FILE)")
        return lines

    def too_noisy(self) -> list[str]:
        """Why the host is too noisy for the gate (none: quiet enough)."""
        reasons = []
        if self.false_calls:
            named = ", ".join(f"{c.named()} {c.verdict} x{c.ratio.value:.3f}" for c in self.false_calls[:CELLS_SHOWN])
            reasons.append(f"{len(self.false_calls)} unchanged cells were called FASTER or SLOWER ({named})")
        if self.neighbours:
            reasons.append(f"other processes used the GPU ({', '.join(sorted(self.neighbours))})")
        if not self.timed:
            reasons.append("no cell could be measured side by side with itself")
        return reasons

    def details(self) -> str:
        """Each cell's line of the --details CSV, as a run's verdict CSV gives them."""
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=DETAILS_COLUMNS, lineterminator="\n")
        writer.writeheader()
        for c in self.cells:
            values = {"cell": c.cell.path, "experiment": c.cell.experiment, "kernel": c.cell.kernel,
                      "variant": c.cell.variant, "verdict": c.verdict or "not measured", "ratio": c.ratio.value,
                      "ratio_low": c.ratio.low, "ratio_high": c.ratio.high, "paired_rounds": c.ratio.rounds,
                      "stop": c.stop, "sampling": c.sampling, "previous_ms": c.previous_ms, "new_ms": c.new_ms,
                      "neighbours": c.neighbours, "note": c.note}
            writer.writerow({name: "" if value is None else value for name, value in values.items()})
        return text.getvalue()


def measured_itself(cell: Cell, copy: KernelSpec, policy: VerdictPolicy, backend: Backend) -> SelfCheckCell:
    """One cell measured side by side with ``copy`` of its kernel, or why it could not be."""
    try:
        result = measure_pair(cell, cell.image or None, copy, policy.pair_precision, policy.pair_budget_s, backend)
    except PairRefused as why:
        return SelfCheckCell(cell, note=" ".join(str(why).split()))
    return SelfCheckCell(cell, verdict_of_interval(result.low, result.high, policy.threshold),
                         Ratio(result.ratio, result.low, result.high, result.rounds), result.stop, result.sampling,
                         result.previous_ms, result.new_ms, result.neighbour_names if result.neighbours else "")


def check_itself(chosen: list[Cell], config: dict[str, Any], backend_name: str) -> SelfCheck:
    """Each cell of ``chosen`` measured side by side with itself on the device, under its lock."""
    policy = VerdictPolicy.from_config(config)
    backend = get_backend(backend_name)
    check = SelfCheck(policy.threshold, backend_name)
    with tempfile.TemporaryDirectory(prefix="convlab-self-") as scratch, exclusive_device(backend.device_key()):
        copies: dict[str, KernelSpec] = {}
        for cell in chosen:
            if cell.kernel not in copies:
                copies[cell.kernel] = itself(get_kernel(cell.kernel), backend_name, Path(scratch))
            check.cells.append(measured_itself(cell, copies[cell.kernel], policy, backend))
    device = backend.device_info()
    check.device = device.get("gpu_uuid") or device["device"]
    return check
