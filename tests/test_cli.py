"""Running cells by hand: python -m convlab run ..."""

import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
from workflow_helpers import convlab as run_convlab

from convlab.backends import gpu_visible

REPO = Path(__file__).resolve().parents[1]


def convlab(*args: str) -> subprocess.CompletedProcess:
    return run_convlab(*args, service=None)


@pytest.fixture
def image(tmp_path: Path) -> Path:
    path = tmp_path / "input_80.png"
    cv2.imwrite(str(path), np.random.default_rng(3).integers(0, 256, (80, 80, 3), dtype=np.uint8))
    return path


def test_run_one_cell_by_hand_prints_and_writes_its_row(image, tmp_path):
    out = tmp_path / "row.csv"
    result = convlab("run", "--kernel", "direct", "--size", "80", "--stride", "2", "--backend", "cpu",
                     "--image", str(image), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "kernel~direct/size~80/stride~2" in result.stdout
    assert "status" in result.stdout and " ok" in result.stdout
    assert out.read_text().startswith("experiment,kernel,")


def test_missing_image_says_how_to_make_it():
    result = convlab("run", "--kernel", "direct", "--size", "77", "--backend", "cpu")
    assert result.returncode == 2
    assert "snakemake --cores 1 data/input_77.png" in result.stderr


def one_error_line(result: subprocess.CompletedProcess, starts: str) -> str:
    """A refused argument: exit status 2, one `error:` line naming it, no traceback, no row."""
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {starts}"), result.stderr
    assert "== results/" not in result.stdout
    return lines[0]


def test_unknown_kernel_is_one_line_listing_the_kernels_run_takes(image):
    result = convlab("run", "--kernel", "nope", "--size", "80", "--backend", "cpu", "--image", str(image))
    line = one_error_line(result, "--kernel nope: unknown kernel")
    # the conv2d kernels with a cpu twin, not every registered kernel (sgemm_naive is a gemm kernel)
    assert "direct" in line and "cudnn" in line and "sgemm_naive" not in line and "ndimage" not in line


def test_stride_zero_is_one_error_line(image):
    result = convlab("run", "--kernel", "direct", "--size", "80", "--stride", "0", "--backend", "cpu",
                     "--image", str(image))
    assert "from 1 to 64" in one_error_line(result, "--stride 0:")


def test_negative_stride_is_one_error_line(image):
    result = convlab("run", "--kernel", "direct", "--size", "80", "--stride", "-1", "--backend", "cpu",
                     "--image", str(image))
    one_error_line(result, "--stride -1:")


def test_negative_size_is_refused_not_offered_an_image():
    result = convlab("run", "--kernel", "direct", "--size", "-5", "--backend", "cpu")
    line = one_error_line(result, "--size -5:")
    assert "snakemake" not in line and "from 1 to" in line


@pytest.mark.parametrize("filter_size", ["0", "4", "33"])
def test_bad_filter_size_is_one_error_line(image, filter_size):
    result = convlab("run", "--kernel", "direct", "--size", "80", "--filter-size", filter_size, "--backend", "cpu",
                     "--image", str(image))
    one_error_line(result, f"--filter-size {filter_size}:")


def test_block_on_the_cpu_backend_is_refused_not_ignored(image):
    result = convlab("run", "--kernel", "direct", "--size", "80", "--block", "64", "--backend", "cpu",
                     "--image", str(image))
    line = one_error_line(result, "--block 64: does not apply on the cpu backend")
    assert "leave out --block" in line


def test_plan_on_the_cpu_backend_is_refused_not_ignored(image):
    result = convlab("run", "--kernel", "cudnn", "--size", "80", "--plan", "best", "--backend", "cpu",
                     "--image", str(image))
    one_error_line(result, "--plan best: does not apply on the cpu backend")


@pytest.mark.parametrize("kernel, option", [("fft", ["--block", "8"]), ("direct", ["--plan", "best"])])
def test_tunable_the_kernel_lacks_is_refused_on_cuda(image, kernel, option):
    # checked before the backend is started, so this runs without a GPU too
    result = convlab("run", "--kernel", kernel, "--size", "80", *option, "--backend", "cuda", "--image", str(image))
    one_error_line(result, f"{option[0]} {option[1]}: kernel {kernel} has no {option[0][2:]} tunable")


def test_a_block_too_large_for_the_gpu_is_still_a_cell_on_cuda():
    """64 is a legal edge whose 64x64 launch the GPU refuses: a measurement (invalid_config), not bad input."""
    from convlab.app.commandtable import build_parser
    from convlab.app.handlers.cells import matching_cells
    from convlab.plan.config import load_config
    from convlab.plan.runargs import check_run_args

    args = build_parser().parse_args(["run", "--kernel", "direct", "--size", "80", "--block", "64"])
    check_run_args(args.kernel, args.size, args.stride, args.filter_size, {"block": 64, "plan": None}, "cuda")
    cells = matching_cells(args, load_config(args.config), "cuda")
    assert [cell.variant for cell in cells] == ["block~64"]


@pytest.mark.skipif(gpu_visible(), reason="checks the error given where no GPU is visible")
def test_forcing_cuda_without_a_gpu_is_one_line(image):
    result = convlab("run", "--kernel", "direct", "--size", "80", "--backend", "cuda", "--image", str(image))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: backend cuda")


@pytest.mark.parametrize("gpus, says", [([], "no NVIDIA GPU is visible on this machine"),
                                         (["NVIDIA H200"], "pip install -r envs/requirements-cuda13.txt")])
def test_cuda_without_cupy_says_what_would_help(monkeypatch, gpus, says):
    """Where the driver lists a GPU, installing CuPy is the fix; where there is none, it is not."""
    from convlab.backends import choice, get_backend
    from convlab.status import BackendUnavailable

    monkeypatch.setitem(sys.modules, "cupy", None)  # as if CuPy were not installed
    monkeypatch.setattr(choice, "visible_gpu_names", lambda: gpus)
    with pytest.raises(BackendUnavailable) as refused:
        get_backend("cuda")
    assert says in str(refused.value) and "\n" not in str(refused.value)
    assert ("pip install" in str(refused.value)) == bool(gpus)


def test_missing_cudnn_is_one_clear_line(monkeypatch):

    from convlab.backends.cudnnimport import import_cudnn
    from convlab.status import KernelFailure

    monkeypatch.setitem(sys.modules, "cudnn", None)  # as if nvidia-cudnn-frontend were not installed
    with pytest.raises(KernelFailure) as failure:
        import_cudnn()
    assert failure.value.status == "error"
    assert "\n" not in failure.value.reason and "pip install -r envs/requirements-cuda13.txt" in failure.value.reason
