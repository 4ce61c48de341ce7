"""Load and validate the pipeline configuration (JSON schema with defaults)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from convlab.paths import SCHEMA_PATH
from convlab.plan.configfile import read_config_file
from convlab.plan.families import FAMILIES
from convlab.plan.schemawords import error_message
from convlab.plan.yamlfile import safe_load
from convlab.status import ConfigError  # the status module's: the families raise it and never import this one


def family_schema_path(family: str) -> Path:
    """Where an experiment family's config section is specified."""
    return SCHEMA_PATH.parent / "families" / f"{family}.schema.yaml"


def load_schema(path: Path = SCHEMA_PATH) -> dict:
    """The config schema: the file's own keys, and each experiment family's section (and its
    cpu overrides) from the family's schema file, so that a new family brings its own."""
    with open(path) as handle:
        schema = safe_load(handle)
    for family in FAMILIES:
        with open(family_schema_path(family)) as handle:
            fragment = safe_load(handle)
        schema["properties"][family] = fragment["section"]
        if "cpu" in fragment:
            schema["properties"]["cpu"]["properties"][family] = fragment["cpu"]
    return schema


def _fill_defaults(instance: Any, schema: dict) -> None:
    """Insert schema defaults for missing keys, depth first, without sharing objects."""
    if not isinstance(instance, dict):
        return
    for key, subschema in schema.get("properties", {}).items():
        if key not in instance and "default" in subschema:
            instance[key] = copy.deepcopy(subschema["default"])
        if key in instance:
            _fill_defaults(instance[key], subschema)


def _allows_string(schema: dict) -> bool:
    kinds = schema.get("type", "string")
    return "string" in (kinds if isinstance(kinds, list) else [kinds]) or "enum" in schema


def _parse_command_line_values(instance: Any, schema: dict) -> None:
    """Snakemake's --config passes a list or mapping (devices=[h100,h200]) as its text: read
    such text as YAML where the key takes no strings, so that it validates as written."""
    if isinstance(instance, list):
        # a mapping or list given whole (conv2d='{"sizes": [64]}') comes with every value inside as text
        items = schema.get("items")
        if isinstance(items, dict):
            for index, value in enumerate(instance):
                instance[index] = _as_written(value, items)
                _parse_command_line_values(instance[index], items)
        return
    if not isinstance(instance, dict):
        return
    for key, subschema in schema.get("properties", {}).items():
        if key in instance:
            instance[key] = _as_written(instance[key], subschema)
            _parse_command_line_values(instance[key], subschema)


def _as_written(value: Any, schema: dict) -> Any:
    """``value`` read as YAML where it is text and its key takes no strings; else as it is."""
    if isinstance(value, str) and not _allows_string(schema):
        try:
            return safe_load(value)
        except yaml.YAMLError:
            pass  # left as written: validation names the key
    return value


def _key_path(error) -> str:  # a jsonschema.ValidationError
    return ".".join(str(part) for part in error.absolute_path) or "(top level)"


def validate_config(config: dict, source: str = "config", schema: dict | None = None) -> dict:
    """Return a validated copy of ``config`` with every default filled in.

    Raises ConfigError naming the offending key (and the file) on the first problem.
    """
    import jsonschema  # here, not at the top: a cell job reads its settings as JSON and never validates

    schema = schema or load_schema()
    filled = copy.deepcopy(config) if config else {}
    _parse_command_line_values(filled, schema)
    _fill_defaults(filled, schema)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(filled), key=lambda e: list(e.absolute_path))
    if errors:
        # one line: the first problem with its key, then how many more (each named)
        problems = [f"{_key_path(e)}: {error_message(e)}" for e in errors]
        more = f" (and {len(problems) - 1} more: {'; '.join(problems[1:])})" if len(problems) > 1 else ""
        raise ConfigError(f"{source}: {problems[0]}{more}")
    return filled


def laid(base: dict, update: dict) -> dict:
    """``update`` laid over ``base`` key by key, mappings merged, as Snakemake lays config files."""
    result = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = laid(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def validate_run_config(config: dict, default_file: str | None, configfiles: Sequence[str | Path],
                        overrides: dict) -> dict:
    """A run's config (Snakemake's: ``default_file``, each of ``configfiles`` laid over it, then the
    --config ``overrides``) validated, as validate_config does. A mistake is named by the layer that
    made it: the first whose laying makes the config invalid (a --configfile's own mistake names that
    file, not the default one it was laid over)."""
    layers = [(f"--configfile {path}", lambda path=path: read_config_file(path)) for path in configfiles]
    if default_file:
        layers.insert(0, (str(default_file), lambda: read_config_file(default_file)))
    if overrides:
        layers.append(("--config", lambda: dict(overrides)))
    names = " and ".join(name for name, _ in layers) or "no config file"
    try:
        return validate_config(config, source=f"config ({names})")
    except ConfigError as whole:
        so_far: dict = {}
        for name, read in layers:
            so_far = laid(so_far, read())
            try:
                validate_config(so_far, source=name)
            except ConfigError as error:
                raise error from None
        raise whole from None


def load_config(path: str | Path, overrides: dict | None = None) -> dict:
    """Read a YAML config file, apply overrides (top-level merge), validate."""
    raw = read_config_file(path)
    raw.update(overrides or {})
    return validate_config(raw, source=str(path))
