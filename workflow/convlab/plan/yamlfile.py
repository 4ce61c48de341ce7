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


def yaml_problem(error: yaml.YAMLError) -> str:
    """A YAML error in one line: what is wrong and where (1-based line and column)."""
    if not isinstance(error, yaml.MarkedYAMLError) or error.problem_mark is None:
        return " ".join(str(error).split())
    mark = error.problem_mark
    text = f"invalid YAML at line {mark.line + 1}, column {mark.column + 1}: {error.problem}"
    if error.context:
        where = error.context_mark
        text += f" ({error.context}" + (f" from line {where.line + 1}" if where is not None else "") + ")"
    return text
