"""Hardware counters of cells, read by Nsight Compute from a replayed launch of each
(convlab.run.counterreplay): the profiled processes, their reports parsed
(convlab.measure.ncureport), and the table of each cell's counters, kept by its row's check.

Nsight Compute has to start the process it profiles: one profiled process reads the one-pass
metrics of all the cells that need them, and a second one the stall counters of the cells the
findings speak for, or of every one (config `counter_stalls`). A cell whose row is unchanged since
its counters were read keeps them (results/<device>/counters/kept.csv, keyed by the row's check).
A cell that gets none says why in `counters_reason`.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from convlab.atomicfile import write_text_atomically
from convlab.measure.ncureport import (
    COLUMNS,
    METRICS,
    STALL_METRICS,
    ProfiledKernel,
    ReportError,
    by_cell,
    cell_counters,
    cell_stalls,
    parse_raw_csv,
    speaking_cells,
)
from convlab.paths import REPO_ROOT
from convlab.plan.cell import Cell
from convlab.plan.families import problem_key

KEPT = "counters/kept.csv"
IDENTITY = ("cell", "row_check", "experiment", "kernel", "variant", "size", "stride")
TABLE_COLUMNS = (*IDENTITY, *COLUMNS)
NCU_ENV = "CONVLAB_NCU"  # the ncu to run (default: the one on PATH)
PERMISSION = "ERR_NVGPUCTRPERM"


def read_table(path: Path) -> dict[str, dict[str, str]]:
    if not path.is_file():
        return {}
    with open(path, newline="") as handle:
        return {row["row_check"]: row for row in csv.DictReader(handle) if row.get("row_check")}


def write_table(path: Path, rows: list[dict[str, object]]) -> None:
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=TABLE_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows({name: "" if row.get(name) is None else row.get(name) for name in TABLE_COLUMNS} for row in rows)
    write_text_atomically(path, text.getvalue())


def ncu_command() -> str | None:
    return os.environ.get(NCU_ENV) or shutil.which("ncu")


@dataclass
class Profiled:
    """The kernels Nsight Compute's report holds (none where ``reason`` says why), and what it
    said of its work."""

    launches: list[ProfiledKernel] = field(default_factory=list)  # in launch order
    reason: str = ""
    kernels: int = 0
    passes: tuple[int, ...] = ()
    stall_cells: int = 0  # the cells whose stall counters a second profile read
    stall_reason: str = ""  # why that profile gave none
    seconds: float = 0.0  # the profiled process and the report's printing
    stall_seconds: float = 0.0  # the same of the stall counters' profile


@dataclass
class ProfiledProcess:
    """A process started under Nsight Compute (start_profiled), whose report finish_profiled reads."""

    process: subprocess.Popen
    log: Path  # Nsight Compute's own output: its notes, then the report's raw page
    metrics: tuple[str, ...]
    ncu: str
    started: float

    def running(self) -> bool:
        return self.process.poll() is None


def start_profiled(argv: list[str], scratch: Path, metrics: tuple[str, ...],
                   replay: str = "application") -> ProfiledProcess | Profiled:
    """``argv`` started under Nsight Compute (collecting ``metrics`` from its profiler start to
    stop, with NVTX ranges), which prints the kernels it profiled as a raw CSV page of those metrics
    into its log when the process ends; or the Profiled that says why it could not start. The
    process may start before it knows its work (a standby: convlab.pairs.whyprofile), as Nsight
    Compute's start costs seconds whatever it reads.

    Application replay (the default): ``argv`` runs once per pass the metrics need, and nothing is
    saved or restored around a kernel, so the replay may keep what its cells share (docs/counters.md
    says what that saves). The replayed process must launch the same kernels in every pass, as the
    counters' replay does (convlab.run.counterreplay). ``replay="kernel"``: the process runs once
    and each kernel is replayed in place, its memory restored before each pass (a pair's two
    launches: convlab.pairs.whyprofile).

    The clocks stay as the driver sets them (--clock-control none), as in the timed launches: the
    bytes do not depend on them, and the percentages are then of the peaks at the clocks the kernel
    ran at. Only the metrics named are collected: Nsight Compute otherwise adds the avg, min and max
    of each sum. The page is printed by the profiling Nsight Compute itself: a second one to print a
    saved report would cost its own start."""
    started = time.perf_counter()
    ncu = ncu_command()
    if ncu is None:
        return Profiled(reason="Nsight Compute (ncu) is not on PATH (it comes with the CUDA toolkit; or set "
                               "CONVLAB_NCU)")
    log = scratch / "ncu.log"
    log.unlink(missing_ok=True)
    # the profiled process runs this checkout's package, whatever the job's PYTHONPATH
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT / "workflow"),
                                                                     os.environ.get("PYTHONPATH")])))
    try:
        process = subprocess.Popen([ncu, "--replay-mode", replay, "--profile-from-start", "off", "--nvtx",
                                    "--clock-control", "none", "--disable-extra-suffixes", "--metrics",
                                    ",".join(metrics), "--csv", "--page", "raw", "--print-units", "base",
                                    "--log-file", str(log), *argv],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, env=env)
    except OSError as error:
        return Profiled(reason=f"Nsight Compute ({ncu}) could not be started: {error}")
    return ProfiledProcess(process, log, metrics, ncu, started)


def finish_profiled(profiled: ProfiledProcess) -> Profiled:
    """The kernels of a profiled process's report, once it has ended (or why there are none)."""
    printed, _ = profiled.process.communicate()
    said = (profiled.log.read_text(errors="replace") if profiled.log.is_file() else "") + (printed or "")
    if PERMISSION in said:
        return Profiled(reason=f"no permission to read GPU counters ({PERMISSION}): the driver lets only admins "
                               "profile (docs/counters.md)")
    if profiled.process.returncode != 0:
        return Profiled(reason=f"Nsight Compute failed (exit {profiled.process.returncode}): {_last_error(said)}")
    try:
        launches = parse_raw_csv(said, profiled.metrics)
    except ReportError as error:
        return Profiled(reason=f"Nsight Compute's report could not be read: {error}")
    # one line per profiled kernel and pass
    passes = (round(said.count("==PROF== Profiling") / len(launches)),) if launches else ()
    return Profiled(launches, "", len(launches), passes, seconds=time.perf_counter() - profiled.started)


def run_profiled(argv: list[str], scratch: Path, metrics: tuple[str, ...], replay: str = "application") -> Profiled:
    """``argv`` run under Nsight Compute, and the kernels of its report (start_profiled says how)."""
    started = start_profiled(argv, scratch, metrics, replay)
    return started if isinstance(started, Profiled) else finish_profiled(started)


def profile(plan: list[tuple[Cell, dict[str, str]]], scratch: Path, metrics: tuple[str, ...] = METRICS,
            ) -> tuple[dict[int, dict[str, object]], Profiled]:
    """Each planned cell's counters by its index (none where the profile says why): the columns of
    METRICS, or of STALL_METRICS (only the stall columns, and none for a cell without them). The
    replay runs each cell with the engine its row names (convlab.run.counterreplay.as_timed)."""
    plan_file, reasons_file = scratch / "plan.json", scratch / "reasons.json"
    plan_file.write_text(json.dumps([{"spec": cell.to_json(), "image": cell.image, "engine": row.get("engine") or ""}
                                     for cell, row in plan]))
    reasons_file.unlink(missing_ok=True)
    profiled = run_profiled([sys.executable, "-m", "convlab", "counters-replay", "--plan", str(plan_file),
                             "--reasons", str(reasons_file)], scratch, metrics)
    if profiled.reason:
        return {}, profiled
    cells = by_cell(profiled.launches)
    failed = {int(k): v for k, v in json.loads(reasons_file.read_text()).items()} if reasons_file.is_file() else {}
    if metrics == STALL_METRICS:
        return {index: cell_stalls(cells.get(index, [])) for index in range(len(plan)) if index not in failed}, profiled
    return {index: ({"counters_reason": failed[index]} if index in failed else cell_counters(cells.get(index, [])))
            for index in range(len(plan))}, profiled


def profile_cells(needed: list[tuple[Cell, dict[str, str]]], scratch: Path, every_stall: bool = False,
                  ) -> tuple[dict[int, dict[str, object]], Profiled]:
    """The counters of each needed cell, by its position: the one-pass metrics of every one, then
    the stall counters of those the findings speak for, or of every one (a second profile; its
    failure leaves them without a top stall, and its reason in the step's log)."""
    measured, profiled = profile(needed, scratch)
    with_counters = [i for i in range(len(needed)) if not measured.get(i, {}).get("counters_reason", "?")]
    speaking = with_counters if every_stall else [
        with_counters[i] for i in speaking_cells([needed[i][1] for i in with_counters], problem_key)]
    if speaking:
        stalls, stalled = profile([needed[i] for i in speaking], scratch, STALL_METRICS)
        for position, index in enumerate(speaking):
            measured[index].update(stalls.get(position, {}))
        profiled.kernels += stalled.kernels
        profiled.passes = tuple(sorted({*profiled.passes, *stalled.passes}))
        profiled.stall_reason = stalled.reason
        profiled.stall_cells = len(speaking)
        profiled.stall_seconds = stalled.seconds
    return measured, profiled


def _last_error(text: str) -> str:
    errors = [line.strip() for line in text.splitlines() if "ERROR" in line or "error" in line]
    return (errors[-1] if errors else (text.strip().splitlines() or ["no output"])[-1])[:300]


def read_counters(ok: list[tuple[Cell, dict[str, str]]], results: Path, out: Path, backend: str,
                  every_stall: bool) -> tuple[list[dict[str, object]], int, Profiled]:
    """The counters of each ok cell (a row of TABLE_COLUMNS each, written to ``out``): kept where
    its row is unchanged since they were read (results/<device>/counters/kept.csv), read now by
    Nsight Compute otherwise. With how many were read now, and what the profile said."""
    kept = read_table(results / KEPT)
    # a kept cell without its stall counters is read again where every cell is to have them
    needed = [(cell, row) for cell, row in ok if row["row_check"] not in kept
              or (every_stall and not kept[row["row_check"]].get("top_stall"))]
    measured: dict[int, dict[str, object]] = {}
    profiled = Profiled()
    if needed and backend == "cpu":
        profiled = Profiled(reason="no hardware counters on the cpu backend")
    elif needed:
        with tempfile.TemporaryDirectory(prefix="convlab-counters-") as scratch:
            measured, profiled = profile_cells(needed, Path(scratch), every_stall)
    reason = profiled.reason
    for index, (cell, row) in enumerate(needed):
        identity = {name: row.get(name, "") for name in IDENTITY if name != "cell"}
        kept[row["row_check"]] = {"cell": cell.path, **identity, **measured.get(index, {"counters_reason": reason})}
    current = {row["row_check"] for _, row in ok}
    table = [kept[row["row_check"]] for _, row in ok]
    # kept: this grid's cells as measured now, and other grids' kept entries (a later run may need them)
    write_table(results / KEPT, [entry for check, entry in kept.items()
                                 if check in current or not entry.get("counters_reason")])
    write_table(out, table)
    return table, len(needed), profiled
