"""The workflow passes Snakemake's linter and snakefmt, and the code passes ruff."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def tool(name: str) -> str:
    found = shutil.which(name, path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    if found is None:
        pytest.fail(f"{name} is not installed: pip install -r envs/requirements-test.txt")
    return found


def test_snakemake_lint_is_clean():
    result = subprocess.run([sys.executable, "-m", "snakemake", "--lint", "--cores", "1",
                             "--configfile", "config/tiny-cpu.yaml"],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Congratulations" in result.stdout + result.stderr, result.stdout + result.stderr


def test_snakefmt_check_is_clean():
    result = subprocess.run([tool("snakefmt"), "--check", "."], cwd=REPO, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_is_clean():
    result = subprocess.run([tool("ruff"), "check", "."], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
