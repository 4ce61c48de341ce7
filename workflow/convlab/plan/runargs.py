"""Checks of the arguments of ``python -m convlab run``, before an image is read or a cell built.

A bad argument is one ConfigError naming the option (the command line prints it as one
``error:`` line, exit status 2). The limits are the ones the grid itself uses: sizes, strides
and filter sizes from the config schema, the kernels and their tunables from the registry and
the kernels' descriptions, the block edge from convlab.plan.overrides. A legal value whose launch the GPU
refuses (a 64x64 block, 4096 threads) is not an argument error: its cell runs and records
``invalid_config``, as in the grid.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convlab.paths import REPO_ROOT, SCHEMA_PATH
from convlab.plan.config import ConfigError, family_schema_path, load_schema
from convlab.plan.families import DEFAULT_FAMILY, FAMILIES
from convlab.plan.overrides import check_tunable_values
from convlab.plan.registry import KernelSpec, RegistryError, load_registry

# `run` builds cells of this family only (its handler, convlab.app.handlers.cells, switches the
# others off).
FAMILY = DEFAULT_FAMILY


def schema_range(section: str, key: str, schema: dict | None = None) -> tuple[int, int]:
    """The (minimum, maximum) the config schema allows for one item of ``<section>.<key>``, so
    that a value given by hand is held to the same limits as one given in the config."""
    schema = schema or load_schema()
    items = schema["properties"][section]["properties"][key]["items"]
    return items["minimum"], items["maximum"]


def schema_file(section: str) -> Path:
    return family_schema_path(section) if section in FAMILIES else SCHEMA_PATH


def _check_range(option: str, value: int, section: str, key: str, schema: dict) -> None:
    low, high = schema_range(section, key, schema)
    if not low <= value <= high:
        raise ConfigError(f"{option} {value}: give an integer from {low} to {high} "
                          f"(the limits of {section}.{key} in {schema_file(section).relative_to(REPO_ROOT)})")


def check_problem(size: int, stride: int, filter_size: int | None, backend: str,
                  schema: dict | None = None) -> None:
    """The image size, stride and filter size, within the config schema's limits; a filter odd,
    as the grid requires (its padding centres it on the output pixel)."""
    schema = schema or load_schema()
    # the cpu backend takes its sizes from its own config list, which has its own limits
    _check_range("--size", size, "cpu" if backend == "cpu" else FAMILY, "sizes", schema)
    _check_range("--stride", stride, FAMILY, "strides", schema)
    if filter_size is not None:
        _check_range("--filter-size", filter_size, FAMILY, "filter_sizes", schema)
        if filter_size % 2 == 0:
            raise ConfigError(f"--filter-size {filter_size}: give an odd size (3, 5, 7, ...)")


def runnable_kernels(registry: dict[str, KernelSpec], backend: str) -> list[str]:
    """The kernels `run` can measure on ``backend``: those of its family with code there."""
    return sorted(name for name, spec in registry.items()
                  if FAMILY in spec.experiments and backend in spec.backends())


def check_kernel(name: str, backend: str, registry: dict[str, KernelSpec] | None = None) -> KernelSpec:
    """The kernel's description, or one error that lists the kernels that can run here."""
    if registry is None:
        try:
            registry = load_registry()
        except RegistryError as error:
            raise ConfigError(str(error)) from error
    valid = f"on the {backend} backend, run takes {', '.join(runnable_kernels(registry, backend))}"
    spec = registry.get(name)
    if spec is None:
        raise ConfigError(f"--kernel {name}: unknown kernel (not in kernels/registry.yaml); {valid}")
    if FAMILY not in spec.experiments:
        raise ConfigError(f"--kernel {name}: a {'/'.join(spec.experiments)} kernel, and run measures "
                          f"{FAMILY} cells only; {valid}")
    if backend not in spec.backends():
        raise ConfigError(f"--kernel {name}: has no cpu twin, so it runs on the cuda backend only; {valid}")
    return spec


def check_tunable(spec: KernelSpec, name: str, value: Any, backend: str) -> None:
    """A tunable given by hand (``--block``, ``--plan``) must be one the kernel has on this
    backend: otherwise the cells would silently run every variant, or the cpu twin's single
    ``default`` one, and print rows for something that was not asked for."""
    option = f"--{name} {value}"
    if name not in spec.tunables:
        have = "; ".join(f"{key} {'/'.join(map(str, values))}" for key, values in spec.tunables.items())
        raise ConfigError(f"{option}: kernel {spec.name} has no {name} tunable (its tunables: {have or 'none'}; "
                          f"see kernels/{spec.description_path.name}); leave out --{name}")
    if name not in spec.tunables_for(backend):
        raise ConfigError(f"{option}: does not apply on the {backend} backend, where {spec.name} runs as its cpu "
                          f"twin ({spec.cpu_twin}), which has no launch tunables; leave out --{name}, "
                          "or use --backend cuda on a GPU machine")
    # The grid's own check of override values (a block edge from 1 to CUDA's per-dimension
    # limit, a plan the kernel knows), with the option named instead of the config key.
    try:
        check_tunable_values(spec, name, [value])
    except ConfigError as error:
        raise ConfigError(f"{option}: {str(error).removeprefix(f'kernels.{spec.name}.{name}: ')}") from None


def check_run_args(kernel: str, size: int, stride: int, filter_size: int | None,
                   tunables: dict[str, Any], backend: str) -> KernelSpec:
    """Every argument of one ``run``, on a resolved backend (cuda or cpu); ``tunables`` maps a
    tunable's name to the value given, None where the option was left out. Returns the kernel."""
    spec = check_kernel(kernel, backend)
    check_problem(size, stride, filter_size, backend)
    for name, value in tunables.items():
        if value is not None:
            check_tunable(spec, name, value, backend)
    return spec
