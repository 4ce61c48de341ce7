"""How the report shows and files each experiment family: its name in words, its roofline marker, the
seeds it reproduces, what the findings rank it against and headline, how the seed comparison matches
its problems, and which family the figures against size draw.

Kept with the report, apart from the families (convlab.plan.families): convlab.codeversion hashes this
module under the report's role, so an edit here re-renders the report and re-measures no cell. One
entry per family in DISPLAYS, keyed by the family's name (a test holds that every family has one).
Standard library only: the Snakefile reads it when it builds the DAG.
"""

from __future__ import annotations

from dataclasses import dataclass

from convlab.plan.families import FAMILIES
from convlab.plan.families.base import Family
from convlab.plan.families.conv2d import Conv2d
from convlab.plan.families.gemm import Gemm
from convlab.plan.families.tiling import Tiling
from convlab.plan.families.winograd_layers import WinogradLayers


@dataclass(frozen=True)
class FamilyDisplay:
    """What the report knows of one family beyond its problems."""

    label: str  # how the report names the family (the findings add the seeds it re-runs)
    marker: str  # its points' marker on the roofline
    # the seeds it reproduces (convlab.report.seeds): the report files their pages under it
    seeds: tuple[str, ...] = ()
    library_kernels: tuple[str, ...] = ()  # vendor-library kernels the findings rank ours against
    # The summary column that holds its problem's size where filled (else `size`): what the seed comparison
    # matches a seed's size against and the findings name its problems by.
    size_column: str = "size"
    convolves: bool = True  # its problems have a stride and a filter, which a seed's number is matched on too
    # (column, ascending) pairs that put the problem the findings page headlines first; empty: the last
    # problem in the family's problem_columns order
    headline_order: tuple[tuple[str, bool], ...] = ()
    size_figures: bool = False  # the report's figures against size (convlab.report.figuretable) draw its rows
    # where its seed argues about memory traffic, that argument in a sentence: the counters page
    # answers it with the family's measured bytes (convlab.report.counterfindings)
    traffic_argument: str = ""


DISPLAYS: dict[str, FamilyDisplay] = {
    Conv2d.name: FamilyDisplay(
        label="2-D convolution", marker="o", seeds=("000", "001"),
        library_kernels=("cudnn", "cudnn_nchw", "cudnn_tf32", "cudnn_tf32_nchw"),
        headline_order=(("size", False), ("stride", True)),  # the largest picture at its densest stride
        size_figures=True),
    Tiling.name: FamilyDisplay(
        label="tiling strategies", marker="s", seeds=("002",),
        traffic_argument=(
            "Seed 002 computes the basic kernel's intensity as 0.25 FLOP per byte, every input read from global "
            "memory for each of its uses, and tiles the input in shared memory to read it once; it found the "
            "constant-memory filter no faster, and the variant that reads its tile's halo through the cache slower, "
            "without knowing why. Measured here, at the largest size and filter:")),
    WinogradLayers.name: FamilyDisplay(
        label="CNN layers", marker="^", seeds=("004",), library_kernels=("cudnn_nchw", "cudnn_tf32_nchw")),
    Gemm.name: FamilyDisplay(
        label="GEMM", marker="D", seeds=("003",), library_kernels=("cublas",),
        size_column="gemm_m",  # M (= N = K)
        convolves=False),
}


def display(name: str) -> FamilyDisplay:
    """The report's entry of family ``name``."""
    return DISPLAYS[name]


def _size_figure_family() -> Family:
    chosen = [name for name, entry in DISPLAYS.items() if entry.size_figures]
    if len(chosen) != 1:
        raise ValueError(f"exactly one family must set size_figures, got {chosen}")
    return FAMILIES[chosen[0]]


# Whose rows the figures against size draw, filed under its name (one family).
SIZE_FIGURE_FAMILY: Family = _size_figure_family()


def seed_family(seed: str) -> Family:
    """The family that reproduces seed ``seed`` (an id of convlab.report.seeds): the report files the
    seed's pages under it."""
    for name, entry in DISPLAYS.items():
        if seed in entry.seeds:
            return FAMILIES[name]
    raise KeyError(f"no family reproduces seed {seed}: the families' seeds are "
                   f"{', '.join(claimed for entry in DISPLAYS.values() for claimed in entry.seeds)}")
