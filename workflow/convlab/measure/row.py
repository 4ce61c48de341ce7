"""The result row: its columns, their order and types, the one builder, its check, and an
atomic writer.

A row is built in one place, build_row(), from the columns of a cell's steps and observers
(convlab.run.runner) and the facts of the job that measured it (convlab.run.celljob), and checked against
the contract there: nothing edits a row after it is built.

A row file is a result only when it is whole: one header in the current format, one row as
long as the header, every column its status requires, and a check over the rest of the row
that matches. Anything else is damaged (truncated, emptied, overwritten) and is never read as
a result.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import io
import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from numbers import Integral, Real
from pathlib import Path
from typing import Any

from convlab.atomicfile import write_text_atomically
from convlab.codeversion import measurement_version
from convlab.measure.phases import format_phases

TEXT: tuple[type, ...] = (str,)
WHOLE: tuple[type, ...] = (Integral,)
NUMBER: tuple[type, ...] = (Real,)
VERSION: tuple[type, ...] = (str, Integral)  # CUDA's driver and runtime give numbers, the cpu backend text


def _typed(kind: tuple[type, ...], *names: str) -> dict[str, tuple[type, ...]]:
    return dict.fromkeys(names, kind)


# The measurement contract, in order, with each column's type. Empty where a value does not apply
# (e.g. no time for a launch that failed).
TYPES: dict[str, tuple[type, ...]] = {
    # what was measured
    **_typed(TEXT, "experiment", "kernel", "variant", "backend", "implementation", "layout"),
    # a hash of the cell's whole settings as the rule asked for them (convlab.plan.cell.spec_hash):
    # a run compares it with the config's, whatever Snakemake's records remember
    **_typed(TEXT, "spec_hash"),
    # the arithmetic precision the cell computed in and was verified in (fp32, tf32): its kernel's, or tf32 where
    # the cell's settings allow TF32 math; the report ranks kernels within one precision by it
    **_typed(TEXT, "precision"),
    **_typed(WHOLE, "size", "batch", "H", "W", "C_in", "C_out", "filter_size", "stride", "padding", "OH", "OW",
             "gemm_m", "gemm_n", "gemm_k", "block"),
    **_typed(TEXT, "engine", "engine_heuristic", "launch"),
    # the hash of the machine code a source kernel ran (its module, compiled in a process of its own:
    # convlab.backends.cleanbuild); what a side-by-side measurement proves it runs again
    **_typed(TEXT, "module_hash"),
    # the per-block shared-memory limit that applied to the kernel's launches (cuda .cu kernels):
    # the default 48 KiB, or the GPU's opt-in limit where a stage needs more (empty on cpu)
    **_typed(WHOLE, "smem_limit_bytes"),
    # outcome
    **_typed(TEXT, "status", "reason"),
    # timing (ms). timing_mode as configured; timing_applied the mode that took the samples (warm
    # where a graph could not be captured, timing_fallback says why); graph_launches the runs
    # per sample of a graph (each sample one replay, kernel_ms per run)
    **_typed(TEXT, "timing_mode", "timing_applied"), **_typed(WHOLE, "graph_launches"),
    **_typed(TEXT, "timing_fallback"),
    **_typed(NUMBER, "kernel_ms", "kernel_ms_min", "kernel_ms_max", "kernel_ms_iqr"),
    **_typed(WHOLE, "reps"), **_typed(TEXT, "timing_stop", "stage_ms"), **_typed(NUMBER, "setup_ms", "e2e_ms"),
    # the job's wall-clock phases (ms; see the README), its whole wall time (client process start
    # to row written) and the time the measurement service spent on this cell alone
    **_typed(TEXT, "phase_ms"), **_typed(NUMBER, "job_ms", "service_ms"),
    # derived
    **_typed(WHOLE, "flops", "bytes"), **_typed(NUMBER, "gflops", "gbps", "copy_gbps", "floor_ms", "pct_of_floor"),
    # verification against the float64 reference
    **_typed(NUMBER, "max_rel_err", "rel_l2_err", "tolerance"), **_typed(WHOLE, "nonfinite"),
    # the GPU while the repeats were timed (NVML; empty without it, see convlab.measure.telemetry)
    **_typed(NUMBER, "sm_clock_min_mhz", "sm_clock_median_mhz", "mem_clock_min_mhz", "mem_clock_median_mhz",
             "power_median_w", "energy_j", "energy_per_rep_mj", "gflop_per_j", "temperature_max_c"),
    **_typed(TEXT, "throttle_reasons", "throttled"), **_typed(WHOLE, "telemetry_samples"),
    # other processes that used the GPU while the repeats ran (pid and name where visible; empty
    # where this process cannot be told from others): a time taken beside them is not confirmed
    **_typed(WHOLE, "gpu_neighbours"), **_typed(TEXT, "gpu_neighbour_names"),
    # provenance
    **_typed(TEXT, "device"), **_typed(WHOLE, "gpu_index"), **_typed(TEXT, "gpu_uuid", "compute_capability"),
    # the threads the host's computation could use (the cpu backend's BLAS, OpenMP and OpenCV pools, as
    # threadpoolctl reports them; empty where the device computes)
    **_typed(WHOLE, "host_threads"),
    **_typed(VERSION, "driver_version", "runtime_version"),
    **_typed(TEXT, "cupy_version", "cudnn_version", "cublas_version", "cufft_version", "compiler", "git_commit", "convlab_version", "code_version", "host",
             "started_at", "finished_at"),
    # a hash of every other column's text: a row that was cut or edited no longer matches
    **_typed(TEXT, "row_check"),
}
COLUMNS = list(TYPES)
CHECK_COLUMN = "row_check"
# Columns a row of each status cannot lack: what was measured, its outcome and provenance, and
# for a measured row its time and its verification.
REQUIRED = ("experiment", "kernel", "variant", "backend", "size", "status", "git_commit", "code_version")
REQUIRED_MEASURED = ("kernel_ms", "reps", "max_rel_err", "tolerance", "flops", "gflops", "device",
                     "started_at", "finished_at")
MEASURED_STATUSES = ("ok", "wrong")


class DamagedRow(ValueError):
    """A row file that is not a whole row of the current format."""


class OtherFormat(ValueError):
    """A whole row written under another column list (an older convlab): not damaged, but not
    comparable either; its cell's params re-measure it."""


def row_format() -> str:
    """A short hash of the column list: names the row contract a cell's CSV was written in."""
    return hashlib.sha256(",".join(COLUMNS).encode()).hexdigest()[:12]


def variant_name(tunables: dict[str, Any]) -> str:
    """The tunables as a path component, e.g. 'block~16', or 'default'."""
    return "_".join(f"{k}~{v}" for k, v in sorted(tunables.items())) or "default"


@dataclass(frozen=True)
class JobFacts:
    """What the job that measured a cell adds to its row: its own phases (listed before the cell's
    in phase_ms), its whole time, the service's time on the cell (None in the job's own process),
    and the columns the service sets over the measured ones (the commit it was asked to measure)."""

    phases: Mapping[str, float]
    job_ms: float
    service_ms: float | None = None
    columns: Mapping[str, Any] = field(default_factory=dict)


def check_row(values: Mapping[str, Any]) -> None:
    """Raise KeyError for a column outside the contract, TypeError for a value of another type."""
    unknown = set(values) - set(COLUMNS)
    if unknown:
        raise KeyError(f"not in the row contract: {sorted(unknown)}")
    wrong = [f"{k}={v!r}" for k, v in values.items() if v is not None and not isinstance(v, TYPES[k])]
    if wrong:
        raise TypeError(f"not of the row contract's types: {', '.join(wrong)}")


def build_row(parts: Iterable[Mapping[str, Any]], job: JobFacts | None = None) -> dict[str, Any]:
    """The row, every column in COLUMNS order (None where a value does not apply), from the
    columns of the parts that measured it (no column given twice) and its job's facts; checked
    against the contract. Its check column is computed as it is written."""
    values: dict[str, Any] = {}
    for part in parts:
        repeated = values.keys() & part.keys()
        if repeated:
            raise ValueError(f"columns given twice: {sorted(repeated)}")
        values.update(part)
    if job is not None:
        cell_phases = values.get("phase_ms")
        values.update(phase_ms=";".join(text for text in (format_phases(job.phases), cell_phases) if text),
                      job_ms=job.job_ms, service_ms=job.service_ms)
        values.update(job.columns)
    check_row(values)
    return {name: values.get(name) for name in COLUMNS if name != CHECK_COLUMN}


def failure_row(spec: dict[str, Any], status: str, reason: str, **extra: Any) -> dict[str, Any]:
    """The row of a cell whose measurement never produced one (its worker died or hung, or the
    service went away): what was asked, the status and why, and the ``extra`` columns the service
    knows. Built from the cell's spec alone, so that a process without NumPy can write it."""
    tunables = spec.get("tunables") or {}
    backend = spec.get("backend") or "cpu"
    return build_row([{
        "code_version": measurement_version(backend), "spec_hash": spec_hash(json.dumps(spec, sort_keys=True)),
        "experiment": spec.get("experiment"), "kernel": spec.get("kernel"),
        "variant": variant_name(tunables), "backend": backend, "size": spec.get("size"),
        "batch": spec.get("batch"), "filter_size": spec.get("filter_size"), "stride": spec.get("stride"),
        "padding": spec.get("padding"), "block": tunables.get("block"),
        "timing_mode": (spec.get("timing") or {}).get("mode"),
        "status": status, "reason": reason[:2000],
    }, extra])


def _cell_text(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"  # six significant digits: far below any timing noise
    return value


def spec_hash(spec_json: str) -> str:
    """A short hash of a cell's settings as JSON (convlab.plan.cell.Cell.to_json): the row's
    ``spec_hash``."""
    return hashlib.sha256(spec_json.encode()).hexdigest()[:16]


def row_check(texts: list[str]) -> str:
    """The check over a row's other columns, as written (text, in column order)."""
    return hashlib.sha256("\x1f".join(texts).encode()).hexdigest()[:16]


def format_row(values: dict[str, Any]) -> str:
    """The row as CSV text, header included, with its check. The one place a row is written."""
    check_row(values)
    texts = {k: str(_cell_text(values.get(k))) for k in COLUMNS if k != CHECK_COLUMN}
    texts[CHECK_COLUMN] = row_check(list(texts.values()))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerow(texts)
    return buffer.getvalue()


def parse_row(text: str) -> list[str]:
    """The one row of a row file's text, in COLUMNS order. Raises DamagedRow saying what is
    wrong, or OtherFormat for a whole row of another column list."""
    if not text:
        raise DamagedRow("empty")
    try:
        records = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as error:
        raise DamagedRow(f"not CSV ({error})") from None
    if len(records) != 2:
        raise DamagedRow(f"{len(records)} lines, not a header and one row")
    header, values = records
    if len(values) != len(header):
        raise DamagedRow(f"{len(values)} values under {len(header)} columns")
    if header != COLUMNS:
        if not text.endswith("\n") or (header[-1] == CHECK_COLUMN and values[-1] != row_check(values[:-1])):
            raise DamagedRow("cut short, in another version's columns")
        raise OtherFormat("its columns are not this convlab's")
    if values[-1] != row_check(values[:-1]):
        raise DamagedRow("its check does not match its values (cut or edited)")
    row = dict(zip(COLUMNS, values))
    required = REQUIRED + (REQUIRED_MEASURED if row["status"] in MEASURED_STATUSES else ("reason",))
    missing = [name for name in required if not row[name]]
    if missing:
        raise DamagedRow(f"status {row['status'] or '(none)'} without {', '.join(missing)}")
    if row["status"] in MEASURED_STATUSES:
        problem = contradiction(row)
        if problem:
            raise DamagedRow(f"its values contradict each other: {problem}")
    return values


# Rounding to six significant digits (the row's text) and the clocks' resolution.
ROUNDING = 1e-5
WINDOW_SLACK_MS = 1.0


def finite_number(text: object) -> float | None:
    """The finite number ``text`` writes, or None (empty, not a number, inf or nan)."""
    try:
        number = float(text) if text not in (None, "") else math.nan
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _moment(text: str) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        return None


def contradiction(row: Mapping[str, str]) -> str | None:
    """What a measured row's values say against each other, or None: a median outside its
    min..max, a spread wider than the range, fewer than one repeat, repeats that could not fit
    between the cell's start and finish, or a derived column (GFLOP/s, GB/s, the floor, energy)
    that disagrees with the times it was computed from. A row edited by hand with its check
    recomputed is caught here, and never taken for a measurement."""
    ms, low, high = (finite_number(row[name]) for name in ("kernel_ms", "kernel_ms_min", "kernel_ms_max"))
    iqr, reps = finite_number(row["kernel_ms_iqr"]), finite_number(row["reps"])
    if ms is None or ms <= 0:
        return f"kernel_ms {row['kernel_ms'] or '(none)'} is not a positive time"
    if reps is None or reps < 1 or reps != int(reps):
        return f"reps {row['reps']} is not a count of one or more"
    if low is not None and high is not None:
        if not low * (1 - ROUNDING) <= ms <= high * (1 + ROUNDING):
            return f"kernel_ms {row['kernel_ms']} outside kernel_ms_min {row['kernel_ms_min']} .. kernel_ms_max " \
                   f"{row['kernel_ms_max']}"
        if iqr is not None and not 0 <= iqr <= (high - low) * (1 + ROUNDING) + high * ROUNDING:
            return f"kernel_ms_iqr {row['kernel_ms_iqr']} outside 0 .. kernel_ms_max - kernel_ms_min"
    started, finished = _moment(row["started_at"]), _moment(row["finished_at"])
    if started is None or finished is None:
        return "started_at or finished_at is not a time"
    window_ms = (finished - started).total_seconds() * 1e3
    if window_ms < 0:
        return f"finished_at {row['finished_at']} before started_at {row['started_at']}"
    launches = finite_number(row["graph_launches"]) or 1
    timed_ms = reps * launches * (low if low is not None else ms)
    if timed_ms > window_ms * (1 + ROUNDING) + WINDOW_SLACK_MS:
        return f"{row['reps']} repeats of at least {low if low is not None else ms:g} ms cannot fit in the " \
               f"{window_ms:.1f} ms between started_at and finished_at"
    return derived_disagreement(row)


# The columns computed from others when the row was built (convlab.problem.metrics,
# convlab.measure.telemetry): each column, the formula it was computed by, as text and as a function
# of the columns it names.
DERIVED: tuple[tuple[str, str, tuple[str, ...], Callable[..., float]], ...] = (
    ("gflops", "flops / kernel_ms / 1e6", ("flops", "kernel_ms"), lambda flops, ms: flops / ms / 1e6),
    ("gbps", "bytes / kernel_ms / 1e6", ("bytes", "kernel_ms"), lambda size, ms: size / ms / 1e6),
    ("floor_ms", "bytes / copy_gbps / 1e6", ("bytes", "copy_gbps"), lambda size, gbps: size / gbps / 1e6),
    ("pct_of_floor", "floor_ms / kernel_ms * 100", ("floor_ms", "kernel_ms"), lambda floor, ms: floor / ms * 100),
    ("energy_per_rep_mj", "power_median_w * kernel_ms", ("power_median_w", "kernel_ms"), lambda watts, ms: watts * ms),
    ("gflop_per_j", "flops / energy_per_rep_mj / 1e6", ("flops", "energy_per_rep_mj"),
     lambda flops, mj: flops / mj / 1e6),
)
# Each value is written to six significant digits: a derived column and those it was computed from
# agree within a few of those roundings, and a row edited by a factor is far outside.
DERIVED_TOLERANCE = 10 * ROUNDING


def derived_disagreement(row: Mapping[str, str]) -> str | None:
    """The first derived column of a measured row that disagrees with the columns it was computed
    from (a time edited without its GFLOP/s, say), or None. A column or operand left empty (it did
    not apply) is not checked."""
    for name, formula, operands, compute in DERIVED:
        value = finite_number(row.get(name))
        given = [finite_number(row.get(operand)) for operand in operands]
        if value is None or None in given or 0 in given[1:]:  # not applied, or a division by zero
            continue
        expected = compute(*given)
        if abs(value - expected) > DERIVED_TOLERANCE * max(abs(value), abs(expected)):
            return f"{name} {row[name]} disagrees with {formula} = {expected:.6g}"
    return None


def read_row_file(path: str | Path) -> list[str]:
    """parse_row() of a file; a file that is not UTF-8 text, or a directory in a row's place, is
    damaged."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise DamagedRow("not text") from None
    except IsADirectoryError:
        raise DamagedRow("a directory, not a row file") from None
    return parse_row(text)


def write_row_atomically(values: dict[str, Any], path: str | Path) -> None:
    """Write the row beside ``path`` and rename it over ``path``, so that no reader ever sees
    half a row. Not synced to the disk (a sync is a good part of a cell's time after its
    measurement): a row a power cut left empty or cut fails its check and is measured again."""
    write_text_atomically(path, format_row(values), durable=False)
