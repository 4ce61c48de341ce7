"""YAML parsed by libyaml where PyYAML was built with it (about 8 times faster than the pure-Python
parser): every run parses the kernel descriptions, the registries and the config schemas while
Snakemake builds its DAG, so their parse is part of every run's start and of every no-op."""

from __future__ import annotations

from collections.abc import Hashable
from typing import IO, Any

import yaml

MERGE_KEY = "<<"


def unique_mapping(loader: yaml.constructor.SafeConstructor, node: yaml.MappingNode, deep: bool = False) -> dict:
    """A mapping whose every key is given once: YAML lets the last of two equal keys win silently, so
    that `conv2d:` written twice in a config would run another grid than the one the user reads."""
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key == MERGE_KEY or not isinstance(key, Hashable):
            continue  # merged keys are the merge's; an unhashable key is the constructor's own error
        line = key_node.start_mark.line + 1
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"the key {key!r} is given twice (lines {seen[key]} and {line}): keep one", key_node.start_mark)
        seen[key] = line
    return yaml.constructor.SafeConstructor.construct_mapping(loader, node, deep=deep)


class UniqueKeysLoader(yaml.SafeLoader):
    """The pure-Python safe loader, refusing a key given twice in one mapping."""


UniqueKeysLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, unique_mapping)
FAST_LOADER: type | None = None
if hasattr(yaml, "CSafeLoader"):
    class UniqueKeysFastLoader(yaml.CSafeLoader):
        """libyaml's safe loader, refusing a key given twice in one mapping."""

    UniqueKeysFastLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, unique_mapping)
    FAST_LOADER = UniqueKeysFastLoader


def safe_load(stream: str | bytes | IO) -> Any:
    """yaml.safe_load, parsed by libyaml when PyYAML has it, refusing a key given twice in one mapping.
    Text it refuses is parsed again by the pure-Python loader, whose error says what is wrong in
    plainer words, with the same line and column."""
    text = stream if isinstance(stream, (str, bytes)) else stream.read()
    if FAST_LOADER is not None:
        try:
            return yaml.load(text, Loader=FAST_LOADER)
        except yaml.YAMLError:
            pass
    return yaml.load(text, Loader=UniqueKeysLoader)


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
