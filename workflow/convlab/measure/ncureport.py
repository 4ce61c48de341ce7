"""Hardware counters of a cell's kernel: the metrics Nsight Compute reads, and how its report
becomes one set of counter columns per cell.

The counters come from a replayed launch of each ok cell, after and apart from its timed ones:
Nsight Compute (`ncu`) replays every profiled kernel as many times as its metrics need, which no
timed launch may include. The replay process launches each cell's kernel inside an NVTX range named
after the cell's index (cell_range): in the report (collected with --nvtx), every kernel in range i
is cell i's (a cell's run may be several kernels: im2col and GEMM, a library's stages).

Two metric sets, each its own profiled process, run once per pass of the hardware its metrics
need (application replay). METRICS fits in one pass on an H100/H200, for every cell. The stall
counters share no pass with it and need four (STALL_METRICS): they are read for the cells the
findings speak for only.

A cell's columns: DRAM bytes read and written (summed over its kernels), the bytes it wrote into L2
and its DRAM traffic (read, plus the larger of the two written counts), the L2 hit rate of its
reads (the sectors read from L2 that DRAM did not serve), achieved occupancy, SM instruction and
DRAM throughput (% of peak; averaged over its kernels weighted by their time), shared-memory bank
conflicts and the FMA pipe's use (the GEMM kernels' questions), and its top warp-stall reason (the
most warps stalled per issued instruction, over all its kernels).
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

RANGE_PREFIX = "convlab-cell-"
RANGE = re.compile(re.escape(RANGE_PREFIX) + r"(\d+)")
# the raw page's column of the NVTX push/pop ranges each kernel ran in
NVTX_COLUMN = "thread Domain:Push/Pop_Range"

TIME = "gpu__time_duration.sum"
SUMMED = {"dram__bytes_read.sum": "dram_read_bytes", "dram__bytes_write.sum": "dram_write_bytes",
          "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum": "smem_bank_conflicts"}
# What the kernel wrote into and read from L2, in 32-byte sectors: all it wrote reaches DRAM in
# time, though the profiler's DRAM count ends with the kernel (written bytes still in L2 are not in
# it); what it read and DRAM did not serve hit in L2.
L2_WRITE_SECTORS = "lts__t_sectors_srcunit_tex_op_write.sum"
L2_READ_SECTORS = "lts__t_sectors_srcunit_tex_op_read.sum"
SECTOR_BYTES = 32
WEIGHTED = {"sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
            "sm__inst_executed.avg.pct_of_peak_sustained_active": "sm_throughput_pct",
            "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_throughput_pct",
            "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active": "fma_pipe_pct"}
METRICS = (TIME, *SUMMED, L2_WRITE_SECTORS, L2_READ_SECTORS, *WEIGHTED)
# the stall reasons that bound the lab's kernels: warps stalled on each, over the instructions issued
STALLS = ("long_scoreboard", "short_scoreboard", "mio_throttle", "lg_throttle", "math_pipe_throttle", "barrier",
          "wait", "not_selected")
STALL_METRIC = "smsp__warps_issue_stalled_{}.sum"
ISSUED = "smsp__issue_active.sum"
STALL_METRICS = (TIME, ISSUED, *(STALL_METRIC.format(s) for s in STALLS))
COLUMNS = (*SUMMED.values(), "l2_write_bytes", "dram_traffic_bytes", "l2_hit_pct", *WEIGHTED.values(), "top_stall",
           "top_stall_ratio", "profiled_kernels", "profiled_ms", "counters_reason")
# to bytes and milliseconds; Nsight Compute 2025 prints a time's base unit as "ns", earlier ones as "nsecond"
UNIT_SCALE = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
              "nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3,
              "ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


class ReportError(ValueError):
    """The report is not one Nsight Compute printed as a raw CSV page; the message says why."""


def cell_range(index: int) -> str:
    """The NVTX range cell ``index``'s profiled launch runs in."""
    return f"{RANGE_PREFIX}{index}"


@dataclass(frozen=True)
class ProfiledKernel:
    name: str
    cell: int | None  # the index of the cell whose range it ran in
    values: dict[str, float]  # metric -> value in base units (bytes, ms, percent, ratio)


def _value(text: str, unit: str) -> float:
    text = text.replace(",", "").strip()
    if text in ("", "n/a"):
        return math.nan
    return float(text) * UNIT_SCALE.get(unit, 1.0)


def _cell(text: str) -> int | None:
    found = RANGE.findall(text)
    return int(found[-1]) if found else None  # the innermost range


def parse_raw_csv(text: str, metrics: Iterable[str] = ()) -> list[ProfiledKernel]:
    """The kernels of `ncu --import REPORT --csv --page raw` (collected with --nvtx), in launch
    order: the header row, a row of units, then one row per kernel. Each kernel's values are those
    of METRICS, STALL_METRICS and ``metrics`` that the page holds."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if len(rows) < 2 or "Kernel Name" not in rows[0]:
        raise ReportError("no raw page in Nsight Compute's output (its header row is missing)")
    header, units = rows[0], rows[1]
    index = {name: i for i, name in enumerate(header)}
    missing = [m for m in (TIME,) if m not in index]
    if missing:
        raise ReportError(f"Nsight Compute's report lacks {', '.join(missing)}")
    ranges = next((i for i, name in enumerate(header) if name.startswith(NVTX_COLUMN)), None)
    if ranges is None:
        raise ReportError("Nsight Compute's report has no NVTX ranges (collected without --nvtx)")
    kernels = []
    for row in rows[2:]:
        if len(row) != len(header):
            continue
        values = {metric: _value(row[index[metric]], units[index[metric]])
                  for metric in (*METRICS, *STALL_METRICS, *metrics) if metric in index}
        kernels.append(ProfiledKernel(row[index["Kernel Name"]], _cell(row[ranges]), values))
    return kernels


def by_cell(kernels: Iterable[ProfiledKernel]) -> dict[int, list[ProfiledKernel]]:
    """Each cell's kernels, by its index in the replay (its NVTX range)."""
    cells: dict[int, list[ProfiledKernel]] = {}
    for kernel in kernels:
        if kernel.cell is not None:
            cells.setdefault(kernel.cell, []).append(kernel)
    return cells


def summed(kernels: list[ProfiledKernel], *metrics: str) -> float | None:
    """The sum of ``metrics`` over ``kernels`` (None where none of them was read)."""
    values = [k.values.get(m, math.nan) for k in kernels for m in metrics]
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) if finite else None


def cell_counters(kernels: list[ProfiledKernel]) -> dict[str, object]:
    """One cell's counter columns (METRICS) from its kernels (a reason instead where there are none)."""
    if not kernels:
        return {"counters_reason": "no kernel of the cell's run was profiled"}
    times = [k.values.get(TIME, math.nan) for k in kernels]
    total = sum(t for t in times if math.isfinite(t))
    columns: dict[str, object] = {"profiled_kernels": len(kernels), "profiled_ms": total}
    for metric, column in SUMMED.items():
        columns[column] = summed(kernels, metric)
    written_sectors, read_sectors = summed(kernels, L2_WRITE_SECTORS), summed(kernels, L2_READ_SECTORS)
    columns["l2_write_bytes"] = None if written_sectors is None else SECTOR_BYTES * written_sectors
    # the traffic to and from DRAM: every byte read, and every byte written (the larger count)
    read = columns["dram_read_bytes"]
    if read is not None:
        written = [v for v in (columns["dram_write_bytes"], columns["l2_write_bytes"]) if v is not None]
        columns["dram_traffic_bytes"] = read + (max(written) if written else 0.0)
    # the reads L2 served: the sectors read from it less what DRAM delivered (within 0..100 %: DRAM
    # also reads for partly written sectors)
    columns["l2_hit_pct"] = None
    if read is not None and read_sectors:
        served = 1.0 - read / (SECTOR_BYTES * read_sectors)
        columns["l2_hit_pct"] = 100.0 * min(1.0, max(0.0, served))
    for metric, column in WEIGHTED.items():
        columns[column] = time_weighted(kernels, metric)
    columns.update(cell_stalls(kernels))
    columns["counters_reason"] = ""
    return columns


def cell_stalls(kernels: list[ProfiledKernel]) -> dict[str, object]:
    """A cell's top warp-stall reason (STALL_METRICS): the most warps stalled on one reason per
    instruction issued, over all its kernels; nothing where its kernels' stalls were not read."""
    issued = summed(kernels, ISSUED)
    if not issued:
        return {}
    stalls = {name: summed(kernels, STALL_METRIC.format(name)) for name in STALLS}
    known = {name: value / issued for name, value in stalls.items() if value is not None}
    if not known:
        return {}
    top = max(known, key=lambda name: known[name])
    return {"top_stall": top, "top_stall_ratio": known[top]}


def time_weighted(kernels: list[ProfiledKernel], metric: str) -> float | None:
    """``metric`` averaged over ``kernels``, each weighted by its time (None where none has both)."""
    pairs = [(k.values.get(metric, math.nan), k.values.get(TIME, math.nan)) for k in kernels]
    pairs = [(v, t) for v, t in pairs if math.isfinite(v) and math.isfinite(t) and t > 0]
    return sum(v * t for v, t in pairs) / sum(t for _, t in pairs) if pairs else None


def speaking_cells(rows: list[dict[str, object]], problem: Callable[[dict], tuple]) -> list[int]:
    """The rows a finding speaks for, by their position: for each kernel and problem (``problem``
    of a row: its kernel and problem, stride aside), its fastest variant (timed median, kernel_ms)
    at its smallest stride (none: 0); in the order of ``problem``."""
    best: dict[tuple, tuple[tuple[float, float], int]] = {}
    for position, row in enumerate(rows):
        try:
            key = problem(row)
            rank = (float(row.get("stride") or 0), float(row["kernel_ms"]))  # type: ignore[arg-type]
        except (KeyError, TypeError, ValueError):
            continue
        if not all(map(math.isfinite, rank)):
            continue
        if key not in best or rank < best[key][0]:
            best[key] = (rank, position)
    return [position for _, (_, position) in sorted(best.items())]
