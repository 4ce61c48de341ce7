"""Which cells of a grid need more shared memory per block than the default 48 KiB, from the
launch descriptions alone (no GPU): the cells that were invalid_config before the cuda backend
opted in above the default (convlab.backends.sharedmem), and now run where the GPU allows.

  python -m convlab shared-memory [--config config/config.yaml]
"""

from __future__ import annotations

from collections.abc import Iterable

from convlab.backends.sharedmem import DEFAULT_SHARED_BYTES, kib
from convlab.plan.cell import Cell
from convlab.plan.families import family
from convlab.plan.launch import holds, problem_names, stage_shared_bytes
from convlab.plan.registry import KernelSpec, load_registry

HOPPER_OPTIN_BYTES = 227 * 1024  # sharedMemPerBlockOptin of the H100 and H200


def cell_shared_bytes(cell: Cell, spec: KernelSpec) -> int:
    """The most dynamic shared memory per block that a stage of the cell's .cu kernel asks for
    (0 for library kernels; static __shared__ arrays are the compiler's and at most 48 KiB)."""
    names = problem_names(family(cell.experiment).problem(cell), cell.tunables)
    return max((stage_shared_bytes(stage, names) for stage in spec.stages if "function" in stage), default=0)


def _launched(cell: Cell, spec: KernelSpec) -> bool:
    """Whether the cell gets as far as a launch: not refused as unsupported or for its ``requires``."""
    if spec.unsupported_reason(cell.stride, cell.filter_size):
        return False
    names = problem_names(family(cell.experiment).problem(cell), cell.tunables)
    return all(holds(condition, names) for condition in spec.requires)


def large_shared_cells(cells: Iterable[Cell], limit: int = DEFAULT_SHARED_BYTES) -> list[tuple[Cell, int]]:
    """The cells that would launch and need more than ``limit`` bytes per block, with their need."""
    registry = load_registry()
    needs = ((cell, registry[cell.kernel]) for cell in cells)
    return [(cell, need) for cell, spec in needs
            if _launched(cell, spec) and (need := cell_shared_bytes(cell, spec)) > limit]


def shared_memory_report(cells: list[Cell], optin: int = HOPPER_OPTIN_BYTES) -> str:
    """How many of ``cells`` need more than 48 KiB, how many of those fit under ``optin``, and each."""
    large = large_shared_cells(cells)
    fit = [cell for cell, need in large if need <= optin]
    lines = [f"{len(large)} of {len(cells)} cells need more than {kib(DEFAULT_SHARED_BYTES)} of shared memory per "
             f"block (invalid_config without the opt-in); {len(fit)} of them fit in {kib(optin)} "
             f"(sharedMemPerBlockOptin of the H100/H200) and run there"]
    lines += [f"  {cell.experiment} {cell.kernel} {cell.variant} {cell.problem}: {kib(need)}"
              + ("" if need <= optin else f" (over {kib(optin)})") for cell, need in large]
    return "\n".join(lines)
