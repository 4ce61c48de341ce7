"""`preview`: kernels' cells measured side by side with the version the results database recorded
last, recording nothing: what `convlab watch` runs on a save, in the device's worker (in its own
process with CONVLAB_SERVICE=off).

Each kernel's files are read once into a copy (a version of their own, named by their hash), which
is compiled (a cpu twin: its Python), then run once on each cell's problem and verified against
float64, then paired with the recorded version by the `pair` step's rounds, intervals and threshold
(convlab.app.handlers.pairs). The verdict lines are a run's (convlab.history.verdicts). The
database is read from a copy, and nothing is written under results/: the next `snakemake` run
measures these cells and records them as it always does.

It stops between cells once a previewed kernel's files change, or the watch that asked for it has
gone (exit status SUPERSEDED): the watch starts again from the new files.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

from convlab.app.handlers.pairs import measured_pair, pair_settings, previous_modules, refusal_kind
from convlab.backends import get_backend
from convlab.backends.base import Backend
from convlab.backends.compileblock import nvrtc_block, python_block
from convlab.backends.devicelock import exclusive_device
from convlab.backends.sourcemodule import grid_modules
from convlab.codeversion import file_contents, measurement_version
from convlab.console import Console
from convlab.history import store
from convlab.history.databasecopy import open_copy
from convlab.history.pairfile import PairRow
from convlab.history.pairing import Candidate
from convlab.history.previewplan import (
    Recorded,
    Saved,
    candidate_of,
    cell_name,
    differing,
    edited,
    narrowed,
    read_saved,
    recorded_versions,
)
from convlab.history.record import InputHashes, config_hash
from convlab.history.verdictrule import SLOWER
from convlab.history.verdicts import NEW, CellVerdict, judge, summary_lines
from convlab.paths import REPO_ROOT
from convlab.plan.cell import Cell
from convlab.plan.grid import build_cells
from convlab.plan.registry import KernelSpec, RegistryError, load_registry, shown
from convlab.run.preview import Check, check_version
from convlab.status import OK, UserError

SUPERSEDED = 3  # exit status: stopped for newer files (or a watch that left); the watch starts again
PREVIEW_RUN = "preview, nothing recorded"
NOTHING_WRITTEN = "nothing written; the next `snakemake --cores 1` measures and records these cells"
MAX_FAILURE_LINES = 6


class Superseded(Exception):
    """The files changed, or the watch left, while the preview measured."""


class Preview:
    """One preview's state: what it reads, where it copies, what it has found."""

    def __init__(self, args: argparse.Namespace, console: Console, scratch: Path) -> None:
        self.args, self.console, self.scratch = args, console, scratch
        self.config = json.loads(args.config)
        _, self.threshold, self.precision, self.budget_s = pair_settings(self.config)
        self.saved: dict[str, Saved] = {}
        self.failed = False  # a kernel that did not compile, or a cell that failed its check
        self.verdicts: list[CellVerdict] = []
        self.refused: list[PairRow] = []

    # -- stopping for newer files -------------------------------------------------------------
    def stop_if_superseded(self) -> None:
        """Superseded once a previewed kernel's files differ from what was read, or the watch left."""
        watcher = self.args.watcher
        if watcher and watcher != os.getpid():
            try:
                os.kill(watcher, 0)
            except ProcessLookupError:
                raise Superseded from None
            except PermissionError:
                pass
        for saved in self.saved.values():
            if file_contents([REPO_ROOT / path for path, _ in saved.contents], root=REPO_ROOT) != saved.contents:
                raise Superseded

    # -- the steps ----------------------------------------------------------------------------
    def compiled(self, backend: Backend, cells: list[Cell], candidates: list[Candidate], connection,
                 restored: dict[str, KernelSpec]) -> list[Cell]:
        """The cells whose kernel compiles. A cpu twin's Python is compiled here (a syntax error is
        its block); a .cu's modules, new and previous, in one compiler process, and a module that
        does not compile is its first cell's check's to show."""
        failing: set[str] = set()
        if self.args.backend == "cpu":
            for saved in self.saved.values():
                twin = next(((path, data) for path, data in saved.contents if path.endswith(".py")), None)
                if twin is None or twin[1] is None:
                    continue
                block = python_block(twin[1], twin[0])
                if block:
                    self.say_block(block)
                    failing.add(saved.kernel)
            return [c for c in cells if c.kernel not in failing]
        modules = grid_modules(cells, lambda kernel: self.saved[kernel].spec)
        for module, kernels in previous_modules(candidates, connection, self.scratch / "previous", restored).items():
            modules.setdefault(module, []).extend(kernels)
        backend.compile_ahead(modules)
        return cells

    def checked(self, backend: Backend, cells: list[Cell]) -> list[Cell]:
        """The cells whose saved version runs and verifies on their problem; each that does not is
        a line with its status (a compile error: its kernel's block, once), and has no verdict."""
        passed: list[Cell] = []
        broken: set[str] = set()
        failures: list[str] = []
        for cell in cells:
            if cell.kernel in broken:
                continue
            self.stop_if_superseded()
            saved = self.saved[cell.kernel]
            check = check_version(cell, cell.image or None, saved.spec, backend)
            if check is None:
                continue
            if check.status == OK:
                passed.append(cell)
                continue
            self.failed = True
            if check.stage == "compile":
                broken.add(cell.kernel)
                self.say_block(self.compile_block(saved, check))
                continue
            failures.append(self.failure_line(cell, saved, check))
        for line in failures[:MAX_FAILURE_LINES]:
            self.console.say(line)
        if len(failures) > MAX_FAILURE_LINES:
            self.console.say(f"  ... and {len(failures) - MAX_FAILURE_LINES} more cells that failed")
        return passed

    def compile_block(self, saved: Saved, check: Check) -> list[str]:
        source = next(((path, data) for path, data in saved.contents if path.endswith(".cu")), None)
        if source is None or source[1] is None:
            return [f"compile error: {saved.kernel}: {check.reason}"]
        return nvrtc_block(check.reason, source[0], source[1].decode(errors="replace"))

    def failure_line(self, cell: Cell, saved: Saved, check: Check) -> str:
        """A cell whose saved version failed: the cell, its status and why (and where in its files)."""
        where = ""
        if check.where is not None:
            copied, line = check.where
            real = next((path for path, _ in saved.contents if Path(path).suffix == copied.suffix), copied.name)
            where = f" ({real}:{line})"
        stage = f" in {check.stage}" if check.status != "wrong" and check.stage else ""
        return f"{check.status}{stage}: {cell_name(cell)}: {' '.join(check.reason.split())}{where}"

    def paired(self, backend: Backend, cells: list[Cell], recorded: dict[str, Recorded], connection,
               restored: dict[str, KernelSpec]) -> None:
        """Each cell paired with its recorded ok version (a cell without one is new), judged."""
        # what a row of this cell measured now would record, so that the verdict names what else changed
        now = {"code_version": measurement_version(self.args.backend),
               "gpu_uuid": backend.device_info().get("gpu_uuid") or ""}
        pictures = InputHashes()
        for cell in cells:
            saved, previous = self.saved[cell.kernel], recorded.get(cell.path, Recorded(None, None)).latest_ok
            new = {"cell": cell.path, "experiment": cell.experiment, "kernel": cell.kernel, "variant": cell.variant,
                   "status": OK, "kernel_hash": saved.kernel_hash, "config_hash": config_hash(cell),
                   "input_hash": pictures(cell), **now}
            if previous is None:
                self.verdicts.append(CellVerdict(cell.path, cell.experiment, cell.kernel, cell.variant, OK, None, None,
                                                 None, None, None, NEW, ()))
                continue
            if previous.kernel_hash == saved.kernel_hash:
                continue  # measured ok in these very files: nothing to tell them from
            self.stop_if_superseded()
            candidate = candidate_of(cell, saved, previous)
            pair = measured_pair(candidate, connection, self.scratch / "previous", restored, self.precision,
                                 self.budget_s, backend, self.threshold, new_spec=saved.spec)
            if not pair.measured:
                self.refused.append(pair)
                continue
            new_ms = pair.new_ms if pair.rounds else previous.kernel_ms
            self.verdicts.append(judge({**new, "kernel_ms": new_ms}, previous, pair=pair, threshold=self.threshold))

    # -- what it says -------------------------------------------------------------------------
    def say_block(self, lines: list[str]) -> None:
        self.failed = True
        for line in lines:
            self.console.say(line)

    def say_verdicts(self, device: str) -> None:
        if self.verdicts:
            lines = summary_lines(self.verdicts, device, PREVIEW_RUN, NOTHING_WRITTEN)
            for line in ["preview " + lines[0], *lines[1:]]:
                self.console.say(line)
        for note, count in sorted(Counter(refusal_kind(row.note) for row in self.refused).items()):
            self.console.say(f"  not paired: {count} {'cell' if count == 1 else 'cells'}: {note}")


def preview(args: argparse.Namespace, console: Console) -> int:
    if not args.kernels:
        return 0  # a watch's first request: its worker starts, and this module is loaded, before any save
    started = time.perf_counter()
    config = json.loads(args.config)
    try:
        registry = load_registry()
    except RegistryError as error:
        console.say(f"description error: {error}")
        return 1 if args.fail_on else 0
    cells = narrowed(build_cells(config, args.backend, args.device), args.kernels, args.sizes, args.strides)
    with tempfile.TemporaryDirectory(prefix="convlab-preview-") as scratch:
        run = Preview(args, console, Path(scratch))
        run.saved = {kernel: read_saved(registry[kernel], args.backend, Path(scratch)) for kernel in args.kernels or []}
        try:
            connection = open_copy(args.results, Path(scratch) / "database")
        except store.HistoryUnavailable:
            connection = None  # no run recorded yet: every cell is new
        try:
            return run_preview(run, cells, connection, started)
        except Superseded:
            console.say("preview: stopped: its files changed meanwhile (or the watch left)")
            return SUPERSEDED
        finally:
            if connection is not None:
                connection.close()


def run_preview(run: Preview, cells: list[Cell], connection, started: float) -> int:
    args, console = run.args, run.console
    cells = [c for c in cells if c.kernel in run.saved]
    if connection is None:
        console.say(f"preview: {shown(Path(args.results))} has no results database yet: no version is recorded to "
                    "pair with (a run that measures cells records them)")
    recorded = recorded_versions(connection, cells)
    if args.differing:
        wanted = differing(cells, run.saved, recorded)
        run.saved = {kernel: saved for kernel, saved in run.saved.items() if kernel in wanted}
        cells = [c for c in cells if c.kernel in wanted]
    todo = edited(cells, run.saved, recorded)
    if not todo:
        if connection is not None:
            which = f"{', '.join(sorted(run.saved))}: its files are" if run.saved else "every kernel's files are"
            console.say(f"preview: {which} as last recorded: nothing to preview")
        return 0
    kernels = sorted({c.kernel for c in todo})
    for kernel in kernels:
        if run.saved[kernel].spec is None:
            raise UserError(f"{kernel}: {run.saved[kernel].why_not}")
    console.say(f"preview of {', '.join(kernels)}: {len(todo)} {'cell' if len(todo) == 1 else 'cells'} of "
                f"{args.device}")
    backend = get_backend(args.backend)
    restored: dict[str, KernelSpec] = {}
    previous = {c.path: recorded[c.path].latest_ok for c in todo if c.path in recorded}
    candidates = [candidate_of(c, run.saved[c.kernel], previous[c.path]) for c in todo
                  if previous.get(c.path) is not None and previous[c.path].kernel_hash != run.saved[c.kernel].kernel_hash]
    with exclusive_device(backend.device_key()):
        todo = run.compiled(backend, todo, candidates, connection, restored)
        passed = run.checked(backend, todo)
        run.paired(backend, passed, recorded, connection, restored)
    run.say_verdicts(args.device)
    console.say(f"preview: {time.perf_counter() - started:.1f} s; nothing written under {shown(Path(args.results))}")
    slower = any(v.verdict == SLOWER for v in run.verdicts)
    return 1 if args.fail_on == "slower" and (slower or run.failed) else 0
