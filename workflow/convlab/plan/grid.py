"""The grid: every cell of every enabled experiment family, from the config.

Each family (convlab.plan.families) turns its config section into problems; the grid crosses them
with the family's kernels and each kernel's tunables, and checks that the result is sound.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from convlab.plan.cell import UNLABELLED, Cell
from convlab.plan.config import ConfigError
from convlab.plan.families import FAMILIES
from convlab.plan.overrides import as_int, kernel_options
from convlab.plan.problemcache import problem_fields
from convlab.plan.registry import KernelSpec, RegistryError, load_registry


# -- config sections -------------------------------------------------------------------------
def _section(config: dict, family: str, backend: str) -> dict:
    """The family's section, with the cpu backend's smaller grid applied."""
    section = dict(config[family])
    section["sizes_key"] = f"{family}.sizes"
    if backend == "cpu":
        overrides, sizes_key = FAMILIES[family].cpu_overrides(config)
        section.update(overrides)
        if sizes_key:
            section["sizes_key"] = sizes_key
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


def family_cells(config: dict, family: str, backend: str, registry: dict[str, KernelSpec],
                 offered: dict[str, set[int]] | None = None, device: str = UNLABELLED) -> list[Cell]:
    """The family's cells. ``offered`` collects, per kernel, the sizes the grid offers it."""
    section = _section(config, family, backend)
    if not section["enabled"]:
        return []
    problems = list(FAMILIES[family].problems(section, config))
    size_overrides = FAMILIES[family].size_overrides
    cells = []
    for name in _kernels(section, family, registry):
        spec = registry[name]
        if backend not in spec.backends():
            continue  # e.g. a GPU-only kernel with no cpu twin
        overrides = config["kernels"].get(name, {})
        tunables, settings = kernel_options(spec, backend, overrides)
        only_sizes = [as_int(v) for v in overrides.get("sizes", [])]
        if offered is not None and size_overrides:
            offered.setdefault(name, set()).update(fields["size"] for fields in problems)
        keys = sorted(tunables)
        for fields in problems:
            if only_sizes and size_overrides and fields["size"] not in only_sizes:
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
    """The configured gallery size if the gallery's family has it, else the largest of its sizes below
    it (the smallest where none is)."""
    sizes = sorted({cell.size for cell in cells if FAMILIES[cell.experiment].gallery})
    if not sizes:
        return None
    below = [s for s in sizes if s <= config["gallery"]["size"]]
    return max(below) if below else min(sizes)


def problem_ranks(cells: list[Cell]) -> dict[str, float]:
    """Each cell's place in the measuring order, in (0, 1): the cells of one problem share one value,
    the problems in the grid's order from near 1 down. Scheduled by it, a run measures a problem's
    cells one after another, so that a measurement worker makes the problem's operands, device
    inputs and reference once (convlab.plan.problemcache) instead of each time another problem
    came between them. The same problem under each device label has the same rank."""
    ranks: dict[tuple, int] = {}
    for cell in cells:
        ranks.setdefault((cell.image, *problem_fields(cell)), len(ranks))
    count = len(ranks)
    return {cell.path: (count - ranks[(cell.image, *problem_fields(cell))]) / (count + 1) for cell in cells}
