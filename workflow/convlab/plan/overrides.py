"""Per-kernel config overrides (``kernels: {direct: {block: [16]}}``): their checks, and their
split into tunables and settings."""

from __future__ import annotations

import re
from typing import Any

from convlab.plan.config import ConfigError
from convlab.plan.registry import KernelSpec

MAX_BLOCK_EDGE = 1024  # CUDA's maxThreadsDim for x and y on every compute capability


def _is_positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def as_int(value: Any) -> Any:
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
        values = [as_int(value) for value in values]
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
            if not (isinstance(value, list) and value and all(_is_positive_int(as_int(v)) for v in value)):
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
