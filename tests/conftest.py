import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

from convlab.backends import gpu_visible  # noqa: E402

HAS_GPU = gpu_visible()


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU with CuPy (and cuDNN); run on the device")
    config.addinivalue_line("markers", "pipeline: runs the real Snakemake workflow in a temporary copy")


def pytest_collection_modifyitems(config, items):
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="no CUDA GPU visible to CuPy here: GPU tests run on the device machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_report_header(config):
    return f"convlab: CUDA GPU visible: {HAS_GPU}"


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    """The tracked pipeline files in a temporary directory (a git checkout of its own)."""
    target = tmp_path / "repo"
    ignore = shutil.ignore_patterns(".git", ".snakemake", "results", "data", "__pycache__", ".pytest_cache",
                                    ".whl", ".venv", "*.egg-info")
    shutil.copytree(REPO, target, ignore=ignore)
    (target / "data").mkdir()
    (target / "results").mkdir()
    subprocess.run(["git", "init", "-q"], cwd=target, check=True)
    return target
