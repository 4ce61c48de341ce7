"""YAML parsed by libyaml where PyYAML was built with it (about 8 times faster than the pure-Python
parser): every run parses the kernel descriptions, the registries and the config schemas while
Snakemake builds its DAG, so their parse is part of every run's start and of every no-op."""

from __future__ import annotations

from typing import IO, Any

import yaml

FAST_LOADER = getattr(yaml, "CSafeLoader", None)


def safe_load(stream: str | bytes | IO) -> Any:
    """yaml.safe_load, parsed by libyaml when PyYAML has it. Text it refuses is parsed again by the
    pure-Python loader, whose error says what is wrong in plainer words, with the same line and column."""
    text = stream if isinstance(stream, (str, bytes)) else stream.read()
    if FAST_LOADER is not None:
        try:
            return yaml.load(text, Loader=FAST_LOADER)
        except yaml.YAMLError:
            pass
    return yaml.load(text, Loader=yaml.SafeLoader)
