"""The quick start makes the report: a fresh virtual environment made from envs/requirements.txt
alone runs the tiny grid and `snakemake --report` (which needs packages the run itself does not,
such as pygments)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from workflow_helpers import REPO, TINY, copy_repo

pytestmark = pytest.mark.pipeline


def test_a_fresh_environment_from_the_requirements_builds_the_report(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", "-r", str(REPO / "envs" / "requirements.txt")],
                             cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert install.returncode == 0, install.stderr[-3000:]
    repo = copy_repo(tmp_path / "repo")
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}", "TMPDIR": str(tmp_path)}
    env.pop("PYTHONPATH", None)
    run = subprocess.run([str(python), "-m", "snakemake", "--cores", "2", "--configfile", TINY], cwd=repo, env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    report = subprocess.run([str(python), "-m", "snakemake", "--configfile", TINY, "--report", "results/report.html"],
                            cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    assert report.returncode == 0, (report.stdout + report.stderr)[-3000:]
    page = Path(repo / "results" / "report.html")
    assert page.is_file() and page.stat().st_size > 100_000
