"""Running cells by hand: python -m convlab run ..."""

import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from convlab.backends import gpu_visible

REPO = Path(__file__).resolve().parents[1]


def convlab(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO / "workflow"))
    return subprocess.run([sys.executable, "-m", "convlab", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


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


def test_unknown_kernel_is_a_clear_error(image):
    result = convlab("run", "--kernel", "nope", "--size", "80", "--backend", "cpu", "--image", str(image))
    assert result.returncode == 2
    assert "unknown kernel(s) nope" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.skipif(gpu_visible(), reason="checks the error given where no GPU is visible")
def test_forcing_cuda_without_a_gpu_is_one_line(image):
    result = convlab("run", "--kernel", "direct", "--size", "80", "--backend", "cuda", "--image", str(image))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: backend 'cuda'")


def test_missing_cudnn_is_one_clear_line(monkeypatch):
    import sys

    from convlab.backends import import_cudnn
    from convlab.status import KernelFailure

    monkeypatch.setitem(sys.modules, "cudnn", None)  # as if nvidia-cudnn-frontend were not installed
    with pytest.raises(KernelFailure) as failure:
        import_cudnn()
    assert failure.value.status == "error"
    assert "\n" not in failure.value.reason and "pip install -r envs/requirements-cuda13.txt" in failure.value.reason
