"""The quick start makes the report: a fresh virtual environment made from envs/requirements.txt
alone (the README's install line, conftest's fresh_install) runs the tiny grid (fresh_runs) and
`snakemake --report` (which needs packages the run itself does not, such as pygments)."""

from __future__ import annotations

import pytest
from workflow_helpers import TINY, shell

pytestmark = pytest.mark.pipeline


def test_a_fresh_environment_from_the_requirements_builds_the_report(fresh_runs):
    repo, env, _ = fresh_runs
    report = shell(f"snakemake --configfile {TINY} --report results/report.html", repo, env)
    assert report.returncode == 0, (report.stdout + report.stderr)[-3000:]
    page = repo / "results" / "report.html"
    assert page.is_file() and page.stat().st_size > 100_000
