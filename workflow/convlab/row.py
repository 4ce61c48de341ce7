"""The result row: its columns, and an atomic writer so no half-written CSV is ever read."""

from __future__ import annotations

import csv
import io
import os
import tempfile
from pathlib import Path
from typing import Any

# The measurement contract, in order. Empty where a value does not apply (e.g. no time
# for a launch that failed).
COLUMNS = [
    # what was measured
    "experiment", "kernel", "variant", "backend", "implementation", "layout", "size",
    "batch", "H", "W", "C_in", "C_out", "filter_size", "stride", "padding", "OH", "OW",
    "gemm_m", "gemm_n", "gemm_k", "block",
    "engine", "engine_heuristic", "launch",
    # outcome
    "status", "reason",
    # timing (ms)
    "timing_mode", "kernel_ms", "kernel_ms_min", "kernel_ms_max", "kernel_ms_iqr", "reps", "timing_stop",
    "stage_ms", "setup_ms", "e2e_ms",
    # the job's wall-clock phases (ms; see the README), its whole wall time (client process start
    # to row written) and the time the measurement service spent on this cell alone
    "phase_ms", "job_ms", "service_ms",
    # derived
    "flops", "bytes", "gflops", "gbps", "copy_gbps", "floor_ms", "pct_of_floor",
    # verification against the float64 reference
    "max_rel_err", "rel_l2_err", "tolerance", "nonfinite",
    # provenance
    "device", "gpu_index", "gpu_uuid", "compute_capability", "driver_version", "runtime_version", "cupy_version", "cudnn_version",
    "git_commit", "convlab_version", "host", "started_at", "finished_at",
]


def row_format() -> str:
    """A short hash of the column list: names the row contract a cell's CSV was written in."""
    import hashlib

    return hashlib.sha256(",".join(COLUMNS).encode()).hexdigest()[:12]


def variant_name(tunables: dict[str, Any]) -> str:
    """The tunables as a path component, e.g. 'block~16', or 'default'."""
    return "_".join(f"{k}~{v}" for k, v in sorted(tunables.items())) or "default"


def failure_row(spec: dict[str, Any], status: str, reason: str, **extra: Any) -> dict[str, Any]:
    """The row of a cell whose measurement never produced one (its worker died or hung, or the
    service went away): what was asked, the status and why. Built from the cell's spec alone,
    so that a process without NumPy can write it."""
    tunables = spec.get("tunables") or {}
    return {
        "experiment": spec.get("experiment"), "kernel": spec.get("kernel"),
        "variant": variant_name(tunables), "backend": spec.get("backend"), "size": spec.get("size"),
        "batch": spec.get("batch"), "filter_size": spec.get("filter_size"), "stride": spec.get("stride"),
        "padding": spec.get("padding"), "block": tunables.get("block"),
        "timing_mode": (spec.get("timing") or {}).get("mode"),
        "status": status, "reason": reason[:2000], **extra,
    }


def _cell_text(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"  # six significant digits: far below any timing noise
    return value


def format_row(values: dict[str, Any]) -> str:
    unknown = set(values) - set(COLUMNS)
    if unknown:
        raise KeyError(f"not in the row contract: {sorted(unknown)}")
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerow({k: _cell_text(values.get(k)) for k in COLUMNS})
    return buffer.getvalue()


def write_row_atomically(values: dict[str, Any], path: str | Path) -> None:
    """Write to a temporary file in the same directory, fsync, then rename over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = format_row(values)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
