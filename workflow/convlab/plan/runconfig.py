"""The config a `snakemake` run reads: config/config.yaml (the Snakefile's `configfile:`), each
`--configfile` laid over it key by key as Snakemake lays them (a nested mapping is merged, any
other value replaced), validated with every default filled in."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from convlab.plan.config import validate_config
from convlab.plan.configfile import DEFAULT_CONFIG_FILE, read_config_file


def laid_over(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` laid over ``base``: nested mappings merged, every other value replaced."""
    merged = dict(base)
    for key, value in over.items():
        below = merged.get(key)
        merged[key] = laid_over(below, value) if isinstance(value, Mapping) and isinstance(below, Mapping) else value
    return merged


def run_config(configfiles: Sequence[str | Path] = ()) -> tuple[dict[str, Any], str]:
    """The validated config of `snakemake --configfile FILE ...` run here, and the files it was
    read from, as one text (for messages). ConfigError names the file at fault."""
    raw = read_config_file(DEFAULT_CONFIG_FILE)
    for path in configfiles:
        raw = laid_over(raw, read_config_file(path, "--configfile "))
    source = " + ".join([DEFAULT_CONFIG_FILE, *map(str, configfiles)])
    return validate_config(raw, source=source), source
