"""The floor benchmark: in one process, side by side on one GPU, per size and stride:

- the floor kernels (conv_floor_hwc, conv_floor_nchw), best variant of each;
- cuDNN's best plan (cudnn in NHWC, cudnn_nchw in NCHW, strict fp32);
- the naive one-thread-per-pixel kernels (direct in HWC, direct_nchw);
- a device-to-device copy of the same bytes (input read once + output written once): the floor;
- an empty kernel launch: the floor of a launch-bound size;
- at the launch-bound sizes (128^2-512^2), the floor kernels and the copy again in timing mode
  ``graph`` (n launches replayed from one CUDA graph, time per launch), where one event pair
  around one launch would measure the event floor rather than the kernel; beside them a copy
  kernel of the same bytes, and that copy kernel with the conv's multiply-adds added on the
  floats it moves (nothing else): how close any kernel that does this arithmetic can come. The
  launch-bound target divides by the faster of the library's copy and the copy kernel.

Every kernel result is checked against the float64 reference; a failed check is printed, not
hidden. Prints ratios: ours / copy (1.0 = at the floor), cuDNN / ours, ours / empty launch, and
two ceilings that bound what any kernel can show: cuDNN / copy (the largest cuDNN / ours of a
kernel that reads its input once and writes its output once) and copy / empty (the smallest
ours / empty of such a kernel at a launch-bound size). Then the floor kernels' targets, each met
or missed by how much, computed from the rows; a row that is not ok is a miss, never a time.
"""

from __future__ import annotations

import csv
import itertools
import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from convlab.backends import get_backend
from convlab.backends.base import Backend
from convlab.measure.timing import TimingResult, measure
from convlab.plan.cell import Cell
from convlab.plan.families.base import conv_problem
from convlab.plan.families.conv2d import Conv2d
from convlab.plan.families.inputs import load_operands
from convlab.plan.registry import KernelSpec, get_kernel
from convlab.problem.geometry import ConvProblem
from convlab.run.runner import CellInputs, measure_cell

TIMING = {"mode": "warm", "warmup": 3, "min_reps": 20, "max_reps": 400, "batch": 20, "stable_rel": 0.005,
          "budget_s": 1.0, "e2e_reps": 1}
GRAPH_TIMING = {**TIMING, "mode": "graph"}
VERIFY = {"seed": 0, "tolerance": {"fp32": 1e-5, "tf32": 5e-3}}
# The family whose problems it measures: its cells are that family's, and the workflow passes it the sizes
# and strides of that family's config section (workflow/rules/benchmark.smk).
FAMILY = Conv2d.name
# (role, layout, kernel): our kernel, cuDNN's best plan and the naive kernel, per layout
CONTENDERS = [
    ("ours", "hwc", "conv_floor_hwc"), ("cudnn", "hwc", "cudnn"), ("naive", "hwc", "direct"),
    ("ours", "nchw", "conv_floor_nchw"), ("cudnn", "nchw", "cudnn_nchw"), ("naive", "nchw", "direct_nchw"),
]
COPY_BLOCKS = (64, 128, 256)
EMPTY_KERNEL = 'extern "C" __global__ void convlab_empty() {}'
# A kernel that reads its input once and writes it once, 16 bytes per thread: the best any such
# kernel can do, where the copy above may be a copy-engine node of the graph rather than a kernel.
# With FMAS_PER_FLOAT > 0 it also does a conv's multiply-adds on the floats it holds, weights as
# immediates and nothing else (no halo, no bounds, no indexing): less work than any conv kernel.
COPY_KERNEL = r"""
#ifndef FMAS_PER_FLOAT
#define FMAS_PER_FLOAT 0
#endif
extern "C" __global__ void convlab_copy(const float4* __restrict__ source, float4* __restrict__ target, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float4 v = source[i];
#if FMAS_PER_FLOAT > 0
    float* f = &v.x;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < FMAS_PER_FLOAT; ++j) sum = fmaf(f[e], 0.5f + 0.01f * j, sum);
        f[e] = sum;
    }
#endif
    target[i] = v;
}"""


def tunable_variants(spec: KernelSpec) -> list[dict]:
    """Every combination of the kernel's tunable values, as the tunables of one cell each."""
    keys = sorted(spec.tunables)
    return [dict(zip(keys, values)) for values in itertools.product(*(spec.tunables[k] for k in keys))]


def _variants(kernel: str, role: str) -> list[dict]:
    return [{"plan": "best"}] if role == "cudnn" else tunable_variants(get_kernel(kernel))


def _cell(kernel: str, size: int, stride: int, tunables: dict, timing: dict = TIMING) -> Cell:
    return Cell(experiment=FAMILY, backend="cuda", kernel=kernel, size=size, stride=stride, filter_size=3,
                padding=1, in_channels=3, out_channels=3, filter="laplacian", tunables=tunables,
                settings=dict(get_kernel(kernel).settings), timing=timing, verify=VERIFY,
                image=f"data/input_{size}.png")


def _copy_buffers(backend: Backend, nbytes: int) -> tuple[Any, Any]:
    """A source and a target that a copy reads and writes ``nbytes`` of in total (the kernel's input + output)."""
    source = backend.xp.ones(nbytes // 8, dtype=backend.xp.float32)
    return source, backend.xp.empty_like(source)


def _copy(backend: Backend, nbytes: int, timing: dict = TIMING) -> TimingResult:
    """The library's device copy of ``nbytes`` in total."""
    source, target = _copy_buffers(backend, nbytes)
    return measure(lambda: backend.xp.copyto(target, source), backend.time_batch, timing, backend.capture_graph)


def conv_fmas_per_float(problem: ConvProblem) -> int:
    """The conv's multiply-adds per float that a copy of its bytes reads, rounded down (so the copy
    kernel with them added never does more arithmetic than the conv)."""
    return (problem.flops // 2) // (problem.bytes_moved // 8)


def time_copy_kernel(backend: Backend, nbytes: int, timing: dict, fmas_per_float: int = 0,
                     block: int = 256) -> TimingResult:
    """A copy kernel (not the library's copy) of ``nbytes`` in total, with ``fmas_per_float``
    multiply-adds on each float it moves, in blocks of ``block`` threads."""
    cupy = backend.xp
    source, target = _copy_buffers(backend, nbytes)
    kernel = cupy.RawKernel(COPY_KERNEL, "convlab_copy", options=(f"-DFMAS_PER_FLOAT={fmas_per_float}",))
    vectors = source.size // 4
    grid = (-(-vectors // block),)
    return measure(lambda: kernel(grid, (block,), (source, target, cupy.int64(vectors))), backend.time_batch, timing,
                   backend.capture_graph)


def _best_copy_kernel(backend: Backend, nbytes: int, fmas_per_float: int = 0) -> TimingResult:
    """The copy kernel graph-timed at its fastest block size: a small image fills few SMs in large blocks."""
    return min((time_copy_kernel(backend, nbytes, GRAPH_TIMING, fmas_per_float, block) for block in COPY_BLOCKS),
               key=lambda result: (result.applied != "graph", result.median_ms))


def _empty_launch_ms(backend: Backend) -> float:
    cupy = backend.xp
    kernel = cupy.RawKernel(EMPTY_KERNEL, "convlab_empty")
    return measure(lambda: kernel((1,), (32,), ()), backend.time_batch, TIMING).median_ms


def fastest_ok(rows: list[dict]) -> dict:
    """The fastest ok row, or the first row where none is ok (its status says why)."""
    ok = [row for row in rows if row["status"] == "ok"]
    return min(ok, key=lambda row: row["kernel_ms"]) if ok else rows[0]


def _best_variant(backend: Backend, role: str, kernel: str, size: int, stride: int, picture: Path,
                  timing: dict = TIMING) -> dict:
    """The row of the kernel's fastest ok variant (or of its first, where none is ok)."""
    rows = []
    for tunables in _variants(kernel, role):
        cell = _cell(kernel, size, stride, tunables, timing)
        inputs = CellInputs(cell, get_kernel(kernel), load_operands(cell, picture))
        rows.append(measure_cell(inputs, backend=backend))
    return fastest_ok(rows)


def _graph_ms(result: TimingResult | None) -> float | None:
    return result.median_ms if result and result.applied == "graph" else None


def _graph_columns(ours: dict | None, copy: TimingResult | None, copy_kernel: TimingResult | None = None,
                   copy_fma: TimingResult | None = None) -> dict[str, Any]:
    """The graph-timed columns of a result row (empty away from the launch-bound sizes)."""
    columns = {"ours_graph_kernel": f"{ours['kernel']} {ours['variant']}" if ours else None,
            "ours_graph_status": ours["status"] if ours else None,
            "ours_graph_ms": ours.get("kernel_ms") if ours else None,
            "ours_graph_timing": ours.get("timing_applied") if ours else None,
            "copy_graph_ms": copy.median_ms if copy else None, "copy_graph_timing": copy.applied if copy else None,
            "copy_kernel_graph_ms": _graph_ms(copy_kernel), "copy_fma_graph_ms": _graph_ms(copy_fma)}
    return {**columns, "copy_best_graph_ms": best_graph_copy_ms(columns)}


def best_graph_copy_ms(r: dict[str, Any]) -> float | None:
    """The launch-bound target's copy: the faster of the library's copy and the copy kernel, both
    graph-timed. The library's copy of some byte counts takes a slower path (at 512^2 on an H200,
    2.5 us where 324 bytes fewer take 1.7), and a denominator inflated that way would flatter ours."""
    times = [ms for ms in (r.get("copy_graph_ms") if r.get("copy_graph_timing") == "graph" else None,
                           r.get("copy_kernel_graph_ms")) if ms]
    return min(times) if times else r.get("copy_graph_ms")


def run_benchmark(sizes: list[int], strides: list[int], picture_dir: str | Path = "data") -> list[dict[str, Any]]:
    backend = get_backend("cuda")
    device = backend.device_info()["device"]
    empty_ms = _empty_launch_ms(backend)
    results = []
    for size, stride in itertools.product(sizes, strides):
        picture = Path(picture_dir) / f"input_{size}.png"
        launch_bound = size in LAUNCH_SIZES
        measured: dict[tuple[str, str], dict] = {}
        for role, layout, kernel in CONTENDERS:
            measured[(role, layout)] = _best_variant(backend, role, kernel, size, stride, picture)
            if role == "ours" and launch_bound:
                measured[("graph", layout)] = _best_variant(backend, role, kernel, size, stride, picture, GRAPH_TIMING)
        problem = conv_problem(_cell("direct", size, stride, {}))
        copy_ms = _copy(backend, problem.bytes_moved).median_ms
        copy_graph = _copy(backend, problem.bytes_moved, GRAPH_TIMING) if launch_bound else None
        copy_kernel_graph = _best_copy_kernel(backend, problem.bytes_moved) if launch_bound else None
        copy_fma_graph = (_best_copy_kernel(backend, problem.bytes_moved, conv_fmas_per_float(problem))
                          if launch_bound else None)
        for layout in ("hwc", "nchw"):
            ours, cudnn, naive = (measured[(role, layout)] for role in ("ours", "cudnn", "naive"))
            results.append({
                "device": device, "size": size, "stride": stride, "layout": layout,
                "ours_kernel": f"{ours['kernel']} {ours['variant']}", "ours_status": ours["status"],
                "ours_ms": ours.get("kernel_ms"), "ours_max_rel_err": ours.get("max_rel_err"),
                "cudnn_ms": cudnn.get("kernel_ms"), "cudnn_engine": cudnn.get("engine"),
                "naive_ms": naive.get("kernel_ms"), "copy_ms": copy_ms, "empty_launch_ms": empty_ms,
                **_graph_columns(measured.get(("graph", layout)), copy_graph, copy_kernel_graph, copy_fma_graph),
            })
    return results


def _ratio(a: float | None, b: float | None) -> float:
    return float(a) / float(b) if a and b else float("nan")


def _floor_ratio(r: dict[str, Any]) -> float:
    """ours / copy; nan (a miss) where ours is not ok, even with a time."""
    return _ratio(r["ours_ms"], r["copy_ms"]) if r["ours_status"] == "ok" else float("nan")


# The floor kernels' targets: ours / a copy of the same bytes at the large sizes, and graph-timed at the
# launch-bound sizes (where an event pair around one launch would time its own floor)
FLOOR_SIZES, FLOOR_LIMIT = (2048, 4096), 1.15
LAUNCH_SIZES, GRAPH_LIMIT = (128, 256, 512), 1.1


def _worst(rows: list[dict[str, Any]], value: Callable[[dict[str, Any]], float]) -> tuple[float, dict[str, Any]]:
    """The row with the largest value; a row without one (nan: no time) counts as the worst."""
    return max(((value(r), r) for r in rows), key=lambda pair: math.inf if math.isnan(pair[0]) else pair[0])


def _where(r: dict[str, Any]) -> str:
    return f"{r['size']}^2 stride {r['stride']} {r['layout']}"


def _judge(value: float, limit: float, no_value: str = "no time") -> tuple[str, str]:
    """The verdict on a ratio that must not exceed ``limit``, and by how much it does."""
    if value <= limit:
        return "met ", ""
    if math.isnan(value):
        return "MISS", f", {no_value}"
    return "MISS", f", {100 * (value / limit - 1):.1f}% over"


def _graph_gap(r: dict[str, Any]) -> str:
    """Why a graph-timed row has no ratio to judge, or "" where it has one."""
    if r["ours_graph_status"] != "ok":
        return f"ours is {r['ours_graph_status']}"
    for who, mode in (("ours", r["ours_graph_timing"]), ("the copy", r["copy_graph_timing"])):
        if mode != "graph":
            return f"{who} not graph-timed ({mode})"
    return ""


def _graph_ratio(r: dict[str, Any]) -> float:
    return float("nan") if _graph_gap(r) else _ratio(r["ours_graph_ms"], best_graph_copy_ms(r))


def _graph_target(results: list[dict[str, Any]]) -> list[str]:
    """ours <= GRAPH_LIMIT x the faster copy of the same bytes (the library's or the copy kernel), all
    graph-timed, at the launch-bound sizes."""
    rows = [r for r in results if r["size"] in LAUNCH_SIZES and r.get("ours_graph_status")]
    if not rows:
        return []
    lines = [f"MISS correctness: {_where(r)} graph-timed is {r['ours_graph_status']}"
             for r in rows if r["ours_graph_status"] != "ok"]
    value, r = _worst(rows, _graph_ratio)
    verdict, over = _judge(value, GRAPH_LIMIT, _graph_gap(r) or "no time")
    return [*lines, f"{verdict} ours <= {GRAPH_LIMIT} x the faster copy of the same bytes, graph-timed, at "
                    f"{', '.join(map(str, LAUNCH_SIZES))}: worst {value:.3f} ({_where(r)}{over}){_graph_ceilings(rows)}"]


def _graph_ceilings(rows: list[dict[str, Any]]) -> str:
    """Which copy the target divides by, and what the copy kernel with the conv's multiply-adds added
    shows against it: how close a kernel that moves these bytes and does this arithmetic can come."""
    parts = []
    library = _known(_ratio(r["copy_graph_ms"], r.get("copy_kernel_graph_ms")) for r in rows)
    if library:
        parts.append(f"the library's copy is {min(library):.2f}-{max(library):.2f} x a copy kernel of the same bytes "
                     "there, and the faster of the two is the copy")
    with_fmas = _known(_ratio(r.get("copy_fma_graph_ms"), best_graph_copy_ms(r)) for r in rows)
    if with_fmas:
        above = sum(ratio > GRAPH_LIMIT for ratio in with_fmas)
        parts.append(f"the copy kernel with the conv's multiply-adds added (nothing else) is "
                     f"{min(with_fmas):.2f}-{max(with_fmas):.2f} x the copy"
                     + (f", above {GRAPH_LIMIT} at {above} of {len(with_fmas)} rows" if above else ""))
    return "".join(f"; {part}" for part in parts)


def _known(ratios: Iterable[float]) -> list[float]:
    """The ratios that have a value (nan: a time missing on either side)."""
    return [ratio for ratio in ratios if not math.isnan(ratio)]


def check_targets(results: list[dict[str, Any]]) -> list[str]:
    """One line per floor-kernel target that the rows cover: met or missed, the worst case and
    by how much. A row that is not ok counts as a miss. (cuDNN / ours and ours / empty launch
    are printed in the table as ratios with their ceilings, cuDNN / copy and copy / empty: no
    kernel that reads its input once and writes its output once can pass those ceilings.)"""
    lines = [f"MISS correctness: {_where(r)} is {r['ours_status']}" for r in results if r["ours_status"] != "ok"]
    floor_rows = [r for r in results if r["size"] in FLOOR_SIZES]
    if floor_rows:
        value, r = _worst(floor_rows, _floor_ratio)
        verdict, over = _judge(value, FLOOR_LIMIT)
        lines.append(f"{verdict} ours / copy <= {FLOOR_LIMIT} at {', '.join(map(str, FLOOR_SIZES))}: worst "
                     f"{value:.3f} ({_where(r)}{over})")
    return lines + _graph_target(results)


def format_table(results: list[dict[str, Any]]) -> str:
    header = (f"{'size':>6} {'s':>2} {'layout':>6} {'ours ms':>9} {'copy ms':>9} {'ours/copy':>9} "
              f"{'%copyBW':>7} {'cuDNN ms':>9} {'cuDNN/ours':>10} {'naive/ours':>10} {'ours/empty':>10} "
              f"{'cuDNN/copy':>10} {'copy/empty':>10}  status")
    lines = [f"floor benchmark on {results[0]['device']}" if results else "no results", header]
    for r in results:
        over_copy = _ratio(r["ours_ms"], r["copy_ms"])
        lines.append(
            f"{r['size']:>6} {r['stride']:>2} {r['layout']:>6} {r['ours_ms'] or float('nan'):>9.4f} "
            f"{r['copy_ms']:>9.4f} {over_copy:>9.3f} {100 / over_copy:>6.1f}% {r['cudnn_ms'] or float('nan'):>9.4f} "
            f"{_ratio(r['cudnn_ms'], r['ours_ms']):>10.2f} {_ratio(r['naive_ms'], r['ours_ms']):>10.2f} "
            f"{_ratio(r['ours_ms'], r['empty_launch_ms']):>10.2f} {_ratio(r['cudnn_ms'], r['copy_ms']):>10.2f} "
            f"{_ratio(r['copy_ms'], r['empty_launch_ms']):>10.2f}  {r['ours_status']} ({r['ours_kernel']}, "
            f"err {r['ours_max_rel_err']})")
    lines += _graph_table(results)
    if results:
        lines += ["targets (floor kernels):", *(f"  {line}" for line in check_targets(results))]
    return "\n".join(lines)


def _graph_table(results: list[dict[str, Any]]) -> list[str]:
    """The launch-bound rows graph-timed: ms per launch of ours and of the copy."""
    rows = [r for r in results if r.get("ours_graph_status")]
    if not rows:
        return []
    lines = ["launch-bound sizes, graph-timed (ms per launch, each sample one replay of n launches; the copy is "
             "the faster of the library's copy and the copy kernel):",
             f"{'size':>6} {'s':>2} {'layout':>6} {'ours ms':>9} {'lib copy':>9} {'copy krnl':>9} {'ours/copy':>9} "
             f"{'+FMAs/copy':>10}  status"]
    for r in rows:
        copy = best_graph_copy_ms(r)
        lines.append(f"{r['size']:>6} {r['stride']:>2} {r['layout']:>6} {r['ours_graph_ms'] or float('nan'):>9.5f} "
                     f"{r['copy_graph_ms'] or float('nan'):>9.5f} {r.get('copy_kernel_graph_ms') or float('nan'):>9.5f} "
                     f"{_graph_ratio(r):>9.3f} {_ratio(r.get('copy_fma_graph_ms'), copy):>10.3f}  {r['ours_graph_status']} "
                     f"({r['ours_graph_kernel']}; timed: ours {r['ours_graph_timing']}, copy {r['copy_graph_timing']})")
    return lines


def write_results(results: list[dict[str, Any]], out_csv: str | Path, table: str) -> None:
    """The rows as CSV, and their printed ``table`` in a .txt beside it."""
    out_csv = Path(out_csv)
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    with open(out_csv, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(results[0]))
        writer.writeheader()
        writer.writerows(results)
    out_csv.with_suffix(".txt").write_text(table + "\n")

