"""The hardware counts that explain a kernel's time, for one version of a cell's kernel: what
Nsight Compute reads from each side of a pair (convlab.pairs.whyprofile) and how its kernels
become one set of counts per side.

Both sides of a pair are launched in one profiled process, each in the NVTX range of its own index
(convlab.measure.ncureport.cell_range), and profiled with kernel replay: every pass of a kernel
starts from the memory it started with, and the caches are flushed before each (Nsight Compute's
default), so the two versions are read from the same cold start.

A side's counts, summed over its kernels (a library's stages, im2col and GEMM):
- ``instructions``: warp instructions executed;
- ``fma_per_thread``: single-precision FMAs executed by a thread, on average over the threads
  launched (a planted chain of N dependent FMAs in every thread adds N);
- ``dram_read_bytes``: the bytes read from DRAM; ``dram_write_bytes``: the bytes the kernel wrote
  (into L2, all of which reaches DRAM in time). DRAM's own count of written bytes is not the
  kernel's: written data can still sit in L2 when it ends, and lines other kernels left dirty
  are written back during it (two runs of one kernel differed by 12 % on an H200);
- ``l2_bytes``: all L2 traffic; ``local_bytes``: local-memory loads and stores (register spills and
  arrays the compiler could not keep in registers);
- ``registers``: registers per thread of its longest kernel; ``occupancy_pct`` (achieved) and
  ``theoretical_occupancy_pct`` (what its registers, shared memory and block allow), weighted by
  the kernels' times;
- ``top_stall``: the stall reason with the most warps stalled per instruction issued.
"""

from __future__ import annotations

import math

from convlab.measure.ncureport import (
    ISSUED,
    L2_WRITE_SECTORS,
    SECTOR_BYTES,
    STALL_METRIC,
    STALLS,
    TIME,
    ProfiledKernel,
    cell_stalls,
    summed,
    time_weighted,
)

INSTRUCTIONS = "smsp__inst_executed.sum"
FMAS = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"
THREADS = "launch__thread_count"
REGISTERS = "launch__registers_per_thread"
DRAM_READ = "dram__bytes_read.sum"
L2_BYTES = "lts__t_bytes.sum"
LOCAL = ("l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum", "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum")
OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
THEORETICAL = "sm__maximum_warps_per_active_cycle_pct"
WHY_METRICS = (TIME, INSTRUCTIONS, FMAS, THREADS, REGISTERS, DRAM_READ, L2_WRITE_SECTORS, L2_BYTES,
               *LOCAL, OCCUPANCY, THEORETICAL, ISSUED, *(STALL_METRIC.format(s) for s in STALLS))
# A side's counts, in the order the CSVs keep them.
COUNTS = ("profiled_ms", "instructions", "fma_per_thread", "threads", "dram_read_bytes", "dram_write_bytes",
          "l2_bytes", "local_bytes", "registers", "occupancy_pct", "theoretical_occupancy_pct", "top_stall")


def side_counts(kernels: list[ProfiledKernel]) -> dict[str, float | str | None]:
    """One side's counts (COUNTS) from the kernels profiled in its range; empty where there are none."""
    if not kernels:
        return {}
    threads, fmas = summed(kernels, THREADS), summed(kernels, FMAS)
    l2_sectors = summed(kernels, L2_WRITE_SECTORS)
    longest = max(kernels, key=lambda k: k.values.get(TIME, 0.0) if math.isfinite(k.values.get(TIME, 0.0)) else 0.0)
    registers = longest.values.get(REGISTERS, math.nan)
    return {
        "profiled_ms": summed(kernels, TIME),
        "instructions": summed(kernels, INSTRUCTIONS),
        "fma_per_thread": fmas / threads if fmas is not None and threads else None,
        "threads": threads,
        "dram_read_bytes": summed(kernels, DRAM_READ),
        "dram_write_bytes": None if l2_sectors is None else l2_sectors * SECTOR_BYTES,
        "l2_bytes": summed(kernels, L2_BYTES),
        "local_bytes": summed(kernels, *LOCAL),
        "registers": registers if math.isfinite(registers) else None,
        "occupancy_pct": time_weighted(kernels, OCCUPANCY),
        "theoretical_occupancy_pct": time_weighted(kernels, THEORETICAL),
        "top_stall": cell_stalls(kernels).get("top_stall"),
    }
