"""gemm (seed 003): square SGEMM on random matrices."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from convlab.plan.families.base import Family
from convlab.problem.geometry import GemmProblem

if TYPE_CHECKING:
    from convlab.plan.cell import Cell

ROW_MAJOR = {"input": "rowmajor", "weights": "rowmajor", "output": "rowmajor"}


class Gemm(Family):
    name = "gemm"
    problem_columns = ("size",)
    kernel_layout = ROW_MAJOR
    kernel_layout_note = "a, b and output row-major"
    exclusive = True

    def problems(self, section: dict, config: dict) -> Iterator[dict]:
        for size in section["sizes"]:
            yield dict(size=size, stride=0, filter_size=0, padding=0, in_channels=0, out_channels=0,
                       filter="random")

    def path_fragment(self, cell: Cell) -> str:
        return f"size~{cell.size}"

    def problem(self, cell: Cell) -> GemmProblem:
        return GemmProblem(cell.size, cell.size, cell.size)
