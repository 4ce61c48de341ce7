"""winograd_layers (seed 004): batched multi-channel CNN layers (C, H, W, K) on random data."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING

from convlab.plan.families.base import Family, conv_problem
from convlab.problem.geometry import ConvProblem

if TYPE_CHECKING:
    from convlab.plan.cell import Cell


class WinogradLayers(Family):
    name = "winograd_layers"
    problem_columns = ("C_in", "H", "W", "C_out", "batch")
    size_overrides = False  # a layer is named by (C, H, W, K), not by one size

    def problems(self, section: dict, config: dict) -> Iterator[dict]:
        for layer, batch in itertools.product(section["layers"], section["batches"]):
            c, h, w, k = layer
            yield dict(size=h, width=w, stride=1, filter_size=3, padding=1, in_channels=c, out_channels=k,
                       batch=batch, filter="random")

    def path_fragment(self, cell: Cell) -> str:
        return (f"layer~C{cell.in_channels}_H{cell.size}_W{cell.width or cell.size}_K{cell.out_channels}"
                f"/batch~{cell.batch}")

    def problem(self, cell: Cell) -> ConvProblem:
        return conv_problem(cell, batched=True)
