"""The pipeline benchmark's figures: where the wall time of a full Snakemake run goes, read off the
cell rows it wrote and the timed runs (the real DAG, its no-op, and a bare Snakemake of as many
trivial jobs), the targets each met or not, and the printed table. Standard library only.

A cell row gives its job's wall time (``job_ms``: from the client process's start to the row's
times being taken), the service's time on it (``service_ms``), when its measurement finished
(``finished_at``) and its phases (``phase_ms``). Between two cell jobs is Snakemake's gap: the
previous job writing its row and exiting, Snakemake noticing and starting the next job's shell,
up to the next Python process's start.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convlab.measure.row import COLUMNS, DamagedRow, OtherFormat, finite_number, read_row_file

# A cell job's phases, in the order they happen (convlab.run.celljob and the cell's own steps);
# any other name a row carries (``imports``, in the job's own process) is listed after them.
PHASES = ("startup", "connect", "queue", "load", "lock_wait", "place", "setup", "launch", "timing", "e2e",
          "verify", "settle")
PHASE_LABELS = {"startup": "client start-up", "timing": "timing (the GPU work)", "e2e": "e2e (round trip)",
                "lock_wait": "lock wait"}
# The phases the service's time on a cell (``service_ms``) holds: from the worker taking it to its row.
# What is left of service_ms after them is in no phase (building the row, observers' last readings).
SERVICE_PHASES = PHASES[PHASES.index("load"):]
# The targets, the rebuild's speed goals, each read off this one run: the whole run against its GPU
# work; the stages before and after the cells; the cell stage against the service's time on the
# cells, and that against the timing; Snakemake's gap per cell against a bare Snakemake's cost per
# job; the client's start and the float64 check per cell; the no-op run.
WALL_PER_TIMING = 2.5
BEFORE_CELLS_S = 10.0
CELL_STAGE_PER_SERVICE = 1.15
SERVICE_PER_TIMING = 1.8
GAP_PER_BARE_JOB = 1.5
CLIENT_START_MS = 8.0
VERIFY_MS = 2.0
AFTER_CELLS_S = 8.0
NOOP_OVER_BARE_S = 1.0

@dataclass(frozen=True)
class CellTimes:
    """One cell job's times: its process's start and end (epoch seconds) and its row's figures;
    ``written``: its row file's time, where known."""

    path: str
    start: float
    end: float
    job_ms: float
    service_ms: float | None
    phases: Mapping[str, float]
    written: float | None = None


@dataclass(frozen=True)
class TimedRun:
    """One `snakemake` process: when it started and ended (epoch seconds)."""

    started: float
    finished: float

    @property
    def wall_s(self) -> float:
        return self.finished - self.started


@dataclass(frozen=True)
class Runs:
    """The four timed runs. ``jobs``: the real DAG's job count, which the bare run repeats;
    ``stamps``: the bare jobs' start times (epoch seconds); ``noop_idle``: the real no-op run found
    nothing to do, as it should."""

    real: TimedRun
    noop: TimedRun
    bare: TimedRun
    bare_noop: TimedRun
    jobs: int
    stamps: Sequence[float]
    noop_idle: bool = True


@dataclass(frozen=True)
class Target:
    """One target: the figure it reads, its limit and whether the figure is within it."""

    text: str
    value: float | None
    limit: float
    unit: str  # "ms", "s" or "×"
    reads: str  # what the value is

    @property
    def met(self) -> bool | None:
        return None if self.value is None else self.value <= self.limit


def parse_phases(text: str) -> dict[str, float]:
    """'startup=41.2;connect=0.4' -> {'startup': 41.2, 'connect': 0.4}; a name given twice adds up."""
    phases: dict[str, float] = {}
    for part in filter(None, (text or "").split(";")):
        name, _, value = part.partition("=")
        try:
            phases[name.strip()] = phases.get(name.strip(), 0.0) + float(value)
        except ValueError:
            continue
    return phases


def epoch(iso: str) -> float:
    return dt.datetime.fromisoformat(iso).timestamp()


def cell_times(row: Mapping[str, str], path: str = "", written: float | None = None) -> CellTimes | None:
    """The job's times of one row (text values, as read), or None for a row without them (one its
    client wrote itself when the service went away has no ``finished_at``). ``written``: the row
    file's modification time."""
    job_ms = finite_number(row.get("job_ms"))
    if job_ms is None or not row.get("finished_at"):
        return None
    phases = parse_phases(row.get("phase_ms") or "")
    # finished_at is stamped as the measurement returns; the job's clock stops after the settle
    # phase that follows (convlab.run.celljob.measure_job), so that is where job_ms ends.
    end = epoch(row["finished_at"]) + phases.get("settle", 0.0) / 1e3
    return CellTimes(path, end - job_ms / 1e3, end, job_ms, finite_number(row.get("service_ms")), phases, written)


def read_cells(results: Path) -> tuple[list[CellTimes], list[str]]:
    """Every cell row under ``results`` (results/<device>/cells/**/*.csv) with its times, and the
    rows that have none or are not whole rows (named, not read)."""
    cells, skipped = [], []
    for path in sorted(results.glob("*/cells/**/*.csv")):
        try:
            row = dict(zip(COLUMNS, read_row_file(path)))
        except (DamagedRow, OtherFormat):
            skipped.append(str(path))
            continue
        times = cell_times(row, str(path.relative_to(results)), path.stat().st_mtime)
        if times is None:
            skipped.append(str(path))
        else:
            cells.append(times)
    return cells, skipped


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def p90(values: Sequence[float]) -> float | None:
    if len(values) < 2:
        return values[0] if values else None
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


def gaps_ms(cells: Sequence[CellTimes]) -> list[float]:
    """Snakemake's gap before each cell job but the first, in start order: its start less the
    previous one's end. Empty where two cell jobs ran at once (with more than one core): the time
    between one's end and the next one's start is then no gap of Snakemake's between them."""
    ordered = sorted(cells, key=lambda cell: cell.start)
    gaps = [(later.start - earlier.end) * 1e3 for earlier, later in zip(ordered, ordered[1:])]
    return [] if any(gap < 0 for gap in gaps) else gaps


def overheads_ms(cells: Sequence[CellTimes]) -> list[float]:
    """Per cell job but the first: its time outside `timing` and `e2e`, plus the gap before it. A
    cell refused before it ran has neither phase: all of its time is overhead. Empty where there
    are no gaps (cell jobs ran at once)."""
    ordered = sorted(cells, key=lambda cell: cell.start)
    gaps = gaps_ms(ordered)
    return [later.job_ms - later.phases.get("timing", 0.0) - later.phases.get("e2e", 0.0) + gap
            for later, gap in zip(ordered[1:], gaps)]


def unphased_ms(cells: Sequence[CellTimes]) -> list[float]:
    """Per cell with a service time: the part of it in none of the service's phases."""
    return [cell.service_ms - sum(ms for name, ms in cell.phases.items() if name in SERVICE_PHASES)
            for cell in cells if cell.service_ms is not None]


def per_job_ms(stamps: Iterable[float]) -> float | None:
    """A bare Snakemake's cost per job: the median difference between consecutive job starts."""
    ordered = sorted(stamps)
    return median([(b - a) * 1e3 for a, b in zip(ordered, ordered[1:])])


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def phase_names(cells: Iterable[CellTimes]) -> list[str]:
    seen = {name: None for cell in cells for name in cell.phases}
    return [name for name in PHASES if name in seen] + [name for name in seen if name not in PHASES]


def pipeline_figures(cells: Sequence[CellTimes], runs: Runs) -> dict[str, Any]:
    """Every figure of the benchmark (ms for per-cell figures, seconds for whole runs; None where
    the rows cannot give it, e.g. ``service_ms`` with the service off)."""
    gaps = gaps_ms(cells)
    side_by_side = len(cells) > 1 and not gaps
    bare_per_job = per_job_ms(runs.stamps)
    timings = [cell.phases.get("timing", 0.0) for cell in cells]
    services = [cell.service_ms for cell in cells if cell.service_ms is not None]
    unphased = unphased_ms(cells)
    first = min((cell.start for cell in cells), default=None)
    last = max((cell.end for cell in cells), default=None)
    cell_stage = last - first if cells else None
    timing_sum = sum(timings) / 1e3
    service_sum = sum(services) / 1e3 if services else None
    return {
        "cells": len(cells), "jobs": runs.jobs, "bare_stamps": len(runs.stamps), "noop_idle": runs.noop_idle,
        "cells_side_by_side": side_by_side,
        "gap_median_ms": median(gaps), "gap_p90_ms": p90(gaps), "bare_per_job_ms": bare_per_job,
        "gap_per_bare_job": _ratio(median(gaps), bare_per_job),
        "phase_median_ms": {name: median([cell.phases[name] for cell in cells if name in cell.phases])
                            for name in phase_names(cells)},
        "phase_sum_s": {name: sum(cell.phases.get(name, 0.0) for cell in cells) / 1e3 for name in phase_names(cells)},
        "unphased_median_ms": median(unphased),
        "unphased_sum_s": sum(unphased) / 1e3 if unphased else None,
        "job_median_ms": median([cell.job_ms for cell in cells]), "service_median_ms": median(services),
        # job_ms stops before the row is written: the write lands in the gap that follows
        "row_written_median_ms": median([(cell.written - cell.end) * 1e3 for cell in cells
                                         if cell.written is not None]),
        "overhead_median_ms": median(overheads_ms(cells)),
        "timing_sum_s": timing_sum, "service_sum_s": service_sum,
        "wall_s": runs.real.wall_s, "wall_per_timing": _ratio(runs.real.wall_s, timing_sum),
        "before_cells_s": first - runs.real.started if cells else None,
        "cell_stage_s": cell_stage,
        "after_cells_s": runs.real.finished - last if cells else None,
        "cell_stage_per_service": _ratio(cell_stage, service_sum),
        "service_per_timing": _ratio(service_sum, timing_sum),
        "noop_s": runs.noop.wall_s, "bare_wall_s": runs.bare.wall_s, "bare_noop_s": runs.bare_noop.wall_s,
        "noop_over_bare_s": runs.noop.wall_s - runs.bare_noop.wall_s,
        "wall_per_bare_wall": _ratio(runs.real.wall_s, runs.bare.wall_s),
    }


def targets(figures: Mapping[str, Any]) -> list[Target]:
    phase = figures["phase_median_ms"]
    return [
        Target(f"whole run ≤ {WALL_PER_TIMING:g} × Σ timing", figures["wall_per_timing"], WALL_PER_TIMING, "×",
               "wall / Σ timing"),
        Target(f"before the first cell ≤ {BEFORE_CELLS_S:g} s", figures["before_cells_s"], BEFORE_CELLS_S, "s",
               "data, device figures"),
        Target(f"cell stage ≤ {CELL_STAGE_PER_SERVICE:g} × Σ service_ms", figures["cell_stage_per_service"],
               CELL_STAGE_PER_SERVICE, "×", "cell stage / Σ service_ms"),
        Target(f"Σ service_ms ≤ {SERVICE_PER_TIMING:g} × Σ timing", figures["service_per_timing"], SERVICE_PER_TIMING,
               "×", "Σ service_ms / Σ timing"),
        Target(f"Snakemake gap per cell ≤ {GAP_PER_BARE_JOB:g} × bare Snakemake per job",
               figures["gap_per_bare_job"], GAP_PER_BARE_JOB, "×", "gap / bare per job"),
        Target(f"client start-up ≤ {CLIENT_START_MS:g} ms", phase.get("startup"), CLIENT_START_MS, "ms", "median"),
        Target(f"verify ≤ {VERIFY_MS:g} ms", phase.get("verify"), VERIFY_MS, "ms", "median"),
        Target(f"after the last cell ≤ {AFTER_CELLS_S:g} s", figures["after_cells_s"], AFTER_CELLS_S, "s",
               "the report stage"),
        Target(f"no-op ≤ bare no-op + {NOOP_OVER_BARE_S:g} s", figures["noop_over_bare_s"], NOOP_OVER_BARE_S, "s",
               "no-op − bare no-op"),
    ]


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f} ms"


def _s(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f} s"


def _x(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _aligned(rows: Sequence[Sequence[str]], right: int) -> list[str]:
    """Rows of cells as lines, each column as wide as its widest cell; column ``right`` (the
    numbers) right-aligned."""
    widths = [max(len(row[i]) for row in rows if len(row) > i) for i in range(max(map(len, rows)))]
    return ["  " + "  ".join(cell.rjust(widths[i]) if i == right else cell.ljust(widths[i])
                             for i, cell in enumerate(row)).rstrip() for row in rows]


def _value(value: float | None, unit: str) -> str:
    return {"ms": _ms, "s": _s}.get(unit, lambda v: f"{_x(v)} {unit}")(value)


def format_table(figures: Mapping[str, Any], heading: str = "") -> str:
    """The figures and the targets as an aligned plain-text table."""
    f = figures
    per_cell: list[tuple[str, ...]] = [
        ("Snakemake gap per cell (median)", _ms(f["gap_median_ms"]),
         f"bare Snakemake per job {_ms(f['bare_per_job_ms'])}",
         "cell jobs ran side by side: no gap between them" if f.get("cells_side_by_side")
         else f"ratio {_x(f['gap_per_bare_job'])}"),
        ("Snakemake gap per cell (p90)", _ms(f["gap_p90_ms"])),
        *((PHASE_LABELS.get(name, name), _ms(ms), f"Σ {_s(f['phase_sum_s'][name])}")
          for name, ms in f["phase_median_ms"].items()),
        ("cell job (job_ms)", _ms(f["job_median_ms"])),
        ("service time (service_ms)", _ms(f["service_median_ms"]), f"Σ {_s(f['service_sum_s'])}"),
        ("service time in no phase", _ms(f["unphased_median_ms"]), f"Σ {_s(f['unphased_sum_s'])}",
         "service_ms − its phases from load to settle"),
        ("row written after job_ms ends", _ms(f["row_written_median_ms"]), "the row file's time; in the gap"),
        ("overhead outside timing and e2e", _ms(f["overhead_median_ms"]), "job_ms − timing − e2e + gap"),
    ]
    totals: list[tuple[str, ...]] = [
        ("whole run (wall)", _s(f["wall_s"]), f"bare Snakemake {_s(f['bare_wall_s'])}",
         f"ratio {_x(f['wall_per_bare_wall'])}"),
        ("before the first cell", _s(f["before_cells_s"]), "data, device figures"),
        ("cell stage", _s(f["cell_stage_s"]), "first cell start to last cell end"),
        ("after the last cell", _s(f["after_cells_s"]), "the report stage"),
        ("Σ timing", _s(f["timing_sum_s"])),
        ("Σ service_ms", _s(f["service_sum_s"])),
        ("wall / Σ timing", _x(f["wall_per_timing"])),
        ("Σ service_ms / Σ timing", _x(f["service_per_timing"])),
        ("cell stage / Σ service_ms", _x(f["cell_stage_per_service"])),
        ("no-op", _s(f["noop_s"]), f"bare no-op {_s(f['bare_noop_s'])}",
         "nothing to do" if f["noop_idle"] else "jobs ran: not a no-op"),
    ]
    marks = [("met" if t.met else "n/a" if t.met is None else "not met", t.text, _value(t.value, t.unit), t.reads)
             for t in targets(f)]
    lines = _aligned([*per_cell, *totals], right=1)
    return "\n".join([
        *([heading] if heading else []),
        f"per cell: median of {f['cells']} cells ({f['jobs']} jobs; bare Snakemake: as many)",
        *lines[:len(per_cell)], "totals", *lines[len(per_cell):], "targets", *_aligned(marks, right=2),
    ])
