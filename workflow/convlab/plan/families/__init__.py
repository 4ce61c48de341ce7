"""The experiment families, one module each, and the one table everything else reads.

- conv2d (seeds 000, 001): the 3-channel picture, sizes x strides x filters.
- tiling (seed 002): one channel of the picture, large sizes, filters 3/5/9.
- winograd_layers (seed 004): batched multi-channel CNN layers on random data.
- gemm (seed 003): square SGEMM on random matrices.

A kernel takes part in the families its description lists under ``experiments``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from convlab.plan.families.base import Family
from convlab.plan.families.conv2d import Conv2d
from convlab.plan.families.gemm import Gemm
from convlab.plan.families.tiling import Tiling
from convlab.plan.families.winograd_layers import WinogradLayers
from convlab.plan.operands import Operands

if TYPE_CHECKING:
    from convlab.plan.cell import Cell

# In this order everywhere: the grid, the summary, the findings and the figures.
FAMILIES: dict[str, Family] = {family.name: family for family in (Conv2d(), Tiling(), WinogradLayers(), Gemm())}


def family(name: str) -> Family:
    return FAMILIES[name]


def load_operands(cell: Cell, image_path: str | Path | None = None) -> Operands:
    """Host-side operands of a cell: its picture, or random data drawn from verify.seed."""
    return FAMILIES[cell.experiment].operands(cell, image_path)
