"""One preview, from kernels' saved files to their verdict lines, recording nothing: what the
`preview` command (and so `convlab watch` on a save) runs, in the device's worker.

Each kernel's files are read once into a copy (a version of their own, named by their hash;
convlab.pairs.previewplan), which is compiled (a cpu twin: its Python), then run once on each
cell's problem and verified against float64 (convlab.run.preview), then paired with the version the
results database recorded last by the `pair` step's rounds and intervals and the threshold
(convlab.pairs.pairmeasure). The verdict lines are a run's (convlab.history.verdicts). The
database is read from a copy, and nothing is written under results/: the next `snakemake` run
measures these cells and records them as it always does.

It stops between cells (Superseded) once a previewed kernel's files change, or the watch that asked
for it has gone: the watch starts again from the new files.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convlab.atomicfile import write_text_atomically
from convlab.backends import get_backend
from convlab.backends.base import Backend
from convlab.backends.devicelock import exclusive_device
from convlab.codeversion import file_contents, measurement_version
from convlab.history import store
from convlab.history.databasecopy import open_copy
from convlab.history.pairfile import PairRow
from convlab.history.pairing import Candidate
from convlab.history.record import InputHashes, kept_spec_hash
from convlab.history.verdictpolicy import VerdictPolicy
from convlab.history.verdictrule import SLOWER
from convlab.history.verdicts import NEW, CellVerdict, csv_text, judge, summary_lines
from convlab.pairs.pairmeasure import measured_pair, previous_modules, refusal_kind
from convlab.pairs.previewplan import Recorded, candidate_of, differing, edited, read_saved, recorded_versions
from convlab.pairs.previewwhy import PendingWhy, begin_why, drop_pending, owns, why_profiler
from convlab.pairs.whyprofile import pair_to_explain, to_explain, with_why
from convlab.paths import REPO_ROOT
from convlab.plan.cell import Cell
from convlab.plan.registry import KernelSpec, shown
from convlab.run.preview import Saved, checked_cells, compile_saved, twin_syntax_errors
from convlab.run.whyreplay import PairToExplain
from convlab.status import OK, UserError

PREVIEW_RUN = "preview, nothing recorded"
NOTHING_WRITTEN = "nothing written; the next `snakemake --cores 1` measures and records these cells"


class Superseded(Exception):
    """The files changed, or the watch left, while the preview measured."""


@dataclass(frozen=True)
class PreviewRequest:
    """What one preview is asked: the validated config, the backend and device label, the device's
    results folder (its database is read from a copy), the kernels, whether only those whose files
    differ from their last recorded version, and the process id of the watch that asked (None:
    no watch)."""

    config: dict[str, Any]
    backend: str
    device: str
    results: Path
    kernels: list[str]
    differing: bool = False
    watcher: int | None = None
    details: Path | None = None  # where the verdicts per cell go, if anywhere (never under results/)
    # the why said after the verdicts, by a second request (convlab.pairs.previewwhy): a watch's
    why_after: bool = False


class Preview:
    """One preview's state: what it reads, where it copies, what it has found."""

    def __init__(self, request: PreviewRequest, say: Callable[[str], None], scratch: Path) -> None:
        self.request, self.say, self.scratch = request, say, scratch
        self.policy = VerdictPolicy.from_config(request.config)
        self.saved: dict[str, Saved] = {}
        self.failed = False  # a kernel that did not compile, or a cell that failed its check
        self.verdicts: list[CellVerdict] = []
        self.refused: list[PairRow] = []
        # measured pairs waiting for their verdict: the new row's fields, the previous measurement,
        # the pair, and its versions as a why's profile replays them
        self.pending: list[tuple[dict[str, Any], Any, PairRow, PairToExplain | None]] = []

    # -- stopping for newer files -------------------------------------------------------------
    def stop_if_superseded(self) -> None:
        """Superseded once a previewed kernel's files differ from what was read, or the watch left."""
        watcher = self.request.watcher
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
    def compiled(self, backend: Backend, cells: list[Cell], candidates: list[Candidate],
                 connection: sqlite3.Connection | None, restored: dict[str, KernelSpec]) -> list[Cell]:
        """The cells whose kernel compiles. A cpu twin's Python is compiled here (a syntax error is
        its block); a .cu's modules, new and previous, in one compiler process, and a module that
        does not compile is its first cell's check's to show."""
        if self.request.backend == "cpu":
            failing = twin_syntax_errors(self.saved.values())
            # kernels that share a twin's file share its error: said once
            for block in dict.fromkeys(tuple(block) for block in failing.values()):
                self.say_block(list(block))
            return [c for c in cells if c.kernel not in failing]
        compile_saved(backend, cells, self.saved,
                      previous_modules(candidates, connection, self.scratch / "previous", restored))
        return cells

    def checked(self, backend: Backend, cells: list[Cell]) -> list[Cell]:
        """The cells whose saved version runs and verifies on their problem; each that does not is
        a line with its status, and has no verdict."""
        passed, failed = checked_cells(backend, cells, self.saved, self.say, self.stop_if_superseded)
        self.failed = self.failed or failed
        return passed

    def paired(self, backend: Backend, cells: list[Cell], recorded: dict[str, Recorded],
               connection: sqlite3.Connection | None, restored: dict[str, KernelSpec]) -> None:
        """Each cell paired with its recorded ok version (a cell without one is new), judged."""
        # what a row of this cell measured now would record, so that the verdict names what else changed
        now = {"code_version": measurement_version(self.request.backend),
               "gpu_uuid": backend.device_info().get("gpu_uuid") or ""}
        pictures = InputHashes()
        for cell in cells:
            saved, previous = self.saved[cell.kernel], recorded.get(cell.path, Recorded(None, None)).latest_ok
            new = {"cell": cell.path, "experiment": cell.experiment, "kernel": cell.kernel, "variant": cell.variant,
                   "status": OK, "kernel_hash": saved.kernel_hash, "spec_hash": kept_spec_hash(cell),
                   "input_hash": pictures(cell), **now}
            if previous is None:
                self.verdicts.append(CellVerdict(cell.path, cell.experiment, cell.kernel, cell.variant, OK, None, None,
                                                 None, None, NEW, ()))
                continue
            if previous.kernel_hash == saved.kernel_hash:
                continue  # measured ok in these very files: nothing to tell them from
            self.stop_if_superseded()
            candidate = candidate_of(cell, saved, previous)
            pair = measured_pair(candidate, connection, self.scratch / "previous", restored, self.policy, backend,
                                 new_spec=saved.spec)
            if not pair.measured:
                self.refused.append(pair)
                continue
            versions = (pair_to_explain(cell, restored[candidate.previous_hash], saved.spec, registered_new=False)
                        if candidate.previous_hash in restored and saved.spec is not None else None)
            self.pending.append(({**new, "kernel_ms": pair.new_ms if pair.ratio.rounds else previous.kernel_ms},
                                 previous, pair, versions))

    def judged(self) -> None:
        """The measured pairs' verdicts, each FASTER or SLOWER one with its why where the config asks
        (profiled after the pairs, outside the device's lock: the profiled process takes it)."""
        pairs = [pair for _, _, pair, _ in self.pending]
        profiling = None
        if self.policy.why:
            versions = {pair.cell: versions for _, _, pair, versions in self.pending if versions is not None}
            profiler = why_profiler(self.request.backend)
            if self.request.why_after:  # begun now, read after the verdicts are said
                chosen = to_explain(pairs, versions, self.policy.threshold)
                profiling = (profiler.begin([versions[row.cell] for row in chosen]), chosen)
            else:
                pairs, _ = with_why(pairs, versions, profiler, self.policy.threshold)
                profiler.ready()  # for the next save
        judged = [(new, previous, pair) for (new, previous, _, _), pair in zip(self.pending, pairs)]
        self.verdicts += [judge(new, previous, pair=pair, threshold=self.policy.threshold)
                          for new, previous, pair in judged]
        if profiling is not None:
            begin_why(PendingWhy(self.request.backend, profiling[0], profiling[1], judged, self.verdicts,
                                 self.policy.threshold, self.scratch, self.request.details))
        self.pending = []

    # -- what it says -------------------------------------------------------------------------
    def say_block(self, lines: list[str]) -> None:
        self.failed = True
        for line in lines:
            self.say(line)

    def say_verdicts(self) -> None:
        if self.verdicts:
            details = NOTHING_WRITTEN
            if self.request.details:
                write_text_atomically(self.request.details, csv_text(self.verdicts))
                details = f"{self.request.details} (the verdict per cell); {NOTHING_WRITTEN}"
            lines = summary_lines(self.verdicts, self.request.device, PREVIEW_RUN, details)
            for line in ["preview " + lines[0], *lines[1:]]:
                self.say(line)
        for note, count in sorted(Counter(refusal_kind(row.note) for row in self.refused).items()):
            self.say(f"  not paired: {count} {'cell' if count == 1 else 'cells'}: {note}")


def preview_kernels(request: PreviewRequest, registry: dict[str, KernelSpec], cells: list[Cell],
                    say: Callable[[str], None], started: float) -> bool:
    """One preview of ``request.kernels`` on ``cells`` (the grid's, narrowed), its lines said as
    they come. True where a cell is SLOWER, or a kernel did not compile or a cell not verify (what
    `--fail-on slower` fails on). Superseded where newer files (or a watch that left) stopped it;
    ``started``: the time.perf_counter() the preview's figure of seconds counts from."""
    drop_pending()  # a why its watch never collected: it would hold the device meanwhile
    scratch = tempfile.mkdtemp(prefix="convlab-preview-")
    try:
        run = Preview(request, say, Path(scratch))
        if run.policy.why:
            # Nsight Compute and the replay start now, unless they wait already (from the watch's warm-up
            # or the last save): while the cells compile and pair
            why_profiler(request.backend).ready()
        run.saved = {kernel: read_saved(registry[kernel], request.backend, Path(scratch)) for kernel in request.kernels}
        try:
            connection = open_copy(request.results, Path(scratch) / "database")
        except store.HistoryUnavailable:
            connection = None  # no run recorded yet: every cell is new
        try:
            return run_preview(run, cells, connection, started)
        finally:
            if connection is not None:
                connection.close()
    finally:
        if not owns(Path(scratch)):  # else the why's replay reads its copies: removed once collected
            shutil.rmtree(scratch, ignore_errors=True)


def run_preview(run: Preview, cells: list[Cell], connection: sqlite3.Connection | None, started: float) -> bool:
    """The preview's steps: the cells whose files differ from their recorded version compiled,
    checked, paired and judged. What preview_kernels() returns."""
    request, say = run.request, run.say
    cells = [c for c in cells if c.kernel in run.saved]
    if connection is None:
        say(f"preview: {shown(request.results)} has no results database yet: no version is recorded to "
            "pair with (a run that measures cells records them)")
    recorded = recorded_versions(connection, cells)
    if request.differing and connection is not None and not any(c.path in recorded for c in cells):
        say(f"preview: no cell of this grid is recorded in {shown(request.results)} yet, so no edit to compare: "
            "a run of this grid records them (snakemake --cores 1, with the same --configfile)")
        return False
    if request.differing:
        wanted = differing(cells, run.saved, recorded)
        run.saved = {kernel: saved for kernel, saved in run.saved.items() if kernel in wanted}
        cells = [c for c in cells if c.kernel in wanted]
    todo = edited(cells, run.saved, recorded)
    if not todo:
        if connection is not None:
            which = f"{', '.join(sorted(run.saved))}: its files are" if run.saved else "every kernel's files are"
            say(f"preview: {which} as last recorded: nothing to preview")
        return False
    kernels = sorted({c.kernel for c in todo})
    for kernel in kernels:
        if run.saved[kernel].spec is None:
            raise UserError(f"{kernel}: {run.saved[kernel].why_not}")
    missing = sorted({c.image for c in todo if c.image and not Path(c.image).is_file()})
    if missing:
        raise UserError(f"{missing[0]} does not exist yet{f' (nor {len(missing) - 1} more)' if len(missing) > 1 else ''}: "
                        f"make the grid's pictures with `snakemake --cores 1 {' '.join(missing)}` (with the same "
                        "--configfile), or run the grid once")
    say(f"preview of {', '.join(kernels)}: {len(todo)} {'cell' if len(todo) == 1 else 'cells'} of {request.device}")
    backend = get_backend(request.backend)
    restored: dict[str, KernelSpec] = {}
    previous = {c.path: recorded[c.path].latest_ok for c in todo if c.path in recorded}
    candidates = [candidate_of(c, run.saved[c.kernel], previous[c.path]) for c in todo if previous.get(c.path)
                  is not None and previous[c.path].kernel_hash != run.saved[c.kernel].kernel_hash]
    with exclusive_device(backend.device_key()):
        todo = run.compiled(backend, todo, candidates, connection, restored)
        passed = run.checked(backend, todo)
        run.paired(backend, passed, recorded, connection, restored)
    run.judged()
    run.say_verdicts()
    say(f"preview: {time.perf_counter() - started:.1f} s; nothing written under {shown(request.results)}")
    return run.failed or any(v.verdict == SLOWER for v in run.verdicts)
