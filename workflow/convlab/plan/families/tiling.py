"""tiling (seed 002): one channel of the picture, large sizes (a mosaic of the largest picture
beyond source_size), filters 3/5/9."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from convlab.plan.families.base import PictureFamily, check_filters, image_path

if TYPE_CHECKING:
    from convlab.plan.cell import Cell


class Tiling(PictureFamily):
    name = "tiling"
    label = "tiling strategies"
    marker = "s"
    problem_columns = ("filter_size", "size")
    seeds = ("002",)
    traffic_argument = (
        "Seed 002 computes the basic kernel's intensity as 0.25 FLOP per byte, every input read from global memory "
        "for each of its uses, and tiles the input in shared memory to read it once; it found the constant-memory "
        "filter no faster, and the variant that reads its tile's halo through the cache slower, without knowing "
        "why. Measured here, at the largest size and filter:")

    def problems(self, section: dict, config: dict) -> Iterator[dict]:
        check_filters(self.name, section["sizes"], section["filter_sizes"], "same")
        for size, k in itertools.product(section["sizes"], section["filter_sizes"]):
            yield dict(size=size, stride=1, filter_size=k, padding=(k - 1) // 2, in_channels=1, out_channels=1,
                       filter=section["filter"], image=image_path(min(size, config["source_size"])))

    def picture(self, cell: Cell, loaded: np.ndarray) -> np.ndarray:
        """One (grey) channel of the picture, tiled into a mosaic where the cell is larger than
        the largest picture."""
        import cv2

        grey = cv2.cvtColor(loaded, cv2.COLOR_BGR2GRAY)[:, :, None]
        reps = -(-cell.size // grey.shape[0])
        return np.ascontiguousarray(np.tile(grey, (reps, reps, 1))[: cell.size, : cell.size])
