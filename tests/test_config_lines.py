"""A config mistake is one `error:` line and nothing else, with or without a dry run: a config file
Snakemake cannot read (a missing --configfile, YAML with a syntax error, an empty file, a list)
names the file and, for YAML, the line and column of the mistake; a value that fits none of the
forms its key takes (anyOf, oneOf) says which forms are valid."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from workflow_helpers import (
    REPO,
    TINY,
    assert_no_traceback,
    copy_repo,
    snakemake,
    snakemake_env,
    terminal_lines,
)

from convlab.pictures.header import FFMPEG_MAX_EDGE
from convlab.plan.config import load_schema, validate_config
from convlab.plan.configfile import check_config_files, read_config_file
from convlab.plan.schemawords import in_words
from convlab.status import ConfigError

WHERE = "config: "
KERNEL_LIST = "a non-empty list of distinct kernel names (kernels/registry.yaml)"


# -- values of none of a key's forms ----------------------------------------------------------
@pytest.mark.parametrize(("config", "line"), [
    ({"conv2d": {"kernels": []}}, f"conv2d.kernels: [] is not valid here; give all or {KERNEL_LIST}"),
    ({"gemm": {"kernels": "everything"}}, f"gemm.kernels: 'everything' is not valid here; give all or {KERNEL_LIST}"),
    ({"tiling": {"kernels": ["direct", "direct"]}},
     f"tiling.kernels: ['direct', 'direct'] is not valid here; give all or {KERNEL_LIST}"),
    ({"conv2d": {"padding": -1}}, "conv2d.padding: -1 is not valid here; give same or an integer from 0 to 64"),
    ({"conv2d": {"padding": "valid"}},
     "conv2d.padding: 'valid' is not valid here; give same or an integer from 0 to 64"),
], ids=["empty kernel list", "unknown word", "a kernel twice", "negative padding", "unknown padding word"])
def test_a_value_of_none_of_the_keys_forms_says_which_are_valid(config, line):
    with pytest.raises(ConfigError) as raised:
        validate_config(config)
    assert str(raised.value) == WHERE + line


@pytest.mark.parametrize(("schema", "words"), [
    ({"const": "all"}, "all"),
    ({"enum": ["warm", "cold"]}, "one of warm, cold"),
    ({"type": "integer", "minimum": 0, "maximum": 64}, "an integer from 0 to 64"),
    ({"type": "number", "exclusiveMinimum": 0}, "a number above 0"),
    ({"type": ["string", "null"]}, "a string or null"),
    ({"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 1, "uniqueItems": True},
     "a non-empty list of distinct integers at least 1"),
    ({"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}, "a list of lists of integers"),
    ({"oneOf": [{"const": "same"}, {"type": "integer"}]}, "same or an integer"),
    ({"type": "array", "title": "the kernels to run"}, "the kernels to run"),
])
def test_a_schema_in_words(schema, words):
    assert in_words(schema) == words


def test_every_form_of_every_key_is_said_in_words():
    """Each alternative of every anyOf/oneOf in the schema has words of its own, not a bare "a value"."""
    def alternatives(schema):
        if isinstance(schema, dict):
            for keyword in ("anyOf", "oneOf"):
                yield from schema.get(keyword, [])
            for value in schema.values():
                yield from alternatives(value)
        elif isinstance(schema, list):
            for value in schema:
                yield from alternatives(value)

    forms = list(alternatives(load_schema()))
    assert forms and all(in_words(form) not in ("a value", "values") for form in forms)


def test_source_size_stops_at_the_largest_square_ffmpeg_takes():
    assert load_schema()["properties"]["source_size"]["maximum"] == FFMPEG_MAX_EDGE
    validate_config({"source_size": FFMPEG_MAX_EDGE})
    with pytest.raises(ConfigError, match=rf"source_size: {FFMPEG_MAX_EDGE + 1} is greater than the maximum"):
        validate_config({"source_size": FFMPEG_MAX_EDGE + 1})


# -- config files -----------------------------------------------------------------------------
def broken_yaml(path: Path) -> str:
    """config/config.yaml with its backend line opening a list it never closes."""
    lines = path.read_text().splitlines()
    number = next(n for n, line in enumerate(lines, 1) if line.startswith("backend:"))
    lines[number - 1] = "backend: [auto"
    path.write_text("\n".join(lines) + "\n")
    following = next(n for n, line in enumerate(lines, 1) if n > number and ":" in line and not line.startswith("#"))
    column = lines[following - 1].index(":") + 1
    return (f"invalid YAML at line {following}, column {column}: expected ',' or ']', but got ':' "
            f"(while parsing a flow sequence from line {number})")


FILE_MISTAKES = {
    "missing": (lambda path: None, "no such file"),
    "empty": (lambda path: path.write_text(""), "holds no config keys (the file is empty or only comments); give a "
                                                 "mapping of config keys (workflow/schemas/config.schema.yaml)"),
    "a list": (lambda path: path.write_text("- backend: cpu\n"),
               "the top level must be a mapping of config keys (workflow/schemas/config.schema.yaml), not a list"),
    "a folder": (lambda path: path.mkdir(), "is a directory, not a file"),
    "not UTF-8": (lambda path: path.write_bytes(b"backend: cpu\nsource_image: caf\xe9.png\n"),
                  "cannot be read: byte 30 is not UTF-8 text"),
}


@pytest.mark.parametrize("case", FILE_MISTAKES)
def test_a_config_file_snakemake_cannot_read_is_one_line_naming_it(tmp_path, case):
    make, problem = FILE_MISTAKES[case]
    path = tmp_path / "mine.yaml"
    make(path)
    with pytest.raises(ConfigError) as raised:
        check_config_files([path], given_as="--configfile ")
    assert str(raised.value) == f"--configfile {path}: {problem}"


def test_a_config_file_with_a_yaml_mistake_names_its_line_and_column(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text((REPO / "config/config.yaml").read_text())
    problem = broken_yaml(path)
    with pytest.raises(ConfigError) as raised:
        read_config_file(path)
    assert str(raised.value) == f"{path}: {problem}"


@pytest.mark.parametrize(("text", "problem"), [
    ("backend: cpu\nconv2d:\n  sizes: [64]\nconv2d:\n  sizes: [128]\n",
     "invalid YAML at line 4, column 1: the key 'conv2d' is given twice (lines 2 and 4): keep one"),
    ("conv2d:\n  sizes: [64]\n  strides: [1]\n  sizes: [128]\n",
     "invalid YAML at line 4, column 3: the key 'sizes' is given twice (lines 2 and 4): keep one"),
    ('{"backend": "cpu", "conv2d": {"sizes": [64], "sizes": [128]}}',
     "the key 'sizes' is given twice in one object: keep one"),
])
def test_a_key_given_twice_is_one_line_not_a_silent_last_one(tmp_path, text, problem):
    """YAML and JSON let the last of two equal keys win: another grid would run than the user reads."""
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        check_config_files([path], given_as="--configfile ")
    assert str(raised.value) == f"--configfile {path}: {problem}"


def test_json_and_empty_files_read_as_snakemake_reads_them(tmp_path):
    (tmp_path / "tabs.json").write_text('{\n\t"backend": "cpu"\n}\n')  # JSON, though tabs are no YAML indentation
    (tmp_path / "empty.yaml").write_text("# nothing here\n")
    assert read_config_file(tmp_path / "tabs.json") == {"backend": "cpu"}
    assert read_config_file(tmp_path / "empty.yaml") == {}
    check_config_files([tmp_path / "tabs.json", REPO / TINY])


# -- what a run prints ------------------------------------------------------------------------
RUN_MODES = {"real run": (), "dry run": ("--dry-run",)}


@pytest.mark.pipeline
@pytest.mark.parametrize("mode", RUN_MODES)
def test_a_missing_configfile_is_its_one_line(tmp_path, mode):
    repo = copy_repo(tmp_path / "repo")
    result = snakemake(repo, 1, *RUN_MODES[mode], configfile="missing.yaml", check=False)
    assert result.returncode != 0
    assert_no_traceback(result)
    assert terminal_lines(result) == [
        "error: --configfile missing.yaml: no such file (a relative path starts at the directory snakemake runs in)"]
    assert not list(repo.glob(".snakemake/log/*")), "a complete log or a traceback kept for one line"


@pytest.mark.pipeline
@pytest.mark.parametrize("mode", RUN_MODES)
def test_a_yaml_mistake_in_the_default_config_is_its_one_line(tmp_path, mode):
    repo = copy_repo(tmp_path / "repo")
    problem = broken_yaml(repo / "config/config.yaml")
    result = snakemake(repo, 1, *RUN_MODES[mode], configfile=TINY, check=False)
    assert result.returncode != 0
    assert_no_traceback(result)
    assert terminal_lines(result) == [f"error: config/config.yaml: {problem}"]


@pytest.mark.pipeline
def test_a_yaml_mistake_in_a_configfile_is_its_one_line(tmp_path):
    repo = copy_repo(tmp_path / "repo")
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump({"backend": "cpu"}) + "conv2d:\n  sizes: [64\n  strides: [1]\n")
    result = snakemake(repo, 1, configfile=str(mine), check=False)
    assert result.returncode != 0
    assert_no_traceback(result)
    assert terminal_lines(result) == [
        f"error: --configfile {mine}: invalid YAML at line 4, column 10: expected ',' or ']', but got ':' "
        "(while parsing a flow sequence from line 3)"]


@pytest.mark.pipeline
def test_without_the_default_config_a_run_needs_a_configfile(tmp_path):
    """As Snakemake has it: the default config may be missing when --configfile gives one."""
    repo = copy_repo(tmp_path / "repo")
    (repo / "config/config.yaml").unlink()
    assert snakemake(repo, 1, "--dry-run", configfile=TINY).returncode == 0
    alone = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--dry-run"], cwd=repo,
                           env=snakemake_env(repo), capture_output=True, text=True, timeout=300)
    assert alone.returncode != 0
    assert_no_traceback(alone)
    assert terminal_lines(alone) == [
        "error: config/config.yaml: no such file (a relative path starts at the directory snakemake runs in)"]
