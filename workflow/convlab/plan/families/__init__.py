"""The experiment families, one module each, and the one table everything else reads.

- conv2d (seeds 000, 001): the 3-channel picture, sizes x strides x filters.
- tiling (seed 002): one channel of the picture, large sizes, filters 3/5/9.
- winograd_layers (seed 004): batched multi-channel CNN layers on random data.
- gemm (seed 003): square SGEMM on random matrices.

A kernel takes part in the families its description lists under ``experiments`` (DEFAULT_FAMILY
where it lists none). Everything else asks a family (its attributes, base.Family) rather than
comparing names: no family's name is spelled outside this package, its schemas and the config.
Each family also has its operands (inputs.OPERANDS, which needs NumPy) and its entry in the report
(convlab.report.familydisplay). Standard library only.
"""

from __future__ import annotations

from convlab.plan.families.base import Family
from convlab.plan.families.conv2d import Conv2d
from convlab.plan.families.gemm import Gemm
from convlab.plan.families.tiling import Tiling
from convlab.plan.families.winograd_layers import WinogradLayers

# In this order everywhere: the grid, the summary, the findings and the figures.
FAMILIES: dict[str, Family] = {family.name: family for family in (Conv2d(), Tiling(), WinogradLayers(), Gemm())}
# The family of a kernel whose description names none, and of a row of an older summary without
# an experiment column.
DEFAULT_FAMILY: str = Conv2d.name


def family(name: str) -> Family:
    return FAMILIES[name]


def problem_key(row: dict) -> tuple:
    """A row's kernel and problem, stride aside: its experiment, kernel, and its family's problem
    columns (a layer's channels and batch, an image's size and filter), numbers sorting as numbers."""
    columns = FAMILIES[row["experiment"]].problem_columns if row.get("experiment") in FAMILIES else ("size",)
    return (str(row.get("experiment", "")), str(row.get("kernel", "")),
            *(_sortable(row.get(column, "")) for column in columns if column != "stride"))


def _sortable(value: object) -> tuple[int, float, str]:
    try:
        return (0, float(value), "")  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return (1, 0.0, str(value))


def _sole(role: str) -> Family:
    """The one family whose flag ``role`` is set."""
    chosen = [candidate for candidate in FAMILIES.values() if getattr(candidate, role)]
    if len(chosen) != 1:
        raise ValueError(f"exactly one family must set {role}, got {[candidate.name for candidate in chosen]}")
    return chosen[0]


# Whose cells draw the gallery (one family). A family's flag, not the report's: the grid reads it to
# choose the gallery's size, and the gallery's jobs run the kernels.
GALLERY_FAMILY: Family = _sole("gallery")
