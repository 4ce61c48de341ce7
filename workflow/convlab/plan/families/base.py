"""What an experiment family is: the small interface every family module implements.

A family turns its config section into problems, names a cell's problem as a path fragment,
builds a cell's operands (which carry the float64 reference) and describes itself to the
report. The grid (convlab.plan.grid), the registry, Cell, the workflow's rules and wildcards, the
findings page, the figures, the seed comparison and the roofline all read these through the one
table in convlab.plan.families, and ask a family's attributes rather than compare its name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from convlab.pictures.loading import load_image
from convlab.plan.operands import ConvOperands, Operands
from convlab.problem.geometry import ConvProblem, GemmProblem
from convlab.problem.weights import make_weights
from convlab.status import ConfigError

if TYPE_CHECKING:
    from convlab.plan.cell import Cell


class Family(ABC):
    """One experiment family. Subclasses set the class attributes and implement the methods."""

    name: str
    label: str  # how the report names the family (the findings add the seeds it re-runs)
    marker: str  # its points' marker on the roofline
    problem_columns: tuple[str, ...]  # the summary columns that tell its problems apart
    library_kernels: tuple[str, ...] = ()  # vendor-library kernels the findings rank ours against
    size_overrides: bool = True  # whether a kernel's `sizes` setting limits its cells
    kernel_layout: dict[str, str] | None = None  # the layouts every kernel of the family must declare
    kernel_layout_note: str = ""  # those layouts in words, for the registry's error
    exclusive: bool = False  # its kernels take part in no other family
    seeds: tuple[str, ...] = ()  # the seeds it reproduces (convlab.report.seeds): the report files their pages under it
    # where its seed argues about memory traffic, that argument in a sentence: the counters page
    # answers it with the family's measured bytes (convlab.report.counterfindings)
    traffic_argument: str = ""
    # The summary column that holds its problem's size where filled (else `size`): what the seed comparison
    # matches a seed's size against and the findings name its problems by.
    size_column: str = "size"
    convolves: bool = True  # its problems have a stride and a filter, which a seed's number is matched on too
    # (column, ascending) pairs that put the problem the findings page headlines first; empty: the last
    # problem in problem_columns order
    headline_order: tuple[tuple[str, bool], ...] = ()
    size_figures: bool = False  # the report's figures against size (convlab.report.figuretable) draw its rows
    gallery: bool = False  # its cells at the gallery size draw the edge-map gallery from the pictures

    @abstractmethod
    def problems(self, section: dict, config: dict) -> Iterator[dict]:
        """The family's problems from its config section, each a dict of Cell fields."""

    @abstractmethod
    def path_fragment(self, cell: Cell) -> str:
        """The cell's problem as a path fragment, e.g. size~4096/stride~1/filter~3."""

    @abstractmethod
    def operands(self, cell: Cell, image_path: str | Path | None) -> Operands:
        """The cell's host-side operands (they place themselves and compute the reference)."""

    def problem(self, cell: Cell) -> ConvProblem | GemmProblem:
        """The cell's problem alone, without its operands (no picture read, no data drawn): enough
        for its launch geometry."""
        return conv_problem(cell)

    def cpu_overrides(self, config: dict) -> tuple[dict, str | None]:
        """The cpu backend's smaller grid for this family, and the config key naming its sizes
        when that is not ``<family>.sizes``."""
        return config["cpu"].get(self.name, {}), None


# -- helpers the image families share ----------------------------------------------------------
def image_path(size: int) -> str:
    return f"data/input_{size}.png"


def resolve_padding(padding: Any, filter_size: int) -> int:
    return (filter_size - 1) // 2 if padding == "same" else int(padding)


def check_filters(family: str, sizes: list[int], filter_sizes: list[int], padding: Any) -> None:
    for k in filter_sizes:
        if k % 2 == 0:
            raise ConfigError(f"{family}.filter_sizes: {k} is even; use odd sizes (3, 5, 7, ...)")
        for size in sizes:
            pad = resolve_padding(padding, k)
            if size + 2 * pad < k:
                raise ConfigError(
                    f"{family}.filter_sizes: a {k}x{k} filter is larger than a {size}x{size} image "
                    f"with padding {pad}; drop that size or filter"
                )


def conv_problem(cell: Cell, batched: bool = False) -> ConvProblem:
    """The cell's convolution; ``batched``: input and output carry a leading N axis."""
    return ConvProblem(height=cell.size, width=cell.width or cell.size, in_channels=cell.in_channels,
                       out_channels=cell.out_channels, filter_size=cell.filter_size, stride=cell.stride,
                       padding=cell.padding, batch=cell.batch, batched=batched)


def filter_weights(cell: Cell, problem: ConvProblem) -> np.ndarray:
    return make_weights(cell.filter, problem.out_channels, problem.in_channels, problem.filter_size,
                                    cell.verify["seed"])


class PictureFamily(Family):
    """A family whose cells convolve (a view of) the downscaled picture."""

    def picture(self, cell: Cell, loaded: np.ndarray) -> np.ndarray:
        """What the cell convolves, from the loaded HWC picture (the picture itself by default)."""
        return loaded

    def path_fragment(self, cell: Cell) -> str:
        return f"size~{cell.size}/stride~{cell.stride}/filter~{cell.filter_size}"

    def operands(self, cell: Cell, image_path: str | Path | None) -> ConvOperands:
        if image_path is None:
            raise ValueError(f"{cell.path} reads a picture; give its path ({cell.image})")
        picture = self.picture(cell, load_image(image_path))
        if picture.shape[:2] != (cell.size, cell.width or cell.size):
            raise ValueError(f"{image_path} is {picture.shape[1]}x{picture.shape[0]}, the cell needs "
                             f"{cell.size}x{cell.size}")
        problem = conv_problem(cell)
        return ConvOperands(problem, picture, filter_weights(cell, problem))
