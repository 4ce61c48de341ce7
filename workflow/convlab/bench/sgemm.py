"""The SGEMM benchmark: our fastest SGEMM against cuBLAS, strict fp32 (TF32 off), in one process
on one GPU, every result checked against float64. Prints the ratio of throughputs and the target
(ours >= 90 % of cuBLAS), met or missed by how much, computed from its own rows."""

from __future__ import annotations

from typing import Any

from convlab.backends.base import Backend
from convlab.bench.floor import VERIFY, fastest_ok, tunable_variants
from convlab.plan.cell import Cell
from convlab.plan.families.gemm import Gemm
from convlab.plan.families.inputs import load_operands
from convlab.plan.registry import get_kernel
from convlab.run.runner import measure_cell
from convlab.run.steps import CellInputs

OURS = ("sgemm_vectorized", "sgemm_register", "sgemm_pipelined")  # the tiled kernels; the best ok variant is ours
LIBRARY = "cublas"
FAMILY = Gemm.name  # the family whose problems it measures
GEMM_TARGET = 0.90  # ours / cuBLAS in GFLOP/s, i.e. cuBLAS ms / ours ms
TIMING = {"mode": "warm", "warmup": 3, "min_reps": 10, "max_reps": 100, "batch": 5, "stable_rel": 0.005,
          "budget_s": 2.0, "e2e_reps": 1}


def _cell(kernel: str, size: int, tunables: dict) -> Cell:
    return Cell(experiment=FAMILY, backend="cuda", kernel=kernel, size=size, stride=0, filter_size=0, padding=0,
                in_channels=0, out_channels=0, filter="random", tunables=tunables,
                settings=dict(get_kernel(kernel).settings), timing=TIMING, verify=VERIFY)


def _rows(backend: Backend, kernel: str, size: int) -> list[dict[str, Any]]:
    spec = get_kernel(kernel)
    cells = [_cell(kernel, size, tunables) for tunables in tunable_variants(spec)]
    return [measure_cell(CellInputs(cell, spec, load_operands(cell)), backend=backend) for cell in cells]


def run_gemm_benchmark(backend: Backend, sizes: list[int]) -> list[dict[str, Any]]:
    """Per size: our fastest ok SGEMM variant and cuBLAS, each verified against float64."""
    results = []
    for size in sizes:
        ours = fastest_ok([row for kernel in OURS for row in _rows(backend, kernel, size)])
        library = fastest_ok(_rows(backend, LIBRARY, size))
        results.append({"size": size, "ours_kernel": f"{ours['kernel']} {ours['variant']}",
                        "ours_status": ours["status"], "ours_ms": ours.get("kernel_ms"),
                        "ours_max_rel_err": ours.get("max_rel_err"), "cublas_status": library["status"],
                        "cublas_ms": library.get("kernel_ms"), "gflops_ours": ours.get("gflops"),
                        "gflops_cublas": library.get("gflops")})
    return results


def share_of_cublas(row: dict[str, Any]) -> float:
    """Ours as a share of cuBLAS's throughput; nan where either is not ok (never a time)."""
    if row["ours_status"] != "ok" or row["cublas_status"] != "ok" or not row["ours_ms"] or not row["cublas_ms"]:
        return float("nan")
    return float(row["cublas_ms"]) / float(row["ours_ms"])


def gemm_target(results: list[dict[str, Any]]) -> list[str]:
    """The SGEMM target, met or missed, at the worst size; a row that is not ok is a miss."""
    if not results:
        return []
    lines = [f"MISS correctness: {r['size']}^3 {who} is {status}" for r in results
             for who, status in (("ours", r["ours_status"]), ("cuBLAS", r["cublas_status"])) if status != "ok"]
    worst = min(results, key=lambda r: -1.0 if share_of_cublas(r) != share_of_cublas(r) else share_of_cublas(r))
    value = share_of_cublas(worst)
    if value != value:
        verdict, how = "MISS", "no time"
    elif value >= GEMM_TARGET:
        verdict, how = "met ", f"{100 * value:.1f}%"
    else:
        verdict, how = "MISS", f"{100 * value:.1f}%, {100 * (GEMM_TARGET - value):.1f} points short"
    sizes = ", ".join(str(r["size"]) for r in results)
    return [*lines, f"{verdict} SGEMM >= {GEMM_TARGET:.0%} of cuBLAS (fp32, TF32 off) at {sizes}: worst "
                    f"{worst['size']}^3 {how} ({worst['ours_kernel']})"]


def format_gemm_table(results: list[dict[str, Any]]) -> str:
    lines = ["SGEMM vs cuBLAS (fp32, TF32 off):",
             f"{'size':>6} {'ours ms':>9} {'cuBLAS ms':>9} {'ours GFLOP/s':>12} {'share':>6}  ours"]
    for r in results:
        lines.append(f"{r['size']:>6} {r['ours_ms'] or float('nan'):>9.3f} {r['cublas_ms'] or float('nan'):>9.3f} "
                     f"{r['gflops_ours'] or float('nan'):>12.0f} {100 * share_of_cublas(r):>5.1f}%  "
                     f"{r['ours_status']} ({r['ours_kernel']}, err {r['ours_max_rel_err']})")
    return "\n".join([*lines, "targets (SGEMM):", *(f"  {line}" for line in gemm_target(results))])
