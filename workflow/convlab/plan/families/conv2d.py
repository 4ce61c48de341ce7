"""conv2d (seeds 000, 001): the 3-channel picture, sizes x strides x filters."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from convlab.plan.families.base import PictureFamily, check_filters, image_path, resolve_padding
from convlab.status import ConfigError


def check_picture_sizes(section: dict, config: dict) -> None:
    """Pictures are the source scaled down, never up: a larger size would measure invented pixels."""
    larger = [size for size in section["sizes"] if size > config["source_size"]]
    if larger:
        raise ConfigError(
            f"{section['sizes_key']}: {', '.join(map(str, larger))} larger than source_size "
            f"{config['source_size']}; the pictures are the source scaled down, so raise source_size "
            "or drop these sizes")


class Conv2d(PictureFamily):
    name = "conv2d"
    problem_columns = ("filter_size", "size", "stride")
    gallery = True

    def problems(self, section: dict, config: dict) -> Iterator[dict]:
        check_picture_sizes(section, config)
        check_filters(self.name, section["sizes"], section["filter_sizes"], section["padding"])
        for size, stride, k in itertools.product(section["sizes"], section["strides"], section["filter_sizes"]):
            yield dict(size=size, stride=stride, filter_size=k, padding=resolve_padding(section["padding"], k),
                       in_channels=3, out_channels=section["out_channels"], filter=section["filter"],
                       image=image_path(size))

    def cpu_overrides(self, config: dict) -> tuple[dict, str | None]:
        # the cpu backend's conv2d grid predates the per-family cpu sections: cpu.sizes
        return {"sizes": config["cpu"]["sizes"]}, "cpu.sizes (the cpu backend's conv2d sizes)"
