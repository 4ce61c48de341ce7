"""winograd_layers (seed 004): batched multi-channel CNN layers (C, H, W, K) on random data."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from convlab.plan.families.base import Family, conv_problem, filter_weights
from convlab.plan.operands import ConvOperands
from convlab.problem.geometry import ConvProblem

if TYPE_CHECKING:
    from convlab.plan.cell import Cell


class WinogradLayers(Family):
    name = "winograd_layers"
    label = "CNN layers"
    marker = "^"
    problem_columns = ("C_in", "H", "W", "C_out", "batch")
    library_kernels = ("cudnn_nchw", "cudnn_tf32_nchw")
    size_overrides = False  # a layer is named by (C, H, W, K), not by one size
    seeds = ("004",)

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

    def operands(self, cell: Cell, image_path: str | Path | None) -> ConvOperands:
        problem = self.problem(cell)
        # activations after a ReLU are >= 0: uniform [0, 1), NHWC like a picture batch
        rng = np.random.default_rng(cell.verify["seed"] + 1)
        image = rng.random((problem.batch, problem.height, problem.width, problem.in_channels), dtype=np.float32)
        return ConvOperands(problem, image, filter_weights(cell, problem))
