"""Config files read as Snakemake reads them (JSON, else YAML; a mapping at the top), so that one it
cannot read is refused first with one line naming the file and, for a YAML error, its line and
column: Snakemake's own error names neither for a file it cannot parse, and is a traceback for a
--configfile that does not exist."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from convlab.plan.yamlfile import safe_load, yaml_problem
from convlab.status import ConfigError, UserError

# The config every run starts from (the Snakefile's `configfile:`), relative to where snakemake runs.
DEFAULT_CONFIG_FILE = "config/config.yaml"
RELATIVE = " (a relative path starts at the directory snakemake runs in)"


class DuplicateKey(ValueError):
    """A JSON object that gives one key twice (the message names it)."""


def unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose every key is given once: the last of two equal keys would win silently."""
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise DuplicateKey(f"the key {key!r} is given twice in one object: keep one")
        seen[key] = value
    return seen


def _parsed(path: str | Path, name: str) -> Any:
    """The file's content: JSON when it is JSON, else YAML (None for an empty file)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{name}: no such file{'' if Path(path).is_absolute() else RELATIVE}") from None
    except IsADirectoryError:
        raise ConfigError(f"{name}: is a directory, not a file") from None
    except OSError as error:
        raise ConfigError(f"{name}: cannot be read ({error.strerror or error})") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{name}: cannot be read: byte {error.start} is not UTF-8 text") from None
    try:
        return json.loads(text, object_pairs_hook=unique_object)
    except DuplicateKey as error:
        raise ConfigError(f"{name}: {error}") from None
    except ValueError:
        pass  # not JSON: YAML, as Snakemake tries next
    try:
        return safe_load(text)
    except yaml.YAMLError as error:
        raise ConfigError(f"{name}: {yaml_problem(error)}") from None


def _mapping(raw: Any, name: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ConfigError(f"{name}: the top level must be a mapping of config keys "
                          f"(workflow/schemas/config.schema.yaml), not a {type(raw).__name__}")
    return raw


def read_config_file(path: str | Path, given_as: str = "") -> dict[str, Any]:
    """The file's top-level mapping ({} for an empty file). Raises ConfigError naming the file
    (after ``given_as``, e.g. "--configfile ") for one that is missing, unreadable, not JSON or
    YAML, or not a mapping."""
    name = f"{given_as}{path}"
    raw = _parsed(path, name)
    return {} if raw is None else _mapping(raw, name)


def check_config_files(paths: Iterable[str | Path], given_as: str = "") -> None:
    """Each file read as Snakemake will read it: ConfigError for the first it would fail on,
    an empty one included (Snakemake wants a mapping even there)."""
    for path in paths:
        name = f"{given_as}{path}"
        raw = _parsed(path, name)
        if raw is None:
            raise ConfigError(f"{name}: holds no config keys (the file is empty or only comments); "
                              "give a mapping of config keys (workflow/schemas/config.schema.yaml)")
        _mapping(raw, name)


def check_working_directory(workflow_dir: str | Path, here: str | Path | None = None) -> None:
    """UserError unless Snakemake runs in the checkout whose Snakefile it read (``workflow_dir``):
    the rules read the kernels and the config relative to where they run."""
    here = Path(here or Path.cwd()).resolve()
    workflow_dir = Path(workflow_dir).resolve()
    if here != workflow_dir and not (here / "kernels" / "registry.yaml").is_file():
        raise UserError(f"snakemake runs in {here}, but the workflow's files (kernels/, config/) are in "
                        f"{workflow_dir}: run it there (cd {workflow_dir}), or add --directory {workflow_dir}")
