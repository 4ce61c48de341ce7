"""The seed table: every seed the report compares this run with, what its table page covers, the figures
it draws and the labels of its report entries. The report rules, the seed figures and the command line all
read it, so a seed or a figure is added here (its numbers aside: config/seeds/seed_tables.csv and
method_map.yaml) and claimed by the family that reproduces it (its ``seeds`` in convlab.report.familydisplay,
which also files its report entries).

Standard library only: the command line reads it before it has site-packages. It names no family: a family
claims its seeds.
"""

from __future__ import annotations

from dataclasses import dataclass

# How a seed figure is drawn (convlab.report.seedfigures holds one drawing per kind).
LINES = "lines"  # the seed's and this run's numbers against size, a panel per value of a column
TILING_BARS = "tiling_bars"  # the seed's bars beside this run's, and this run's own tiling sweep
LAYER_SPEEDUPS = "layer_speedups"  # this run's speed-up per CNN layer against the seed's single number

# The report label of every seed's table page.
TABLE_LABEL = "table: every seed number"
# The x axis of a LINES figure that names none of its own.
SIZE_LABEL = "image size (pixels)"


@dataclass(frozen=True)
class Covers:
    """What a report entry covers, as its label columns say it: kernels, strides and sizes."""

    kernel: str
    stride: str
    size: str


@dataclass(frozen=True)
class SeedFigure:
    """One figure of a seed, drawn into seeds/seed<seed>_<name>.png."""

    name: str
    label: str  # the report's "figure" label
    title: str
    tables: tuple[str, ...]  # the seed tables it draws (seed_tables.csv's table column)
    caption: str  # reStructuredText, the figure's report caption
    covers: Covers | None = None  # None: what the seed's table page covers
    drawing: str = LINES
    panel: str | None = None  # LINES: the comparison column with one panel per value
    series: str | None = None  # LINES: the comparison column with one line per value
    size_label: str = SIZE_LABEL  # LINES: the x axis


@dataclass(frozen=True)
class Seed:
    """A seed: its id, what its table page covers and its figures."""

    id: str
    covers: Covers
    figures: tuple[SeedFigure, ...]


SEEDS: dict[str, Seed] = {seed.id: seed for seed in (
    Seed("000", Covers("direct, im2col_gemm_shared, cudnn", "1, 2, 3", "128-2048"), (
        SeedFigure("gflops", "GFLOPS by size x stride x method", "Seed 000: GFLOPS by size, stride and method",
                   tables=("stride1", "stride2", "stride3"), panel="table", series="method",
                   caption="""\
Seed 000's GFLOPS on a GTX 1050 (dashed, open markers) next to this run's (solid, filled), one panel per stride,
for the direct kernel (block 16), im2col + shared-memory GEMM (best block) and cuDNN (heuristic plan); on the cpu
backend the legend names the twin that ran. The panel title gives the median ratio this run / seed over the seed
numbers without a known defect, the same reading as the findings page: where every ratio is against a defective
seed number it says "nothing comparable". Red diamonds mark seed numbers with a known defect: every cuDNN number
includes the algorithm search, and the direct kernel used the same weights for every output channel."""),
    )),
    Seed("001", Covers("direct, im2col_gemm_*, cudnn_nchw", "1, 2, 3", "256-4096"), (
        SeedFigure("methods", "tables 1, 2, 5: direct, im2col, cuDNN by size x stride",
                   "Seed 001 tables 1, 2, 5: direct, im2col + GEMM and cuDNN by size and stride",
                   covers=Covers("direct, im2col_gemm_shared, cudnn_nchw", "1, 2, 3", "256-4096"),
                   tables=("1", "2", "5"), panel="stride", series="method",
                   caption="""\
Seed 001's tables 1, 2 and 5 (Quadro M4000, dashed) against this run (solid): direct (block 16), im2col + shared
GEMM (best block) and cuDNN NCHW (fastest plan), kernel time by image size, one panel per stride. The panel title
gives the median speed ratio (seed ms / this ms); table 6 repeats these numbers and is in the seed 001 table."""),
        SeedFigure("memory", "table 3: memory mode x block", "Seed 001 table 3: im2col GEMM memory mode x block",
                   covers=Covers("im2col_gemm_basic, im2col_gemm_shared, im2col_gemm_register", "1", "256-4096"),
                   tables=("3",), panel="method", series="block",
                   caption="""\
Seed 001's table 3: im2col + GEMM with the GEMM in global memory (basic), shared-memory tiles (shared) and
register tiling (register), at thread-block edges 8, 16 and 32, seed dashed and this run solid. The seed gives no
stride; this run's stride-1 cells are shown."""),
        SeedFigure("partition", "table 4: partition x block", "Seed 001 table 4: im2col GEMM partition x block",
                   covers=Covers("im2col_gemm_row, im2col_gemm_col, im2col_gemm_block", "1", "256-4096"),
                   tables=("4",), panel="method", series="block",
                   caption="""\
Seed 001's table 4: the three ways of partitioning im2col + GEMM (one thread per output row, per column, or a 2-D
block of the output) at blocks 16, 32 and 64. The seed's ~0.003 ms for the 64x64 block (4096 threads) is a launch
that never ran (red diamonds); the box in the panel says what this run recorded for those cells instead."""),
    )),
    Seed("002", Covers("direct, direct_const, tiled_input, tiled_cached", "1", "16384"), (
        SeedFigure("tiling", "four tiling strategies", "Seed 002: four tiling strategies, 9x9 filter",
                   tables=("test",), drawing=TILING_BARS,
                   caption="""\
Seed 002's four tiling strategies on an RTX 4090 (16384² single-channel image, 9x9 filter) as grey bars, next to
this run's time for the same problem (blue), with the ratio in the title. Where this run did not run the problem,
its empty bar slot says "not run" and the title says why. The right panel shows this run's own tiling sweep
(fastest variant of each kernel, every size and filter it ran); a family not configured says so."""),
    )),
    Seed("003", Covers("sgemm_naive, cublas", "-", "512-8192"), (
        SeedFigure("gemm", "GEMM vs cuBLAS", "Seed 003: GEMM vs cuBLAS",
                   tables=("1-gemm", "2-cublas"), panel="method", series="block", size_label="GEMM edge M = N = K",
                   caption="""\
Seed 003's GEMM console logs (fp64, unnamed GPU) against this run's fp32 GEMMs: the naive kernel by block size
(this run's threads~N) and cuBLAS, time against the matrix edge. Seed blocks of 64 and more were N x N blocks over
CUDA's 1024-thread limit that never ran (red diamonds); 003's convolution tables survive only as images and have no
numbers to compare. A cell of this run without the block tunable (the cpu twin runs as *default*) is drawn once, in
a colour of its own, never in a seed block's colour; on the cpu backend the panel titles name the twin that ran
(cuBLAS is numpy's BLAS matmul there)."""),
    )),
    Seed("004", Covers("winograd_batched, conv_naive_batched", "1", "CNN layers"), (
        SeedFigure("winograd", "Winograd speed-up per layer", "Seed 004: Winograd speed-up over the naive convolution",
                   tables=("text",), drawing=LAYER_SPEEDUPS,
                   caption="""\
Speed-up of Winograd F(2x2,3x3) over the naive batched convolution for each CNN layer (C_in, H x W, C_out) and
batch of this run, blue where Winograd wins and orange where it loses. The dashed line is seed 004's single
"1.7x over all layers"; the dotted line is this run's geometric mean over its layers."""),
    )),
)}


def figure_names() -> list[str]:
    """Every figure name of every seed, once each (the {figure} wildcard, the command line's choices)."""
    return list(dict.fromkeys(figure.name for seed in SEEDS.values() for figure in seed.figures))


def figure_stem(seed: str, name: str) -> str:
    """The file name of a seed figure, without its .png."""
    return f"seed{seed}_{name}"


def table_stem(seed: str) -> str:
    """The file name of a seed's table page, without its .html."""
    return f"seed{seed}_table"


def figure_stems() -> list[str]:
    """Every seed figure's file name, seed by seed."""
    return [figure_stem(seed.id, figure.name) for seed in SEEDS.values() for figure in seed.figures]


def seed_figure(seed: str, name: str) -> SeedFigure:
    """The figure ``name`` of seed ``seed``; a ValueError names the seed's own figures."""
    figures = {figure.name: figure for figure in SEEDS[seed].figures}
    if name not in figures:
        raise ValueError(f"seed {seed} draws no figure {name!r}: its figures are {', '.join(figures)}")
    return figures[name]


def report_labels(seed: str, figure: str | None = None) -> dict[str, str]:
    """The labels of a seed's report entry: its figure ``figure``, or its table page."""
    label, covers = TABLE_LABEL, SEEDS[seed].covers
    if figure is not None:
        drawn = seed_figure(seed, figure)
        label, covers = drawn.label, drawn.covers or covers
    return {"figure": label, "seed": seed, "kernel": covers.kernel, "stride": covers.stride, "size": covers.size}
