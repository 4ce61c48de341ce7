"""What an experiment family is: the small interface every family module implements.

A family turns its config section into problems, names a cell's problem as a path fragment and
gives its geometry. The grid (convlab.plan.grid), the registry, Cell and the workflow's rules and
wildcards read these through the one table in convlab.plan.families, and ask a family's
attributes rather than compare its name.

Standard library only, like every family module, so that a Cell (which names its path through its
family) costs no NumPy. What a family's cells compute on, which needs NumPy, is its entry in
convlab.plan.families.inputs; how the report shows and files it, its entry in
convlab.report.familydisplay, so that a setting only the report reads re-renders the report and
re-measures no cell.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from convlab.problem.geometry import ConvProblem, GemmProblem
from convlab.status import ConfigError

if TYPE_CHECKING:
    from convlab.plan.cell import Cell


class Family(ABC):
    """One experiment family. Subclasses set the class attributes and implement the methods."""

    name: str
    # the summary columns that tell its problems apart (the findings group by them, the counters'
    # replay picks a cell per problem by them)
    problem_columns: tuple[str, ...]
    size_overrides: bool = True  # whether a kernel's `sizes` setting limits its cells
    kernel_layout: dict[str, str] | None = None  # the layouts every kernel of the family must declare
    kernel_layout_note: str = ""  # those layouts in words, for the registry's error
    exclusive: bool = False  # its kernels take part in no other family
    gallery: bool = False  # its cells at the gallery size draw the edge-map gallery from the pictures

    @abstractmethod
    def problems(self, section: dict, config: dict) -> Iterator[dict]:
        """The family's problems from its config section, each a dict of Cell fields."""

    @abstractmethod
    def path_fragment(self, cell: Cell) -> str:
        """The cell's problem as a path fragment, e.g. size~4096/stride~1/filter~3."""

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


class PictureFamily(Family):
    """A family whose cells convolve (a view of) the downscaled picture."""

    def path_fragment(self, cell: Cell) -> str:
        return f"size~{cell.size}/stride~{cell.stride}/filter~{cell.filter_size}"
