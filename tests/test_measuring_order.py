"""The order a run measures in: a problem's cells one after another (a measurement worker makes the
problem's operands and reference once), and the device jobs only the report reads (the SGEMM
ceiling, the gallery) among the cells rather than after the last one, where the report would wait
for them."""

import re
import shutil
from pathlib import Path

import pytest
import yaml
from workflow_helpers import REPO, TINY, copy_finished_run, snakemake

from convlab.plan.config import validate_config
from convlab.plan.grid import build_cells, problem_ranks


def tiny_cells():
    return build_cells(validate_config(yaml.safe_load((REPO / TINY).read_text())), "cpu", "x")


def test_a_problems_cells_share_one_rank_and_problems_follow_the_grid():
    cells = tiny_cells()
    ranks = problem_ranks(cells)
    by_problem: dict[tuple, set[float]] = {}
    for cell in cells:
        by_problem.setdefault((cell.experiment, cell.problem), set()).add(ranks[cell.path])
    assert all(len(values) == 1 for values in by_problem.values()), by_problem
    values = [next(iter(v)) for v in by_problem.values()]
    assert len(set(values)) == len(values) and all(0 < v < 1 for v in values)
    # in the grid's order, the first problem first
    first_seen = list(dict.fromkeys((cell.experiment, cell.problem) for cell in cells))
    assert [next(iter(by_problem[p])) for p in first_seen] == sorted(values, reverse=True)


def started_jobs(log: str) -> list[tuple[str, str]]:
    """(rule, first output) of each job, in the order Snakemake started them."""
    return re.findall(r"^localrule (\w+):\n(?:    \w+: .*\n)*?    output: ([^,\n]+)", log, re.M)


def problem_of(path: str) -> str:
    """results/<label>/cells/<backend>/<experiment>/kernel~K/<problem...>/<variant>.csv -> experiment/problem"""
    parts = Path(path).parts
    return "/".join((parts[4], *parts[6:-1]))


@pytest.mark.pipeline
def test_a_run_measures_each_problems_cells_together_and_the_reports_device_jobs_before_the_last_cell(
        tiny_run, tmp_path):
    repo = copy_finished_run(tiny_run.repo, tmp_path / "repo")
    label = next(p.name for p in (repo / "results").iterdir() if (p / "cells").is_dir())
    # every cell, the ceiling and the gallery made again, with the pictures already there: every
    # cell is ready once the copy bandwidth is, and only the order decides
    for made in ("cells", "gallery"):
        shutil.rmtree(repo / "results" / label / made)
    for ceiling in (repo / "results" / label / "device").glob("*_sgemm_ceiling.json"):
        ceiling.unlink()
    snakemake(repo, 1)
    log = sorted((repo / ".snakemake" / "log").glob("*.snakemake.log"))[-1].read_text()
    jobs = started_jobs(log)
    cells = [problem_of(output) for rule, output in jobs if rule == "cell"]
    assert len(cells) == len(tiny_cells())
    runs = [problem for i, problem in enumerate(cells) if i == 0 or cells[i - 1] != problem]
    assert len(runs) == len(set(runs)), f"a problem's cells were measured apart: {runs}"
    rules = [rule for rule, _ in jobs]
    last_cell = max(i for i, rule in enumerate(rules) if rule == "cell")
    first_cell = rules.index("cell")
    for rule in ("sgemm_ceiling", "gallery"):
        started = [i for i, name in enumerate(rules) if name == rule]
        assert started and all(first_cell < i < last_cell for i in started), (rule, rules)
