"""A kept version is the code that ran, and another process's work on the GPU is seen (marker gpu).

Before source modules were compiled in a process of their own, a cuDNN TF32 plan built in the
measuring process changed what NVRTC made of the same source afterwards: the first run's versions
and their comment-only edits then measured up to 1.5 times apart side by side. Here, every source
kernel kind is measured, a cuDNN TF32 cell runs in the same process, and a copy of each kernel's
files with a comment appended is measured side by side with the first: the same machine code, the
same time as its row, SAME."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time

import cv2
import numpy as np
import pytest

from convlab.codeversion import file_contents, fingerprint_contents
from convlab.history import store
from convlab.history.kernelversions import restore_kernel_version
from convlab.history.pairfile import PairRow
from convlab.history.verdictpolicy import DRIFT_FLOOR
from convlab.history.verdictrule import Ratio, verdict_of_interval
from convlab.history.verdicts import judge
from convlab.history.vouching import NEIGHBOURED, why_unvouched
from convlab.pairs.pairmeasure import recorded_side
from convlab.paths import REPO_ROOT
from convlab.plan.config import validate_config
from convlab.plan.grid import build_cells
from convlab.plan.registry import get_kernel, read_kernel_folder
from convlab.run.paired import GRAPH_BELOW_MS, SAME_CODE, Recorded, measure_pair
from convlab.run.runner import run_cell

THRESHOLD = 0.02
# one cell of each kind of source kernel: two-stage im2col, tiled, __constant__ filter, the floor
# kernel, Winograd, a stage on cuBLAS, an SGEMM
KINDS = {"im2col_gemm_basic": {"block": [16]}, "tiled_cached": {"block": [16]}, "direct_const": {"block": [16]},
         "conv_floor_nchw": {}, "winograd": {}, "im2col_cublas": {}}


def cells_of(size: int, kernels: list[str], extra: dict | None = None, families: tuple[str, ...] = ()):
    config = validate_config({
        "backend": "cuda",
        "conv2d": {"sizes": [size], "strides": [1], "kernels": kernels},
        "kernels": extra or {},
        "gemm": {"sizes": [size], "kernels": ["sgemm_register"]} if "gemm" in families else {"enabled": False},
        "timing": {"min_reps": 5, "budget_s": 0.2, "e2e_reps": 1},
        **{family: {"enabled": False} for family in ("tiling", "winograd_layers")},
    })
    return build_cells(config, "cuda")


def picture(tmp_path, size: int):
    path = tmp_path / f"input_{size}.png"
    cv2.imwrite(str(path), np.random.default_rng(size).integers(0, 256, (size, size, 3), dtype=np.uint8))
    return path


def edited_copy(tmp_path, kernel: str):
    """The kernel's files with a comment appended to its .cu, kept and restored as a version of its own."""
    files = [(path, data + b"\n// an edit that changes no code\n" if path.endswith(".cu") else data)
             for path, data in file_contents(get_kernel(kernel).files("cuda"), root=REPO_ROOT)]
    kernel_hash = fingerprint_contents(files)
    connection, _ = store.open_for_writing(tmp_path / "history.sqlite")
    store.add_measurements(connection, "host", [], {kernel_hash: files})
    folder = tmp_path / kernel_hash
    name = restore_kernel_version(connection, kernel, kernel_hash, folder)
    connection.close()
    return read_kernel_folder(folder)[name]


@pytest.mark.gpu
def test_each_source_kernel_kinds_edit_runs_the_code_its_row_ran_after_a_cudnn_tf32_plan(tmp_path, backend):
    size = 1024
    image = picture(tmp_path, size)
    first = {}
    for cell in cells_of(size, list(KINDS), KINDS, families=("gemm",)):
        if cell.kernel in first or cell.kernel not in (*KINDS, "sgemm_register"):
            continue
        row = run_cell(cell, image if cell.image else None, backend=backend)
        assert row["status"] == "ok", (cell.path, row["reason"])
        assert row["module_hash"] and row["compiler"].startswith("nvrtc"), cell.path
        first[cell.kernel] = (cell, row)
    (tf32,) = [c for c in cells_of(size, ["cudnn_tf32"]) if c.tunables.get("plan") == "best"]
    assert run_cell(tf32, image, backend=backend)["status"] == "ok"
    for kernel, (cell, row) in first.items():
        edited = edited_copy(tmp_path / kernel, kernel)
        mine = Recorded(row["module_hash"], row["kernel_ms"], row["timing_applied"])
        result = measure_pair(cell, image if cell.image else None, edited, THRESHOLD / 4, 2.0, backend, (mine, mine),
                              tolerance=DRIFT_FLOOR)
        print(f"{kernel}: x{result.ratio:.4f} [{result.low:.4f}, {result.high:.4f}], previous {result.previous_ms:.4f} "
              f"ms, its row {row['kernel_ms']:.4f} ms")
        assert verdict_of_interval(result.low, result.high, THRESHOLD) == "SAME", kernel
        # measure_pair proved the previous side ran as its row measured (its time here against
        # the row's, the pair's own sampling taken out); a kernel the pair times per launch, as
        # its row did, is also within the row's run-to-run tolerance directly
        assert result.unproved == "" and result.sampling, kernel
        if result.sampling == "per launch":
            assert row["kernel_ms"] >= GRAPH_BELOW_MS * 0.8, kernel
            assert abs(result.previous_ms / row["kernel_ms"] - 1) < 0.08, kernel
        # the same machine code launched alike is SAME without rounds where the pair step asks
        settled = measure_pair(cell, image if cell.image else None, edited, THRESHOLD / 4, 2.0, backend,
                               (mine, mine), tolerance=DRIFT_FLOOR, same_code_is_same=True)
        assert (settled.stop, settled.ratio, settled.rounds) == (SAME_CODE, 1.0, 0), kernel


@pytest.mark.gpu
def test_a_changed_define_is_timed_though_its_source_text_is_the_same(tmp_path, backend):
    size = 1024
    image = picture(tmp_path, size)
    (cell,) = [c for c in cells_of(size, ["direct"], {"direct": {"block": [16]}})]
    edited = edited_copy(tmp_path, "direct")
    result = measure_pair(cell, image, edited, THRESHOLD / 4, 2.0, backend, same_code_is_same=True)
    assert result.stop == SAME_CODE
    launched_otherwise = dataclasses.replace(edited, defines={**edited.defines, "CONVLAB_UNUSED": 1})
    timed = measure_pair(cell, image, launched_otherwise, THRESHOLD / 4, 2.0, backend, same_code_is_same=True)
    assert timed.stop != SAME_CODE and timed.rounds >= 3
    assert verdict_of_interval(timed.low, timed.high, THRESHOLD) == "SAME"


SGEMM_LOOP = """
import sys, time, cupy
a = cupy.random.default_rng(0).random((4096, 4096), dtype=cupy.float32)
out = cupy.empty_like(a)
print("ready", flush=True)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for _ in range(10):
        cupy.matmul(a, a, out=out)
    cupy.cuda.Device().synchronize()
"""


@pytest.fixture
def busy_gpu():
    """Another user's CuPy process running SGEMMs on the GPU, for up to a minute."""
    process = subprocess.Popen([sys.executable, "-c", SGEMM_LOOP, "60"], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "ready"
    time.sleep(1.0)  # NVML samples its utilisation every sixth of a second or so
    yield process
    process.kill()
    process.wait()


@pytest.mark.gpu
def test_a_foreign_cupy_process_on_the_gpu_makes_the_row_and_the_pair_say_so(tmp_path, backend, busy_gpu):
    size = 1024
    image = picture(tmp_path, size)
    (cell,) = [c for c in cells_of(size, ["direct"], {"direct": {"block": [16]}})]
    row = run_cell(cell, image, backend=backend)
    assert row["status"] == "ok"
    assert row["gpu_neighbours"] >= 1, row["gpu_neighbour_names"]
    assert str(busy_gpu.pid) in row["gpu_neighbour_names"]
    assert why_unvouched({**row, "gpu_neighbours": str(row["gpu_neighbours"])}) == NEIGHBOURED
    result = measure_pair(cell, image, edited_copy(tmp_path, "direct"), THRESHOLD / 4, 2.0, backend)
    assert result.neighbours and str(busy_gpu.pid) in result.neighbour_names


def judged_row(row: dict, kernel_hash: str) -> dict:
    """A row as the record step hands it to the verdict: the store's columns and the row itself."""
    return {"cell": "c", "experiment": row["experiment"], "kernel": row["kernel"], "variant": row["variant"],
            "status": row["status"], "kernel_ms": row["kernel_ms"], "kernel_ms_iqr": row["kernel_ms_iqr"],
            "kernel_hash": kernel_hash, "code_version": row["code_version"], "spec_hash": "c",
            "gpu_uuid": row["gpu_uuid"], "input_hash": "", "row_json": json.dumps(row, default=str)}


@pytest.mark.gpu
def test_a_row_measured_beside_a_busy_process_is_no_baseline_for_the_clean_run_after_it(tmp_path, backend):
    """The first row is timed while another user's SGEMMs share the GPU; the next, clean, after an
    edit that changes no instruction. By the rows alone the kernel got faster; no verdict says so:
    the history's rule calls it UNCLEAR, naming the baseline, and the pair, measured now and not
    checked against the disturbed row, stands: SAME."""
    size = 2048
    image = picture(tmp_path, size)
    (cell,) = cells_of(size, ["direct"], {"direct": {"block": [16]}})
    process = subprocess.Popen([sys.executable, "-c", SGEMM_LOOP, "60"], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "ready"
        time.sleep(1.0)
        disturbed = run_cell(cell, image, backend=backend)
    finally:
        process.kill()
        process.wait()
    clean = run_cell(cell, image, backend=backend)
    assert disturbed["status"] == clean["status"] == "ok"
    assert disturbed["gpu_neighbours"] >= 1  # (the clean side may have a neighbour too: the suite's other half)
    print(f"{cell.kernel} {size}: beside SGEMMs {disturbed['kernel_ms']:.4f} ms, alone {clean['kernel_ms']:.4f} ms")
    previous = store.Measurement(**{**judged_row(disturbed, "old"), "row_check": "p", "run_id": "run1",
                                    "finished_at": "t", "git_commit": "g"})
    verdict = judge(judged_row(clean, "new"), previous, threshold=THRESHOLD)
    assert verdict.verdict in ("SAME", "UNCLEAR"), (verdict.verdict, verdict.ratio)
    if verdict.verdict == "UNCLEAR" and not clean["gpu_neighbours"]:
        assert verdict.unconfirmed.startswith("its baseline (run run1) was measured while other processes"), verdict
    edited = edited_copy(tmp_path, cell.kernel)
    result = measure_pair(cell, image, edited, THRESHOLD / 4, 2.0, backend,
                          (recorded_side(disturbed["module_hash"], disturbed["kernel_ms"], disturbed),
                           recorded_side(clean["module_hash"], clean["kernel_ms"], clean)), tolerance=DRIFT_FLOOR)
    assert result.unproved.startswith("the previous row was measured while other processes used the GPU")
    pair = PairRow("c", cell.kernel, "old", "new", ratio=Ratio(result.ratio, result.low, result.high, result.rounds),
                   stop=result.stop, sampling=result.sampling, unproved=result.unproved)
    # the pair measured now stands: no FASTER or SLOWER of the unchanged kernel
    assert judge(judged_row(clean, "new"), previous, pair=pair, threshold=THRESHOLD).verdict in ("SAME", "UNCLEAR")
    assert abs(result.ratio - 1) < 0.03, result
