"""Bad input, faults and interrupted runs get a clear answer and lose nothing (cpu backend).

1. The user's picture (config source_image) is converted, with every conversion recorded in
   data/source_<size>.json, or refused before any cell runs, naming the key and the file.
2. A config mistake is an error naming the key before the DAG runs (more cases in
   tests/test_config_grid.py).
4. A cell killed with SIGKILL leaves no partial row; the next run makes only what is missing,
   and its summary equals an uninterrupted run's rows of the same cells (times aside).
5. Under --cores 4 the cells' measurement intervals never overlap.
"""

from __future__ import annotations

import csv
import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pandas as pd
import pytest
import yaml
from workflow_helpers import (
    CELL_OUTPUT,
    REPO,
    RESULTS,
    TINY,
    VOLATILE,
    cell_rows,
    copy_repo,
    job_listing,
    planned_cells,
    snakemake,
    snakemake_command,
    snakemake_env,
)

from convlab.measure.row import COLUMNS
from convlab.pictures import source as data
from convlab.plan.config import ConfigError, validate_config
from convlab.plan.grid import build_cells
from convlab.status import STATUSES

# ---------------------------------------------------------------------------------------------
# 1. The source image, converted or refused: data.import_source on small generated pictures


def write(path: Path, pixels: np.ndarray) -> Path:
    assert cv2.imwrite(str(path), pixels)
    return path


def read_back(path: Path) -> np.ndarray:
    pixels = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    assert pixels.dtype == np.uint8 and pixels.ndim == 3 and pixels.shape[2] == 3  # 8-bit RGB
    return pixels


def imported(user: Path, tmp_path: Path, size: int) -> tuple[np.ndarray, dict]:
    out = tmp_path / f"source_{size}.png"
    record = data.import_source(user, out, size)
    assert json.loads((tmp_path / f"source_{size}.json").read_text()) == record
    assert record["source_image"] == str(user) and record["size"] == size
    return read_back(out), record


def mentions(record: dict, *fragments: str) -> bool:
    return all(any(fragment in line for line in record["conversions"]) for fragment in fragments)


RNG = np.random.default_rng(7)


def test_rgb_square_at_size_is_copied_unchanged(tmp_path):
    pixels = RNG.integers(0, 256, (48, 48, 3), dtype=np.uint8)
    out, record = imported(write(tmp_path / "rgb.png", pixels), tmp_path, 48)
    assert np.array_equal(out, pixels)
    assert record["conversions"] == [] and record["scaled"] == "none"
    assert record["original"] == {"width": 48, "height": 48, "channels": 3, "bit_depth": 8}


def test_rgba_non_square_drops_alpha_and_crops_the_centre(tmp_path):
    """64 wide x 48 high RGBA: alpha dropped (said so), centre 48x48 kept, nothing stretched."""
    pixels = RNG.integers(0, 256, (48, 64, 4), dtype=np.uint8)
    pixels[:, :, 3] = 255
    pixels[0, 0, 3] = 10  # one translucent pixel, counted in the record
    out, record = imported(write(tmp_path / "rgba.png", pixels), tmp_path, 48)
    assert np.array_equal(out, pixels[:, 8:56, :3])
    assert record["original"] == {"width": 64, "height": 48, "channels": 4, "bit_depth": 8}
    assert mentions(record, "dropped the alpha channel (1 of 3072 pixels", "centre-cropped 64x48 to 48x48")


def test_tall_picture_keeps_its_middle_rows(tmp_path):
    pixels = RNG.integers(0, 256, (64, 40, 3), dtype=np.uint8)
    out, record = imported(write(tmp_path / "tall.png", pixels), tmp_path, 40)
    assert np.array_equal(out, pixels[12:52])
    assert mentions(record, "centre-cropped 40x64 to 40x40", "not stretched")


def test_grayscale_becomes_rgb(tmp_path):
    pixels = RNG.integers(0, 256, (32, 32), dtype=np.uint8)
    out, record = imported(write(tmp_path / "gray.png", pixels), tmp_path, 32)
    assert all(np.array_equal(out[:, :, c], pixels) for c in range(3))
    assert record["original"]["channels"] == 1
    assert record["conversions"] == ["converted grayscale to RGB (the grey value in all three channels)"]


@pytest.mark.parametrize("shape", [(32, 32, 3), (32, 32)], ids=["rgb16", "gray16"])
def test_16_bit_becomes_8_bit(tmp_path, shape):
    pixels = RNG.integers(0, 65536, shape, dtype=np.uint16)
    corners = np.array([0, 65535, 32896], dtype=np.uint16)  # black, white, 128 * 257
    pixels[0, :3] = corners if len(shape) == 2 else corners[:, None]
    out, record = imported(write(tmp_path / "deep.png", pixels), tmp_path, 32)
    expected = np.round(pixels.astype(np.float64) * 255 / 65535).astype(np.uint8)
    first = out[:, :, 0]
    assert np.array_equal(first, expected if expected.ndim == 2 else expected[:, :, 0])
    assert list(first[0, :3]) == [0, 255, 128]
    assert record["original"]["bit_depth"] == 16
    assert mentions(record, "16-bit samples to 8-bit")
    assert mentions(record, "grayscale") == (len(shape) == 2)


def test_larger_picture_is_scaled_down_without_a_conversion_note(tmp_path):
    out, record = imported(write(tmp_path / "big.png", RNG.integers(0, 256, (96, 96, 3), dtype=np.uint8)),
                           tmp_path, 32)
    assert out.shape == (32, 32, 3)
    assert record["conversions"] == [] and record["scaled"] == "96x96 to 32x32, ffmpeg bicubic"


def test_smaller_picture_is_upscaled_and_recorded(tmp_path, capsys):
    """Smaller than source_size: upscaled (nothing lost, but pixels invented), said in the record
    and on stderr (the source rule's log)."""
    out, record = imported(write(tmp_path / "small.png", RNG.integers(0, 256, (24, 24, 3), dtype=np.uint8)),
                           tmp_path, 64)
    assert out.shape == (64, 64, 3)
    assert mentions(record, "upscaled 24x24 to 64x64", "smaller than source_size")
    assert "warning: config source_image:" in capsys.readouterr().err


def png_bytes() -> bytes:
    ok, encoded = cv2.imencode(".png", RNG.integers(0, 256, (32, 32, 3), dtype=np.uint8))
    assert ok
    return encoded.tobytes()


def truncated_png(path: Path) -> Path:
    blob = png_bytes()
    path.write_bytes(blob[: len(blob) // 2])
    return path


def corrupt_png(path: Path) -> Path:
    blob = bytearray(png_bytes())
    blob[len(blob) // 2] ^= 0xFF  # one flipped byte inside the image data: its CRC fails
    path.write_bytes(bytes(blob))
    return path


def text_as_png(path: Path) -> Path:
    path.write_text("this is not a picture\n")
    return path


def float_tiff(path: Path) -> Path:
    return write(path.with_suffix(".tiff"), RNG.random((16, 16, 3), dtype=np.float32))


@pytest.mark.parametrize("make,fragment", [
    (lambda p: p, "does not exist"),
    (lambda p: (p.mkdir(), p)[1], "is a directory"),
    (lambda p: (p.write_bytes(b""), p)[1], "the file is empty"),
    (truncated_png, "the PNG is truncated"),
    (corrupt_png, "fails the CRC check"),
    (text_as_png, "OpenCV cannot decode this file"),
    (float_tiff, "save it with 8- or 16-bit integer samples"),
], ids=["missing", "directory", "empty", "truncated", "corrupt", "text", "float32"])
def test_unusable_picture_is_refused_naming_the_key_and_what_to_do(tmp_path, make, fragment):
    user = make(tmp_path / "picture.png")
    out = tmp_path / "data" / "source_64.png"
    with pytest.raises(data.DataError) as error:
        data.import_source(user, out, 64)
    message = str(error.value)
    assert message.startswith(f"config source_image: {user}")
    assert fragment in message and "source_image: null" in message  # what to do
    assert "\n" not in message  # one line: the CLI prints it as `error: ...`
    assert not out.exists() and not data.sidecar_path(out).exists()


def test_cli_refusal_is_one_error_line_and_exit_code_2(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO / "workflow"))
    result = subprocess.run([sys.executable, "-m", "convlab", "source", "--size", "64", "--user-image",
                             str(truncated_png(tmp_path / "cut.png")), "--out", str(tmp_path / "source_64.png")],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.startswith("error: config source_image:") and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1


# ---------------------------------------------------------------------------------------------
# 2. Config mistakes name the key (stride, size, kernel, filter, typo: tests/test_config_grid.py)


@pytest.mark.parametrize("block", [0, -16, "0", 16.5, True, "sixteen"])
@pytest.mark.parametrize("backend", ["cuda", "cpu"])
def test_block_must_be_a_positive_integer_on_every_backend(block, backend):
    config = validate_config({"kernels": {"direct": {"block": [16, block]}}})
    with pytest.raises(ConfigError, match=r"kernels\.direct\.block: .* is not a positive integer"):
        build_cells(config, backend)


def test_block_given_on_the_command_line_is_the_same_cell():
    """snakemake --config kernels="{'direct': {'block': [16]}}" passes '16' (a string)."""
    def cells(block):
        return [c.to_json() for c in build_cells(validate_config({"kernels": {"direct": {"block": block}}}), "cuda")]

    assert cells(["16"]) == cells([16])


def test_block_2048_is_a_config_error_but_64_is_an_experiment():
    """2048 exceeds every GPU's per-dimension limit: refused before the DAG, naming the key.
    64 is legal per dimension; its 64x64 = 4096-thread launch is the seed-001 experiment."""
    with pytest.raises(ConfigError, match=r"kernels\.direct\.block: 2048 exceeds CUDA's limit"):
        build_cells(validate_config({"kernels": {"direct": {"block": 2048}}}), "cuda")
    config = validate_config({"conv2d": {"kernels": ["direct"]}, "kernels": {"direct": {"block": 64}}})
    assert {cell.variant for cell in build_cells(config, "cuda") if cell.kernel == "direct"} == {"block~64"}


def test_plan_must_be_one_the_code_knows():
    config = validate_config({"kernels": {"cudnn": {"plan": ["heuristic", "fastest"]}}})
    with pytest.raises(ConfigError, match=r"kernels\.cudnn\.plan: 'fastest' is not one of"):
        build_cells(config, "cuda")


def test_kernel_sizes_must_be_positive():
    with pytest.raises(ConfigError, match=r"kernels\.direct\.sizes"):
        build_cells(validate_config({"kernels": {"direct": {"sizes": [0, 128]}}}), "cuda")


# ---------------------------------------------------------------------------------------------
# The real workflow in temporary copies of the repository


def comparable(summary: Path) -> pd.DataFrame:
    return pd.read_csv(summary).drop(columns=list(VOLATILE)).reset_index(drop=True)


@pytest.mark.pipeline
@pytest.mark.parametrize("case", ["missing", "truncated"])
def test_bad_source_image_stops_the_run_before_any_cell(tmp_path, case):
    repo = copy_repo(tmp_path / "repo")
    picture = tmp_path / "photo.png"
    if case == "truncated":
        truncated_png(picture)
    result = snakemake(repo, 1, "--config", f"source_image={picture}", check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert not (repo / f"{RESULTS}/cells").exists()
    assert not list((repo / "data").glob("input_*.png"))
    # the one-line refusal reaches snakemake's own output, and the source rule's log
    expected = f"error: config source_image: {picture}"
    assert expected in output, output[-3000:]
    assert expected in (repo / "results/logs/data/source_256.log").read_text()


@pytest.mark.pipeline
@pytest.mark.parametrize("setting,key", [
    ("kernels={'direct': {'block': [0]}}", "kernels.direct.block"),
    ("timming={'mode': 'warm'}", "timming"),
])
def test_config_mistake_stops_before_the_dag_runs(tmp_path, setting, key):
    repo = copy_repo(tmp_path / "repo")
    result = snakemake(repo, 1, "--config", setting, check=False)
    assert result.returncode != 0
    assert "error: " in result.stderr and key in result.stderr, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert not (repo / "data").exists() and not (repo / "results").exists()


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """The tiny cpu grid in one uninterrupted run with --cores 4."""
    repo = copy_repo(tmp_path_factory.mktemp("uninterrupted") / "repo")
    return repo, snakemake(repo, 4)


def concurrent_cell_jobs(log: str) -> int:
    """The most cell jobs snakemake had running at once, read from its output."""
    running = most = 0
    for line in log.splitlines():
        if line.strip() in ("rule cell:", "localrule cell:"):
            running += 1
            most = max(most, running)
        elif re.search(r"Finished jobid: \d+ \(Rule: cell\)", line):
            running -= 1
    return most


@pytest.mark.pipeline
def test_cells_never_overlap_with_four_cores(uninterrupted):
    repo, result = uninterrupted
    assert concurrent_cell_jobs(job_listing(result)) > 1  # the jobs did run side by side
    summary = pd.read_csv(repo / f"{RESULTS}/summary.csv")
    assert (summary["experiment"] == "conv2d").sum() == 8 and set(summary["status"]) == {"ok"}
    spans = sorted(zip(pd.to_datetime(summary["started_at"]), pd.to_datetime(summary["finished_at"])))
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert start >= end  # each measurement began after the previous one ended


# The tiny grid's conv2d cells, each timing for its whole budget (min_reps is never reached before
# the budget ends), so a cell can be caught while it measures; the other families would only
# lengthen the rerun. The same settings are used before and after the kill.
SLOW = "config/tiny-slow.yaml"
SLOW_FAMILY = "conv2d"


def write_slow_config(repo: Path) -> None:
    config = yaml.safe_load((repo / TINY).read_text())
    config["cpu"]["budget_s"] = 0.5
    config["timing"].update(min_reps=10**8, max_reps=10**9)
    for family in ("tiling", "winograd_layers", "gemm"):
        config[family] = {**config.get(family, {}), "enabled": False}
    (repo / SLOW).write_text(yaml.safe_dump(config))


def measuring_cell(repo: Path, lock: Path) -> tuple[int, str] | None:
    """(pid, output row) of this repository's cell job while a measurement holds the device lock."""
    if not lock.exists():
        return None
    with open(lock, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pass  # a cell is measuring
        else:
            fcntl.flock(handle, fcntl.LOCK_UN)
            return None
    shells, clients = [], []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = [arg for arg in (proc / "cmdline").read_bytes().decode().split("\0") if arg != "-S"]
            if Path(os.readlink(proc / "cwd")) != repo.resolve():
                continue
            # the cell job's shell, which reads the cell client: `bash -c '… cellclient.sh cell … --out ROW …'`
            shell = re.search(r"cellclient\.sh cell .* --out ([^\s;]+)", argv[2]) if argv[1] == "-c" else None
            if shell:
                shells.append((int(proc.name), shell.group(1)))
            # its Python client, where the shell handed it the cell: that one holds the connection
            elif argv[1:4] == ["-m", "convlab", "cell"] or (argv[1] == "-c" and "cellentry" in argv[2]
                                                             and argv[3] == "cell"):
                clients.append((int(proc.name), argv[argv.index("--out") + 1]))
        except (OSError, ValueError, IndexError):
            continue  # gone, or not ours to read
    return (clients or shells or [None])[0]


@pytest.mark.pipeline
def test_a_killed_cell_loses_nothing_and_the_rerun_makes_only_what_is_missing(tmp_path, uninterrupted):
    repo = copy_repo(tmp_path / "repo")
    write_slow_config(repo)
    env = snakemake_env(repo)
    lock = Path(env["TMPDIR"]) / "convlab-cpu.lock"
    run = subprocess.Popen(snakemake_command(1, configfile=SLOW), cwd=repo, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killed = None
    deadline = time.monotonic() + 300
    try:
        while killed is None and run.poll() is None and time.monotonic() < deadline:
            # let at least one cell finish first, then kill the next one mid-measurement
            if cell_rows(repo):
                found = measuring_cell(repo, lock)
                if found:
                    os.kill(found[0], signal.SIGKILL)
                    killed = found[1]
            time.sleep(0.01)
        output, _ = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
    assert killed, f"no cell was caught measuring:\n{output[-3000:]}"
    assert run.returncode != 0, output[-3000:]

    # no partial row: every CSV is a complete one-row result; the killed cell has none
    present = cell_rows(repo)
    assert present and killed not in present
    for path in present.values():
        with open(path, newline="") as handle:
            rows = list(csv.reader(handle))
        assert rows[0] == COLUMNS and len(rows) == 2 and len(rows[1]) == len(COLUMNS), path
        assert rows[1][COLUMNS.index("status")] in STATUSES
    strays = [p for p in (repo / f"{RESULTS}/cells").rglob("*") if p.is_file() and p.suffix != ".csv"]
    assert all(p.name.startswith(".") and p.name.endswith(".tmp") for p in strays), strays

    # the next run plans exactly the missing cells (--rerun-incomplete only if snakemake asks)
    every_cell = {name for name in cell_rows(uninterrupted[0]) if f"/{SLOW_FAMILY}/" in name}
    assert len(every_cell) == 8
    plan = snakemake(repo, 1, "--dry-run", configfile=SLOW, check=False)
    flags = ["--rerun-incomplete"] if "--rerun-incomplete" in plan.stdout + plan.stderr else []
    if flags:
        plan = snakemake(repo, 1, "--dry-run", *flags, configfile=SLOW)
    planned = set(CELL_OUTPUT.findall(plan.stdout + plan.stderr))
    assert killed in planned
    assert planned == every_cell - set(present)

    before = {name: (path.read_bytes(), path.stat().st_mtime_ns) for name, path in present.items()}
    rerun = snakemake(repo, 1, *flags, configfile=SLOW)
    assert planned_cells(rerun) == planned  # ran: only the missing
    assert {name: (path.read_bytes(), path.stat().st_mtime_ns) for name, path in present.items()} == before
    assert "Nothing to be done" in snakemake(repo, 1, "--dry-run", configfile=SLOW).stdout

    # the summary equals the uninterrupted run's rows of its family, times and provenance aside; the
    # errors against float64 are equal too, as the cpu twins are deterministic on the same image
    # (the killed run's timing settings are slower ones, so the hash of its cells' settings differs)
    # (the whole grid's other families leave gaps in columns such as batch, so that pandas reads
    # them as floats there: the values are compared, not their dtypes)
    whole = comparable(uninterrupted[0] / f"{RESULTS}/summary.csv")
    pd.testing.assert_frame_equal(comparable(repo / f"{RESULTS}/summary.csv").drop(columns=["spec_hash"]),
                                  whole[whole["experiment"] == SLOW_FAMILY].reset_index(drop=True)
                                  .drop(columns=["spec_hash"]), check_dtype=False)
