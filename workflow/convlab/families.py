"""The experiment families: each turns its config section into cells and loads a cell's operands.

- conv2d (seeds 000, 001): the 3-channel picture, sizes x strides x filters.
- tiling (seed 002): one channel of the picture, large sizes (a mosaic of the largest
  picture beyond source_size), filters 3/5/9.
- winograd_layers (seed 004): batched multi-channel CNN layers (C, H, W, K) on random data.
- gemm (seed 003): square SGEMM on random matrices.

A kernel takes part in the families its description lists under ``experiments``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from convlab.config import ConfigError
from convlab.grid import UNLABELLED, Cell, as_int, kernel_options, resolve_padding
from convlab.measure import problem as problem_mod
from convlab.measure.problem import ConvProblem, GemmProblem
from convlab.operands import ConvOperands, GemmOperands, Operands
from convlab.registry import KernelSpec, RegistryError, load_registry

FAMILIES = ("conv2d", "tiling", "winograd_layers", "gemm")


def image_path(size: int) -> str:
    return f"data/input_{size}.png"


# -- config sections -------------------------------------------------------------------------
def _section(config: dict, family: str, backend: str) -> dict:
    """The family's section, with the cpu backend's smaller grid applied."""
    section = dict(config[family])
    section["sizes_key"] = f"{family}.sizes"
    if backend == "cpu":
        if family == "conv2d":
            section["sizes"] = config["cpu"]["sizes"]
            section["sizes_key"] = "cpu.sizes (the cpu backend's conv2d sizes)"
        else:
            section.update(config["cpu"].get(family, {}))
    return section


# Service settings, not measurement settings: kept out of the cell so that changing them re-runs nothing.
SERVICE_TIMING_KEYS = ("cell_timeout_s",)


def _timing(config: dict, backend: str) -> dict:
    timing = {k: v for k, v in config["timing"].items() if k not in SERVICE_TIMING_KEYS}
    if backend == "cpu":
        timing["budget_s"] = config["cpu"]["budget_s"]
    return timing


def _kernels(section: dict, family: str, registry: dict[str, KernelSpec]) -> list[str]:
    members = [name for name, spec in registry.items() if family in spec.experiments]
    if section["kernels"] == "all":
        return members
    unknown = [name for name in section["kernels"] if name not in registry]
    if unknown:
        raise ConfigError(
            f"{family}.kernels: unknown kernel(s) {', '.join(unknown)}; registered in "
            f"kernels/registry.yaml: {', '.join(sorted(registry))}"
        )
    foreign = [name for name in section["kernels"] if name not in members]
    if foreign:
        raise ConfigError(
            f"{family}.kernels: {', '.join(foreign)} do(es) not take part in {family} (their descriptions' "
            f"`experiments`); kernels of {family}: {', '.join(members)}"
        )
    return list(section["kernels"])


def _check_filters(family: str, sizes: list[int], filter_sizes: list[int], padding: Any) -> None:
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


# -- problems per family: dicts of Cell fields -------------------------------------------------
def _check_picture_sizes(section: dict, config: dict) -> None:
    """Pictures are the source scaled down, never up: a larger size would measure invented pixels."""
    larger = [size for size in section["sizes"] if size > config["source_size"]]
    if larger:
        raise ConfigError(
            f"{section['sizes_key']}: {', '.join(map(str, larger))} larger than source_size "
            f"{config['source_size']}; the pictures are the source scaled down, so raise source_size "
            "or drop these sizes")


def _conv2d_problems(section: dict, config: dict) -> Iterator[dict]:
    _check_picture_sizes(section, config)
    _check_filters("conv2d", section["sizes"], section["filter_sizes"], section["padding"])
    for size, stride, k in itertools.product(section["sizes"], section["strides"], section["filter_sizes"]):
        yield dict(size=size, stride=stride, filter_size=k, padding=resolve_padding(section["padding"], k),
                   in_channels=3, out_channels=section["out_channels"], filter=section["filter"],
                   image=image_path(size))


def _tiling_problems(section: dict, config: dict) -> Iterator[dict]:
    _check_filters("tiling", section["sizes"], section["filter_sizes"], "same")
    for size, k in itertools.product(section["sizes"], section["filter_sizes"]):
        yield dict(size=size, stride=1, filter_size=k, padding=(k - 1) // 2, in_channels=1, out_channels=1,
                   filter=section["filter"], image=image_path(min(size, config["source_size"])))


def _layer_problems(section: dict, config: dict) -> Iterator[dict]:
    for layer, batch in itertools.product(section["layers"], section["batches"]):
        c, h, w, k = layer
        yield dict(size=h, width=w, stride=1, filter_size=3, padding=1, in_channels=c, out_channels=k,
                   batch=batch, filter="random")


def _gemm_problems(section: dict, config: dict) -> Iterator[dict]:
    for size in section["sizes"]:
        yield dict(size=size, stride=0, filter_size=0, padding=0, in_channels=0, out_channels=0,
                   filter="random")


PROBLEMS = {"conv2d": _conv2d_problems, "tiling": _tiling_problems,
            "winograd_layers": _layer_problems, "gemm": _gemm_problems}


def family_cells(config: dict, family: str, backend: str, registry: dict[str, KernelSpec],
                 offered: dict[str, set[int]] | None = None, device: str = UNLABELLED) -> list[Cell]:
    """The family's cells. ``offered`` collects, per kernel, the sizes the grid offers it."""
    section = _section(config, family, backend)
    if not section["enabled"]:
        return []
    problems = list(PROBLEMS[family](section, config))
    cells = []
    for name in _kernels(section, family, registry):
        spec = registry[name]
        if backend not in spec.backends():
            continue  # e.g. a GPU-only kernel with no cpu twin
        overrides = config["kernels"].get(name, {})
        tunables, settings = kernel_options(spec, backend, overrides)
        only_sizes = [as_int(v) for v in overrides.get("sizes", [])]
        if offered is not None and family != "winograd_layers":
            offered.setdefault(name, set()).update(fields["size"] for fields in problems)
        keys = sorted(tunables)
        for fields in problems:
            if only_sizes and family != "winograd_layers" and fields["size"] not in only_sizes:
                continue
            for values in itertools.product(*(tunables[key] for key in keys)):
                cells.append(Cell(experiment=family, backend=backend, kernel=name, device=device,
                                  tunables=dict(zip(keys, values)), settings=settings,
                                  timing=_timing(config, backend), verify=config["verify"], **fields))
    return cells


def _check_size_overrides(config: dict, offered: dict[str, set[int]], cells: list[Cell], backend: str) -> None:
    """A kernel's `sizes` that match none of the sizes the grid offers it would drop the kernel
    from the run without a word."""
    running = {cell.kernel for cell in cells}
    for name, sizes in offered.items():
        only = config["kernels"].get(name, {}).get("sizes")
        if only and sizes and name not in running:
            raise ConfigError(f"kernels.{name}.sizes: none of {', '.join(map(str, only))} is a size the grid offers "
                              f"{name} on the {backend} backend ({', '.join(map(str, sorted(sizes)))}), so it would "
                              f"run no cell; list one of those sizes or drop kernels.{name}.sizes")


def build_cells(config: dict, backend: str, device: str = UNLABELLED) -> list[Cell]:
    """Every cell of every enabled experiment, for a resolved backend (cuda or cpu), kept under
    results/<device>/."""
    if backend not in ("cuda", "cpu"):
        raise ValueError(f"backend must be resolved to cuda or cpu, got {backend!r}")
    try:
        registry = load_registry()
        offered: dict[str, set[int]] = {}
        cells = [cell for family in FAMILIES
                 for cell in family_cells(config, family, backend, registry, offered, device)]
        for name in config["kernels"]:
            if name not in registry:
                raise ConfigError(f"kernels.{name}: no such kernel in kernels/registry.yaml")
        _check_size_overrides(config, offered, cells, backend)
    except RegistryError as error:
        raise ConfigError(str(error)) from error
    paths = [cell.path for cell in cells]
    if len(set(paths)) != len(paths):
        raise ConfigError("two cells map to the same result path; check for repeated sizes, strides or layers")
    return cells


def image_sizes(cells: list[Cell]) -> list[int]:
    """The downscaled picture sizes the cells read."""
    return sorted({int(Path(cell.image).stem.split("_")[-1]) for cell in cells if cell.image})


def gallery_size(config: dict, cells: list[Cell]) -> int | None:
    """The configured gallery size if conv2d has it, else the largest conv2d size below it."""
    sizes = sorted({cell.size for cell in cells if cell.experiment == "conv2d"})
    if not sizes:
        return None
    below = [s for s in sizes if s <= config["gallery"]["size"]]
    return max(below) if below else min(sizes)


# -- operands -------------------------------------------------------------------------------
def conv_problem(cell: Cell) -> ConvProblem:
    return ConvProblem(height=cell.size, width=cell.width or cell.size, in_channels=cell.in_channels,
                       out_channels=cell.out_channels, filter_size=cell.filter_size, stride=cell.stride,
                       padding=cell.padding, batch=cell.batch, batched=cell.experiment == "winograd_layers")


def _picture(cell: Cell, path: str | Path | None) -> np.ndarray:
    """The cell's picture, HWC float32: RGB for conv2d; for tiling one (grey) channel, tiled into
    a mosaic where the cell is larger than the largest picture."""
    if path is None:
        raise ValueError(f"{cell.path} reads a picture; give its path ({cell.image})")
    picture = problem_mod.load_image(path)
    if cell.experiment == "tiling":
        import cv2

        grey = cv2.cvtColor(picture, cv2.COLOR_BGR2GRAY)[:, :, None]
        reps = -(-cell.size // grey.shape[0])
        picture = np.ascontiguousarray(np.tile(grey, (reps, reps, 1))[: cell.size, : cell.size])
    if picture.shape[:2] != (cell.size, cell.width or cell.size):
        raise ValueError(f"{path} is {picture.shape[1]}x{picture.shape[0]}, the cell needs {cell.size}x{cell.size}")
    return picture


def load_operands(cell: Cell, path: str | Path | None = None) -> Operands:
    """Host-side operands of a cell: read its picture, or draw random data from verify.seed."""
    seed = cell.verify["seed"]
    if cell.experiment == "gemm":
        rng = np.random.default_rng(seed)
        a = rng.uniform(-1.0, 1.0, (cell.size, cell.size)).astype(np.float32)
        b = rng.uniform(-1.0, 1.0, (cell.size, cell.size)).astype(np.float32)
        return GemmOperands(GemmProblem(cell.size, cell.size, cell.size), a, b)
    problem = conv_problem(cell)
    if cell.experiment == "winograd_layers":
        # activations after a ReLU are >= 0: uniform [0, 1), NHWC like a picture batch
        rng = np.random.default_rng(seed + 1)
        image = rng.random((problem.batch, problem.height, problem.width, problem.in_channels), dtype=np.float32)
    else:
        image = _picture(cell, path)
    weights = problem_mod.make_weights(cell.filter, problem.out_channels, problem.in_channels,
                                       problem.filter_size, seed)
    return ConvOperands(problem, image, weights)
