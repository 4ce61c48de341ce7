"""The cell grid: every (experiment, kernel, size, stride, filter, tunables) combination that applies."""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from convlab.config import ConfigError
from convlab.registry import KernelSpec, RegistryError, load_registry

CELLS_ROOT = "results/cells"
MAX_BLOCK_EDGE = 1024  # CUDA's maxThreadsDim for x and y on every compute capability
# One readable path per cell, Paramspace style; also the cell rule's output pattern.
CELL_PATH = (
    CELLS_ROOT + "/{backend}/{experiment}/kernel~{kernel}/size~{size}/stride~{stride}"
    "/filter~{filter_size}/{variant}.csv"
)


@dataclass(frozen=True)
class Cell:
    """One measurement: one kernel on one problem with one launch configuration."""

    experiment: str
    backend: str
    kernel: str
    size: int
    stride: int
    filter_size: int
    padding: int
    in_channels: int
    out_channels: int
    filter: str
    tunables: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    timing: dict[str, Any] = field(default_factory=dict)
    verify: dict[str, Any] = field(default_factory=dict)

    @property
    def variant(self) -> str:
        """The tunables as a path component, e.g. 'block~16', or 'default'."""
        return "_".join(f"{k}~{v}" for k, v in sorted(self.tunables.items())) or "default"

    @property
    def path(self) -> str:
        return CELL_PATH.format(backend=self.backend, experiment=self.experiment, kernel=self.kernel,
                                size=self.size, stride=self.stride, filter_size=self.filter_size,
                                variant=self.variant)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Cell:
        return cls(**json.loads(text))


def resolve_padding(padding: Any, filter_size: int) -> int:
    return (filter_size - 1) // 2 if padding == "same" else int(padding)


def _is_positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _as_int(value: Any) -> Any:
    """'16' -> 16: Snakemake's --config reads nested values as strings (kernels={'direct':
    {'block': [16]}}), and such a cell must be the same cell as one from a YAML config."""
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
        return int(value)
    return value


def check_tunable_values(spec: KernelSpec, key: str, values: list) -> list:
    """Override values of a tunable must be of its description's kind. Where the description's
    values are integers (``block``: a thread-block edge), every value must be an integer >= 1;
    where they are names (``plan``), one of those names, since the code knows no others. A
    ``block`` edge over 1024 exceeds CUDA's per-dimension limit on every GPU and is a config
    error; a legal edge whose block is too large in total (64 x 64 = 4096 threads, seed 001) is
    the experiment: its refused launch is recorded as ``invalid_config``. Returns the values,
    integers as such."""
    where = f"kernels.{spec.name}.{key}"
    if not values:
        raise ConfigError(f"{where}: give at least one value")
    defaults = spec.tunables.get(key) or []
    if defaults and all(_is_positive_int(v) for v in defaults):
        values = [_as_int(value) for value in values]
        for value in values:
            if not _is_positive_int(value):
                raise ConfigError(
                    f"{where}: {value!r} is not a positive integer; give values >= 1 such as "
                    f"{defaults} (from {spec.description_path.name})")
            if key == "block" and value > MAX_BLOCK_EDGE:
                raise ConfigError(
                    f"{where}: {value} exceeds CUDA's limit of {MAX_BLOCK_EDGE} threads per block "
                    f"dimension on every GPU; use at most {MAX_BLOCK_EDGE} (64 is kept as an experiment: "
                    "its 64x64 launch is refused and recorded as invalid_config)")
    elif defaults and all(isinstance(v, str) for v in defaults):
        for value in values:
            if value not in defaults:
                raise ConfigError(f"{where}: {value!r} is not one of {defaults} (from {spec.description_path.name})")
    return values


def kernel_options(spec: KernelSpec, backend: str, overrides: dict) -> tuple[dict, dict]:
    """Split a kernel's config overrides into tunable value lists and plain settings
    (``sizes``, which limits the kernel to some of the experiment's sizes, is read by the grid).
    Tunable values are checked on every backend, also where the backend ignores them."""
    tunables = spec.tunables_for(backend)
    settings = dict(spec.settings)
    for key, value in overrides.items():
        if key == "sizes":
            if not (isinstance(value, list) and value and all(_is_positive_int(_as_int(v)) for v in value)):
                raise ConfigError(f"kernels.{spec.name}.sizes: give a list of image sizes (integers >= 1)")
        elif key in spec.tunables:
            values = check_tunable_values(spec, key, value if isinstance(value, list) else [value])
            if key in tunables:
                tunables[key] = values
        elif key in spec.settings:
            settings[key] = value
        else:
            known = sorted(set(spec.tunables) | set(spec.settings) | {"sizes"})
            raise ConfigError(
                f"kernels.{spec.name}.{key}: not a setting of kernel {spec.name!r} "
                f"(its settings: {', '.join(known) or 'none'}; see {spec.description_path.name})"
            )
    return tunables, settings


def conv2d_cells(config: dict, backend: str) -> list[Cell]:
    section = config["conv2d"]
    if not section["enabled"]:
        return []
    registry = load_registry()
    sizes = config["cpu"]["sizes"] if backend == "cpu" else section["sizes"]
    timing = dict(config["timing"])
    if backend == "cpu":
        timing["budget_s"] = config["cpu"]["budget_s"]
    for k in section["filter_sizes"]:
        if k % 2 == 0:
            raise ConfigError(f"conv2d.filter_sizes: {k} is even; use odd sizes (3, 5, 7, ...)")
        for size in sizes:
            pad = resolve_padding(section["padding"], k)
            if size + 2 * pad < k:
                raise ConfigError(
                    f"conv2d.filter_sizes: a {k}x{k} filter is larger than a {size}x{size} image "
                    f"with padding {pad}; drop that size or filter"
                )
    kernels = list(registry) if section["kernels"] == "all" else section["kernels"]
    unknown = [name for name in kernels if name not in registry]
    if unknown:
        raise ConfigError(
            f"conv2d.kernels: unknown kernel(s) {', '.join(unknown)}; registered in "
            f"kernels/registry.yaml: {', '.join(sorted(registry))}"
        )
    for name in config["kernels"]:
        if name not in registry:
            raise ConfigError(f"kernels.{name}: no such kernel in kernels/registry.yaml")

    cells = []
    for name in kernels:
        spec = registry[name]
        if backend not in spec.backends():
            continue  # e.g. a GPU-only kernel with no cpu twin
        overrides = config["kernels"].get(name, {})
        tunables, settings = kernel_options(spec, backend, overrides)
        kernel_sizes = [s for s in sizes if s in [_as_int(v) for v in overrides.get("sizes", sizes)]]
        keys = sorted(tunables)
        for size, stride, k in itertools.product(kernel_sizes, section["strides"], section["filter_sizes"]):
            for values in itertools.product(*(tunables[key] for key in keys)):
                cells.append(
                    Cell(
                        experiment="conv2d",
                        backend=backend,
                        kernel=name,
                        size=size,
                        stride=stride,
                        filter_size=k,
                        padding=resolve_padding(section["padding"], k),
                        in_channels=3,
                        out_channels=section["out_channels"],
                        filter=section["filter"],
                        tunables=dict(zip(keys, values)),
                        settings=settings,
                        timing=timing,
                        verify=config["verify"],
                    )
                )
    return cells


def build_cells(config: dict, backend: str) -> list[Cell]:
    """Every cell of every enabled experiment, for a resolved backend (cuda or cpu)."""
    if backend not in ("cuda", "cpu"):
        raise ValueError(f"backend must be resolved to cuda or cpu, got {backend!r}")
    try:
        cells = conv2d_cells(config, backend)
    except RegistryError as error:
        raise ConfigError(str(error)) from error
    paths = [cell.path for cell in cells]
    if len(set(paths)) != len(paths):
        raise ConfigError("two cells map to the same result path; check for repeated sizes or strides")
    return cells


def image_sizes(config: dict, backend: str) -> list[int]:
    """The downscaled image sizes the active grid needs."""
    sizes = config["cpu"]["sizes"] if backend == "cpu" else config["conv2d"]["sizes"]
    return sorted(set(sizes))


def gallery_size(config: dict, backend: str) -> int:
    """The configured gallery size if the grid has it, else the largest size below it."""
    sizes = image_sizes(config, backend)
    wanted = config["gallery"]["size"]
    below = [s for s in sizes if s <= wanted]
    return max(below) if below else min(sizes)
