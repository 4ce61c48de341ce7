"""Every bad input the README lists ("Bad input") is answered on the terminal with one exact
`error:` line and no traceback; conversions of a usable picture with `warning:` lines; hand
runs and comparisons name only files they write, and never overwrite another comparison's.

Covered elsewhere, not repeated here: `python -m convlab run` arguments (tests/test_cli.py), a
size larger than source_size (tests/test_integrity.py), a damaged row (tests/test_integrity.py).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import pandas as pd
import pytest
import yaml
from workflow_helpers import (
    REPO,
    TINY,
    assert_no_traceback,
    assert_refused_before_the_dag,
    convlab,
    copy_repo,
    snakemake,
    terminal_lines,
)

from convlab.history.verdictpolicy import DRIFT_FLOOR
from convlab.measure.row import COLUMNS
from convlab.pictures import source as data
from convlab.plan.config import laid
from convlab.plan.configfile import DEFAULT_CONFIG_FILE
from convlab.plan.registry import DescriptionError, load_registry
from convlab.report.comparepage import compare_paths
from convlab.snakefile.prologue import RunRefused, source_picture
from convlab.snakefile.runplan import RunPlan
from convlab.status import UserError

# ---------------------------------------------------------------------------------------------
# A kernel description that cannot be read


def broken_yaml(path: Path) -> str:
    """A mapping value inside a plain scalar's continuation: PyYAML's 'mapping values are not
    allowed here', at the appended line's 6th column."""
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines, "name: direct", "  bad: ["]) + "\n")
    return f"invalid YAML at line {len(lines) + 2}, column 6: mapping values are not allowed here"


def list_at_top(path: Path) -> str:
    path.write_text("- name: direct\n")
    return "the top level must be a mapping of keys (see kernels/README.md), not a list"


def scalar_tunables(path: Path) -> str:
    path.write_text(path.read_text().replace("tunables:\n  block: [8, 16, 32]", "tunables: 5"))
    return "tunables must be a mapping, not 5"


def key_twice(path: Path) -> str:
    lines = path.read_text().splitlines()
    first = next(number for number, line in enumerate(lines, 1) if line.startswith("tunables:"))
    path.write_text("\n".join([*lines, "tunables: {block: [64]}"]) + "\n")
    return (f"invalid YAML at line {len(lines) + 1}, column 1: the key 'tunables' is given twice "
            f"(lines {first} and {len(lines) + 1}): keep one")


def word_for_a_block(path: Path) -> str:
    path.write_text(path.read_text().replace("block: [8, 16, 32]", "block: [eight]"))
    return "tunables.block must be positive whole numbers, not 'eight'"


def zero_block(path: Path) -> str:
    path.write_text(path.read_text().replace("block: [8, 16, 32]", "block: [8, 0]"))
    return "tunables.block must be positive whole numbers, not 0"


def no_stride(path: Path) -> str:
    path.write_text(path.read_text() + "supports:\n  stride: []\n")
    return "supports.stride is empty: give at least one value"


@pytest.mark.parametrize("damage", [broken_yaml, list_at_top, scalar_tunables, key_twice, word_for_a_block, zero_block,
                                    no_stride],
                         ids=lambda f: f.__name__)
def test_a_broken_description_is_one_line_naming_the_file(tmp_path, damage):
    folder = tmp_path / "kernels"
    folder.mkdir()
    (folder / "registry.yaml").write_text("kernels:\n  direct: direct.yaml\n")
    (folder / "direct.yaml").write_text((REPO / "kernels/direct.yaml").read_text())
    problem = damage(folder / "direct.yaml")
    with pytest.raises(DescriptionError) as raised:
        load_registry(folder)
    assert str(raised.value) == f"{folder / 'direct.yaml'}: {problem}"


def test_a_description_the_registry_names_but_lacks_is_one_line(tmp_path):
    (tmp_path / "registry.yaml").write_text("kernels:\n  ghost: ghost.yaml\n")
    with pytest.raises(DescriptionError) as raised:
        load_registry(tmp_path)
    assert str(raised.value) == (f"{tmp_path / 'registry.yaml'}: kernel 'ghost' names {tmp_path / 'ghost.yaml'}, "
                                 "which does not exist")


def test_a_hand_run_with_a_broken_extra_description_is_one_line(tmp_path):
    """Outside the DAG too: `run` loads the registry (here with an extra kernel folder)."""
    (tmp_path / "registry.yaml").write_text("kernels:\n  probe: probe.yaml\n")
    (tmp_path / "probe.yaml").write_text("name: probe\nsummary: [unclosed\n")
    result = convlab("run", "--kernel", "direct", "--size", "80", "--backend", "cpu",
                     CONVLAB_EXTRA_KERNELS=str(tmp_path))
    assert result.returncode == 2
    assert_no_traceback(result)
    assert result.stderr.splitlines() == [
        f"error: {tmp_path / 'probe.yaml'}: invalid YAML at line 3, column 1: expected ',' or ']', but got "
        "'<stream end>' (while parsing a flow sequence from line 2)"]


@pytest.mark.pipeline
@pytest.mark.parametrize("damage", [broken_yaml, list_at_top], ids=lambda f: f.__name__)
def test_a_broken_description_stops_the_dag_build_with_one_line(tmp_path, damage):
    repo = copy_repo(tmp_path / "repo")
    problem = damage(repo / "kernels/direct.yaml")
    result = snakemake(repo, 1, "--dry-run", check=False)
    assert result.returncode != 0
    assert_no_traceback(result)
    assert terminal_lines(result) == [f"error: kernels/direct.yaml: {problem}"]


# ---------------------------------------------------------------------------------------------
# The user's picture (config source_image)


def png(pixels: np.ndarray, colour_type: int) -> bytes:
    """An 8-bit PNG written by hand (OpenCV writes no grayscale-with-alpha PNG)."""
    height, width = pixels.shape[:2]

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    scanlines = b"".join(b"\x00" + pixels[row].tobytes() for row in range(height))
    return (data.PNG_SIGNATURE + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(scanlines)) + chunk(b"IEND", b""))


RGB_PNG = png(np.random.default_rng(1).integers(0, 256, (16, 16, 3), dtype=np.uint8), colour_type=2)
IDAT_AT = len(data.PNG_SIGNATURE) + 12 + 13  # after the signature and the 13-byte IHDR chunk


def missing(path: Path) -> str:
    return f"{path} does not exist (a relative path starts at the directory snakemake runs in)"


def empty(path: Path) -> str:
    path.write_bytes(b"")
    return f"{path}: the file is empty"


def not_a_picture(path: Path) -> str:
    path.write_text("this is not a picture\n")
    return f"{path}: OpenCV cannot decode this file (not a picture, or a truncated or corrupt one)"


def truncated_png(path: Path) -> str:
    path.write_bytes(RGB_PNG[:IDAT_AT + 20])
    (idat_length,) = struct.unpack(">I", RGB_PNG[IDAT_AT:IDAT_AT + 4])
    return (f"{path}: the PNG is truncated: its IDAT chunk at byte {IDAT_AT} needs {IDAT_AT + 12 + idat_length} "
            f"bytes, the file has {IDAT_AT + 20}")


def corrupt_png(path: Path) -> str:
    blob = bytearray(RGB_PNG)
    blob[IDAT_AT + 10] ^= 0xFF  # a byte of the image data: the chunk's CRC no longer matches
    path.write_bytes(bytes(blob))
    return f"{path}: the PNG is corrupt: its IDAT chunk at byte {IDAT_AT} fails the CRC check"


def float_samples(path: Path) -> str:
    assert cv2.imwrite(str(path), np.random.default_rng(2).random((16, 16, 3), dtype=np.float32))
    return f"{path}: its samples are float32 (32-bit); save it with 8- or 16-bit integer samples"


PICTURES: dict[str, tuple[str, Callable[[Path], str]]] = {
    "missing": ("photo.png", missing),
    "empty": ("photo.png", empty),
    "not a picture": ("photo.png", not_a_picture),
    "truncated PNG": ("photo.png", truncated_png),
    "corrupt PNG": ("photo.png", corrupt_png),
    "32-bit float": ("photo.tiff", float_samples),
}


def refusal(problem: str) -> str:
    return f"error: config source_image: {problem}; {data.SOURCE_ADVICE}"


@pytest.mark.parametrize("case", PICTURES)
def test_the_source_command_refuses_a_bad_picture_in_one_exact_line(tmp_path, case):
    name, make = PICTURES[case]
    picture = tmp_path / name
    problem = make(picture)
    result = convlab("source", "--size", "64", "--user-image", str(picture), "--out", str(tmp_path / "source_64.png"))
    assert result.returncode == 2
    assert_no_traceback(result)
    assert result.stderr.splitlines() == [refusal(problem)]


@pytest.mark.parametrize("case", PICTURES)
def test_the_runs_prologue_refuses_a_bad_picture_in_one_exact_line(tmp_path, monkeypatch, case):
    """The prologue's step, in-process: the run's one line, kept in the source step's log as if its
    job had run, and nothing made."""
    name, make = PICTURES[case]
    picture = tmp_path / name
    problem = make(picture)
    monkeypatch.chdir(REPO)
    given = {"source_image": str(picture)}  # --config source_image=...
    config = laid(yaml.safe_load((REPO / DEFAULT_CONFIG_FILE).read_text()), yaml.safe_load((REPO / TINY).read_text()))
    plan = RunPlan.build({**config, **given}, REPO, DEFAULT_CONFIG_FILE, [TINY], given)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RunRefused) as refused:
        source_picture(plan, dry_run=False)
    assert str(refused.value) == refusal(problem)
    assert (tmp_path / f"results/logs/data/source_{plan.config['source_size']}.log").read_text() == f"{refused.value}\n"
    assert not (tmp_path / "data").exists()


# Through Snakemake, one picture that is not there and one that does not decode: every picture's line
# is the prologue's (above), which stops the run before the DAG is built.
@pytest.mark.pipeline
@pytest.mark.parametrize("case", ["missing", "truncated PNG"])
def test_a_bad_picture_stops_the_run_with_only_its_line(tmp_path, case):
    """Refused before the DAG is built: no job, so none of Snakemake's failed-job report."""
    name, make = PICTURES[case]
    picture = tmp_path / name
    problem = make(picture)
    assert_refused_before_the_dag(tmp_path, picture, refusal(problem))


def test_the_check_before_the_dag_skips_only_the_very_picture_already_accepted(tmp_path, monkeypatch):
    picture = tmp_path / "photo.png"
    picture.write_bytes(RGB_PNG)
    data.import_source(picture, tmp_path / "source_64.png", 64)
    inspected = []
    monkeypatch.setattr(data, "inspect_source", inspected.append)
    data.check_source_image(picture, tmp_path / "source_64.json")
    assert inspected == []  # accepted before, unchanged: not decoded again at every snakemake start
    picture.write_bytes(RGB_PNG[:-1])
    data.check_source_image(picture, tmp_path / "source_64.json")
    assert inspected == [picture]


def gray_alpha_photo(path: Path) -> Path:
    """60x40 grey with alpha (300 translucent pixels), smaller than every source_size used here."""
    pixels = np.random.default_rng(3).integers(0, 256, (40, 60, 2), dtype=np.uint8)
    pixels[:, :, 1] = 255
    pixels[:5, :, 1] = 100
    path.write_bytes(png(pixels, colour_type=4))
    return path


def conversion_warnings(picture: Path, size: int) -> list[str]:
    return [f"warning: config source_image: {picture}: {conversion}" for conversion in (
        "dropped the alpha channel (300 of 2400 pixels were not fully opaque; their stored colour is kept, "
        "not blended with a background)",
        "converted grayscale to RGB (the grey value in all three channels)",
        "centre-cropped 60x40 to 40x40 (kept columns 10-49 and rows 0-39; the picture is cropped, not stretched)",
        f"upscaled 40x40 to {size}x{size} (bicubic): the picture is smaller than source_size, so the added pixels "
        "are interpolated, not detail")]


def test_each_conversion_is_a_warning_line_and_gray_alpha_counts_as_gray(tmp_path, capsys):
    picture = gray_alpha_photo(tmp_path / "gray_alpha.png")
    record = data.import_source(picture, tmp_path / "source_64.png", 64)
    assert record["original"] == {"width": 60, "height": 40, "channels": 2, "bit_depth": 8}
    assert capsys.readouterr().err.splitlines() == conversion_warnings(picture, 64)


@pytest.mark.pipeline
def test_conversions_of_the_picture_reach_the_terminal_as_warnings(tmp_path):
    repo = copy_repo(tmp_path / "repo")
    picture = gray_alpha_photo(tmp_path / "gray_alpha.png")
    result = snakemake(repo, 1, "--config", f"source_image={picture}", "--", "data/input_64.png")
    warnings = [line for line in terminal_lines(result) if line.startswith("warning:")]
    assert warnings == conversion_warnings(picture, 256)
    assert_no_traceback(result)


# ---------------------------------------------------------------------------------------------
# Config mistakes: stopped before the DAG is built, the key named


# a placeholder for the layer that made the mistake: the test's --configfile
WHERE = "error: {configfile}: "


def bad_config(tmp_path: Path, change: dict) -> Path:
    """The tiny cpu config with ``change`` merged into it, as a file: values given with --config
    reach the config as strings."""
    config = yaml.safe_load((REPO / TINY).read_text())
    for section, value in change.items():
        if isinstance(value, dict) and isinstance(config.get(section), dict):
            config[section].update(value)
        else:
            config[section] = value
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


REGISTERED = sorted(load_registry())
CONFIG_MISTAKES = {
    # schema mistakes: one error line naming the key
    "unknown key": ({"timming": {"mode": "warm"}},
                    [WHERE + "(top level): Additional properties are not allowed ('timming' was unexpected)"]),
    "misspelt key": ({"conv2d": {"stride": [1]}},
                     [WHERE + "conv2d: Additional properties are not allowed ('stride' was unexpected)"]),
    "stride below 1": ({"conv2d": {"strides": [0]}}, [WHERE + "conv2d.strides.0: 0 is less than the minimum of 1"]),
    # a key of several forms (all, or a list): the line says which are valid
    "no kernels": ({"conv2d": {"kernels": []}},
                   [WHERE + "conv2d.kernels: [] is not valid here; give all or a non-empty list of distinct kernel "
                    "names (kernels/registry.yaml)"]),
    "size below 1": ({"cpu": {"sizes": [0]}}, [WHERE + "cpu.sizes.0: 0 is less than the minimum of 1"]),
    "block below 1": ({"kernels": {"direct": {"block": [0]}}},
                      ["error: kernels.direct.block: 0 is not a positive integer; give values >= 1 such as "
                       "[8, 16, 32] (from direct.yaml)"]),
    "unknown kernel": ({"conv2d": {"kernels": ["direct", "nope"]}},
                       [f"error: conv2d.kernels: unknown kernel(s) nope; registered in kernels/registry.yaml: "
                        f"{', '.join(REGISTERED)}"]),
    "unknown cuDNN plan": ({"kernels": {"cudnn": {"plan": ["fastest"]}}},
                           ["error: kernels.cudnn.plan: 'fastest' is not one of ['heuristic', 'best'] (from cudnn.yaml)"]),
    "even filter": ({"conv2d": {"filter_sizes": [4]}},
                    ["error: conv2d.filter_sizes: 4 is even; use odd sizes (3, 5, 7, ...)"]),
    "filter larger than the image": ({"cpu": {"sizes": [16]}, "conv2d": {"filter_sizes": [31], "padding": 0}},
                                     ["error: conv2d.filter_sizes: a 31x31 filter is larger than a 16x16 image with "
                                      "padding 0; drop that size or filter"]),
    "block edge over 1024": ({"kernels": {"direct": {"block": [2048]}}},
                             ["error: kernels.direct.block: 2048 exceeds CUDA's limit of 1024 threads per block "
                              "dimension on every GPU; use at most 1024 (64 is kept as an experiment: its 64x64 "
                              "launch is refused and recorded as invalid_config)"]),
    "kernel sizes matching none": ({"kernels": {"direct": {"sizes": [100]}}},
                                   ["error: kernels.direct.sizes: none of 100 is a size the grid offers direct on the "
                                    "cpu backend (64, 96, 320), so it would run no cell; list one of those sizes or "
                                    "drop kernels.direct.sizes"]),
}


# One mistake of each source through Snakemake: the schema's, the kernel registry's and the grid's.
# Every mistake's line is checked in-process, in the plan the Snakefile builds (the same call).
THROUGH_SNAKEMAKE = ("misspelt key", "unknown kernel", "kernel sizes matching none")


def expected_lines(case: str, configfile: Path) -> list[str]:
    # the line names the file that made the mistake, not the default config it was laid over
    return [line.replace(WHERE, f"error: --configfile {configfile}: ") for line in CONFIG_MISTAKES[case][1]]


@pytest.mark.parametrize("case", CONFIG_MISTAKES)
def test_a_config_mistake_is_its_exact_line_in_the_runs_plan(tmp_path, monkeypatch, case):
    configfile = bad_config(tmp_path, CONFIG_MISTAKES[case][0])
    monkeypatch.chdir(REPO)  # where Snakemake runs the Snakefile
    # Snakemake's config: the default file with the --configfile laid over it
    config = laid(yaml.safe_load((REPO / DEFAULT_CONFIG_FILE).read_text()), yaml.safe_load(configfile.read_text()))
    with pytest.raises(UserError) as refused:
        RunPlan.build(config, REPO, DEFAULT_CONFIG_FILE, [str(configfile)])
    assert [f"error: {refused.value}"] == expected_lines(case, configfile)


@pytest.mark.pipeline
@pytest.mark.parametrize("case", THROUGH_SNAKEMAKE)
def test_a_config_mistake_is_its_exact_line_before_the_dag(tmp_path, case):
    repo = copy_repo(tmp_path / "repo")
    configfile = bad_config(tmp_path, CONFIG_MISTAKES[case][0])
    result = snakemake(repo, 1, "--dry-run", configfile=str(configfile), check=False)
    assert result.returncode != 0
    assert_no_traceback(result)
    assert terminal_lines(result) == expected_lines(case, configfile)


# ---------------------------------------------------------------------------------------------
# `run` names only the files it writes


@pytest.fixture
def image(tmp_path: Path) -> Path:
    path = tmp_path / "input_80.png"
    cv2.imwrite(str(path), np.random.default_rng(4).integers(0, 256, (80, 80, 3), dtype=np.uint8))
    return path


def test_a_hand_run_names_its_cell_and_no_path_it_does_not_write(image):
    result = convlab("run", "--kernel", "direct", "--size", "80", "--stride", "2", "--backend", "cpu",
                     "--image", str(image))
    assert result.returncode == 0, result.stderr
    headings = [line for line in result.stdout.splitlines() if not line.startswith("  ")]
    assert headings == ["== conv2d cell kernel~direct/size~80/stride~2/filter~3/default on cpu"]
    assert "results/" not in result.stdout and ".csv" not in result.stdout


def test_a_hand_run_with_out_names_the_file_it_wrote(image, tmp_path):
    out = tmp_path / "row.csv"
    result = convlab("run", "--kernel", "direct", "--size", "80", "--backend", "cpu", "--image", str(image),
                     "--out", str(out))
    assert result.returncode == 0, result.stderr
    headings = [line for line in result.stdout.splitlines() if not line.startswith("  ")]
    assert headings == ["== conv2d cell kernel~direct/size~80/stride~1/filter~3/default on cpu", f"wrote {out}"]
    assert out.read_text().startswith("experiment,kernel,")


# ---------------------------------------------------------------------------------------------
# compare: folders of the same device label get outputs of their own


def summary_folder(root: Path, parent: str, ms: float) -> Path:
    """<root>/<parent>/h200/summary.csv with two cells at ``ms``."""
    rows = []
    for size in (256, 512):
        row = dict.fromkeys(COLUMNS, np.nan)
        row.update(experiment="conv2d", kernel="direct", variant="default", backend="cuda", size=size, batch=1,
                   H=size, W=size, C_in=3, C_out=3, filter_size=3, stride=1, padding=1, status="ok", kernel_ms=ms,
                   kernel_ms_min=ms * 0.98, kernel_ms_max=ms * 1.04, kernel_ms_iqr=ms * 0.02, reps=30,
                   device="NVIDIA H200", git_commit=parent, code_version="c0de", row_check=f"{parent}{size}")
        rows.append(row)
    folder = root / parent / "h200"
    folder.mkdir(parents=True)
    pd.DataFrame(rows, columns=COLUMNS).to_csv(folder / "summary.csv", index=False)
    return folder


def test_comparisons_of_same_label_folders_do_not_overwrite_each_other(tmp_path):
    a, b, c = (summary_folder(tmp_path, name, ms) for name, ms in
               (("results_a", 1.0), ("results_b", 2.0), ("results_c", 1.0)))
    first, second = compare_paths(a, b, DRIFT_FLOOR), compare_paths(a, c, DRIFT_FLOOR)
    ab, ac = a / "compare_results_a-h200_vs_results_b-h200.csv", a / "compare_results_a-h200_vs_results_c-h200.csv"
    assert f"wrote {ab} and {ab.with_suffix('.html')}" in first
    assert f"wrote {ac} and {ac.with_suffix('.html')}" in second
    assert (pd.read_csv(ab)["verdict"] == "SLOWER").all() and (pd.read_csv(ac)["verdict"] == "SAME").all()


def test_comparisons_with_b_sides_of_one_label_in_other_folders_do_not_overwrite_each_other(tmp_path):
    a = summary_folder(tmp_path, "x", 1.0)
    b, c = (summary_folder(tmp_path, name, ms).rename(tmp_path / name / "a100") for name, ms in (("y", 2.0), ("z", 1.0)))
    first, second = compare_paths(a, b, DRIFT_FLOOR), compare_paths(a, c, DRIFT_FLOOR)
    xy, xz = a / "compare_x-h200_vs_y-a100.csv", a / "compare_x-h200_vs_z-a100.csv"
    assert f"wrote {xy}" in first and f"wrote {xz}" in second
