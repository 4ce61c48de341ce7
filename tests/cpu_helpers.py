"""What the cpu backend's cell tests share: a small conv2d cell, its picture's size, and a backend
whose kernel a test replaces with a faulty one."""

from __future__ import annotations

from collections.abc import Callable

from convlab.backends.base import PreparedKernel
from convlab.backends.cpu import CpuBackend
from convlab.plan.cell import Cell
from convlab.plan.config import validate_config
from convlab.plan.grid import build_cells

# The edge of the square picture (conftest's image_path) and of every cell_for cell.
SIZE = 48


def cell_for(kernel: str, stride: int = 1, filter_kind: str = "random") -> Cell:
    """The cpu grid's one conv2d cell of ``kernel`` at SIZE, measured briefly."""
    config = validate_config({
        "backend": "cpu",
        "conv2d": {"sizes": [SIZE], "strides": [stride], "kernels": [kernel], "filter": filter_kind},
        "cpu": {"sizes": [SIZE], "budget_s": 0.01},
        "timing": {"min_reps": 3, "batch": 3, "e2e_reps": 1},
    })
    (cell,) = [c for c in build_cells(config, "cpu") if c.experiment == "conv2d"]
    return cell


class SabotagedBackend(CpuBackend):
    """The cpu backend with the kernel replaced by a faulty one."""

    def __init__(self, sabotage: Callable[..., PreparedKernel]) -> None:
        super().__init__()
        self.sabotage = sabotage

    def prepare(self, spec, cell_tunables, settings, problem, buffers):
        honest = super().prepare(spec, cell_tunables, settings, problem, buffers)
        return self.sabotage(honest, problem, buffers)
