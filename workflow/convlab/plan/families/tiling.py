"""tiling (seed 002): one channel of the picture, large sizes (a mosaic of the largest picture
beyond source_size), filters 3/5/9."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from convlab.plan.families.base import PictureFamily, check_filters, image_path


class Tiling(PictureFamily):
    name = "tiling"
    problem_columns = ("filter_size", "size")

    def problems(self, section: dict, config: dict) -> Iterator[dict]:
        check_filters(self.name, section["sizes"], section["filter_sizes"], "same")
        for size, k in itertools.product(section["sizes"], section["filter_sizes"]):
            yield dict(size=size, stride=1, filter_size=k, padding=(k - 1) // 2, in_channels=1, out_channels=1,
                       filter=section["filter"], image=image_path(min(size, config["source_size"])))
