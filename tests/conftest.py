import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

from cpu_helpers import SIZE  # noqa: E402
from workflow_helpers import FinishedRun, copy_finished_run, copy_repo, snakemake  # noqa: E402

from convlab.backends import get_backend, gpu_visible  # noqa: E402
from convlab.plan.problemcache import PROBLEMS  # noqa: E402

HAS_GPU = gpu_visible()


def pytest_collection_modifyitems(config, items):
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="no CUDA GPU visible to CuPy here: GPU tests run on the device machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_report_header(config):
    return f"convlab: CUDA GPU visible: {HAS_GPU}"


@pytest.fixture(scope="session")
def backend():
    """The cuda backend, for the GPU tests (CuPy is loaded when a test first asks for it)."""
    return get_backend("cuda")


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> FinishedRun:
    """The tiny cpu grid run from nothing with --cores 2, once for the whole session: the slow tier's
    tests read it, and each test that changes a checkout works on a copy (copy_finished_run)."""
    repo = copy_repo(tmp_path_factory.mktemp("tiny-run") / "repo")
    return FinishedRun(repo, snakemake(repo, 2, timeout=900))


@pytest.fixture(scope="session")
def tiny_report(tiny_run: FinishedRun, tmp_path_factory) -> Path:
    """A copy of the tiny run with `snakemake --report results/report.html` made in it; the
    checkout's path (the report read only)."""
    repo = copy_finished_run(tiny_run.repo, tmp_path_factory.mktemp("tiny-report") / "repo")
    snakemake(repo, 1, "--report", "results/report.html", timeout=900)
    return repo


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    """The tracked pipeline files in a temporary directory (a git checkout of its own)."""
    target = copy_repo(tmp_path / "repo")
    (target / "data").mkdir()
    (target / "results").mkdir()
    return target


@pytest.fixture
def image_path(tmp_path: Path) -> Path:
    """A random SIZE x SIZE colour picture, the input of cpu_helpers.cell_for's cells."""
    rng = np.random.default_rng(1)
    path = tmp_path / f"input_{SIZE}.png"
    cv2.imwrite(str(path), rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8))
    return path


@pytest.fixture
def kept():
    """The process's problem cache on, as a service worker has it; off and empty again after."""
    PROBLEMS.clear()
    PROBLEMS.capacity = 4
    yield PROBLEMS
    PROBLEMS.clear()
    PROBLEMS.capacity = 0
