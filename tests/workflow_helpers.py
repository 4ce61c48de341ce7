"""Running the real workflow in a temporary copy of the repository (cpu backend)."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from convlab.measure.telemetry import COLUMNS as TELEMETRY  # noqa: E402
from convlab.plan.devicelabel import choose_label  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TINY = "config/tiny-cpu.yaml"
# Where a cpu run on this host keeps its results: results/<this CPU's label>/
RESULTS = f"results/{choose_label(None, 'cpu', [])[0]}"
CELL_OUTPUT = re.compile(r"output: (results/[^/\s]+/cells/\S+\.csv)")
COMPLETE_LOG = re.compile(r"^Complete log\S*: (\S+)$", re.IGNORECASE | re.MULTILINE)
OUTPUT_LINE = re.compile(r"^\s+output: (.+)$", re.MULTILINE)
JOB_START = re.compile(r"^(?:local)?rule (\w+):$")
JOB_ID = re.compile(r"^\s+jobid: (\d+)$")
JOB_END = re.compile(r"Finished jobid: (\d+)")
# Columns that differ between two runs of the same cell: times, and where and when it ran.
VOLATILE = ("kernel_ms", "kernel_ms_min", "kernel_ms_max", "kernel_ms_iqr", "reps", "timing_stop", "setup_ms",
            "e2e_ms", "gflops", "gbps", "copy_gbps", "floor_ms", "pct_of_floor", "stage_ms", "started_at",
            "finished_at", "phase_ms", "job_ms", "service_ms", "git_commit", "host",
            "row_check",  # a hash over the row, times included
            *TELEMETRY)
IGNORED = (".git", ".snakemake", "results", "data", "__pycache__", ".pytest_cache", ".whl", ".venv", "*.egg-info")
# What Snakemake prints before the Snakefile is read, and the project's backend line after it.
SNAKEMAKE_PREAMBLE = ("Using workflow specific profile ", "Config file ")
BACKEND_LINE = "backend cpu: "
# The README's install line, which conftest's fresh_install runs in a copy of the checkout.
INSTALL = "python3 -m venv .venv && . .venv/bin/activate && pip install -r envs/requirements.txt"
# What a failed job adds after the command's own line: none of it may appear for bad input.
JOB_REPORT = ("Traceback", "CalledProcessError", "RuleException", "WorkflowError", "Failed source_image")


def copy_repo(target: Path) -> Path:
    shutil.copytree(REPO, target, ignore=shutil.ignore_patterns(*IGNORED))
    subprocess.run(["git", "init", "-q"], cwd=target, check=True)
    return target


@dataclass(frozen=True)
class FinishedRun:
    """A checkout in which a run has finished, and what that run printed."""

    repo: Path
    result: subprocess.CompletedProcess


def copy_finished_run(run: Path, target: Path) -> Path:
    """A copy of the checkout ``run`` as it is: its results, data and Snakemake's records, with
    their file times (copy2), which Snakemake compares; a test that changes a shared run works on
    one of these."""
    shutil.copytree(run, target, symlinks=True)
    return target


def convlab(*args: str, cwd: Path = REPO, service: str | None = "off", timeout: float = 300,
            **env: str) -> subprocess.CompletedProcess:
    """`python -m convlab ARGS` from this checkout; ``service`` None: through the measurement
    service where the command uses one, "off" (the default): in its own process."""
    environment = {**os.environ, "PYTHONPATH": str(REPO / "workflow"), **env}
    environment.pop("CONVLAB_SERVICE", None)
    if service is not None:
        environment["CONVLAB_SERVICE"] = service
    return subprocess.run([sys.executable, "-m", "convlab", *args], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=timeout)


def shell(command: str, repo: Path, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess:
    """``command`` run by bash in ``repo`` with ``env`` (fresh_install's: its venv activated)."""
    return subprocess.run(["bash", "-c", command], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=timeout)


def snakemake_env(repo: Path) -> dict[str, str]:
    env = dict(os.environ)
    # the jobs' `python` must be the interpreter running the tests
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    # a device lock (and temporary files) of this run's own, apart from other runs on this host
    tmpdir = repo.parent / "tmp"
    tmpdir.mkdir(exist_ok=True)
    env["TMPDIR"] = str(tmpdir)
    return env


def one_gpu() -> dict[str, str]:
    """The environment that shows a run only the first visible GPU: a test about one GPU holds on a
    host of several."""
    return {"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]}


def snakemake_command(cores: int, *args: str, configfile: str = TINY) -> list[str]:
    return [sys.executable, "-m", "snakemake", "--cores", str(cores), "--configfile", configfile, *args]


def snakemake(repo: Path, cores: int, *args: str, configfile: str = TINY, check: bool = True,
              env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    result = subprocess.run(snakemake_command(cores, *args, configfile=configfile), cwd=repo,
                            env=env or snakemake_env(repo), capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return result


def run_to_verdicts(repo: Path, device: str, configfile: str) -> subprocess.CompletedProcess:
    """A run up to ``device``'s verdicts (after "--": a target, not one more --configfile), on one GPU: a run
    on another board of the host would be a change of board."""
    return snakemake(repo, 1, "--", f"results/{device}/verdicts/latest.txt", configfile=configfile,
                     env={**snakemake_env(repo), **one_gpu()})


def latest_verdicts(repo: Path, device: str) -> dict[str, str]:
    """Each cell's verdict in the latest run's verdicts of ``device`` (verdicts/latest.csv)."""
    with open(repo / "results" / device / "verdicts" / "latest.csv", newline="") as handle:
        return {row["cell"]: row["verdict"] for row in csv.DictReader(handle)}


def assert_refused_before_the_dag(tmp_path: Path, picture: Path, line: str) -> None:
    """A run of a fresh copy of the checkout with ``picture`` as its source_image stops before the DAG is built:
    the backend's line and ``line`` alone on the terminal, ``line`` the source step's log, and no data/."""
    repo = copy_repo(tmp_path / "repo")
    result = snakemake(repo, 1, "--config", f"source_image={picture}", check=False)
    assert result.returncode != 0
    assert_no_traceback(result)
    lines = terminal_lines(result)
    assert len(lines) == 2 and lines[0].startswith(BACKEND_LINE), "\n".join(lines)
    assert lines[1] == line
    assert (repo / "results/logs/data/source_256.log").read_text() == line + "\n"
    assert not (repo / "data").exists()


def cell_rows(repo: Path) -> dict[str, Path]:
    return {str(path.relative_to(repo)): path for path in sorted((repo / RESULTS / "cells").rglob("*.csv"))}


def job_listing(result: subprocess.CompletedProcess) -> str:
    """Snakemake's job blocks: a real run's complete log (the default profile's logger keeps them
    off the terminal), or what a dry run printed."""
    text = result.stdout + result.stderr
    logs = COMPLETE_LOG.findall(text)
    return "".join(Path(log).read_text() for log in logs) if logs else text


def planned_cells(result: subprocess.CompletedProcess) -> set[str]:
    return set(CELL_OUTPUT.findall(job_listing(result)))


def planned_outputs(result: subprocess.CompletedProcess) -> set[str]:
    """Every output of every job in Snakemake's job blocks (a dry run's listing or a run's log)."""
    return {path.removesuffix(" (update)") for line in OUTPUT_LINE.findall(job_listing(result))
            for path in line.split(", ")}


def most_at_once(result: subprocess.CompletedProcess, rules: set[str]) -> int:
    """The most jobs of ``rules`` that ran at the same time, from a real run's log (job_events)."""
    running = most = 0
    for event, rule in job_events(result):
        if rule in rules:
            running += 1 if event == "start" else -1
            most = max(most, running)
    return most


def job_events(result: subprocess.CompletedProcess) -> list[tuple[str, str]]:
    """Each job's start and end, in the order of a real run's log: ("start", rule) at its block,
    ("end", rule) at its 'Finished jobid' line."""
    events: list[tuple[str, str]] = []
    started: dict[str, str] = {}
    rule = None
    for line in job_listing(result).splitlines():
        block = JOB_START.match(line)
        if block:
            rule = block.group(1)
            continue
        numbered = JOB_ID.match(line)
        if numbered and rule is not None:
            started[numbered.group(1)] = rule
            events.append(("start", rule))
            rule = None
            continue
        finished = JOB_END.search(line)
        if finished and finished.group(1) in started:
            events.append(("end", started.pop(finished.group(1))))
    return events


def first_line(result: subprocess.CompletedProcess) -> str:
    """The project's first line, after Snakemake's note of the profile it uses."""
    return next(line for line in result.stderr.splitlines() if not line.startswith("Using workflow specific profile"))


def terminal_lines(result: subprocess.CompletedProcess) -> list[str]:
    """What the project printed: the non-empty lines after Snakemake's preamble."""
    lines = (result.stdout + result.stderr).splitlines()
    return [line for line in lines if line.strip() and not line.startswith(SNAKEMAKE_PREAMBLE)]


def assert_no_traceback(result: subprocess.CompletedProcess) -> None:
    """None of a failed job's report (a traceback, Snakemake's job error) reached the terminal."""
    shown = result.stdout + result.stderr
    assert not [marker for marker in JOB_REPORT if marker in shown], shown[-3000:]


def planned_rules(result: subprocess.CompletedProcess) -> set[str]:
    """The rules in a dry run's job table (between its header and its `total` line)."""
    text = result.stdout + result.stderr
    if "Job stats:" not in text:
        return set()
    rules = set()
    for line in text[text.index("Job stats:"):].splitlines()[3:]:
        if line.startswith("total"):
            break
        rules.add(line.split()[0])
    return rules


# `snakemake --report` with Snakemake's report writer replaced by a lister: the report tree the DAG
# files (each report file's category, subcategory, labels and caption), read without the files.
REPORT_LISTER = """
import json, sys
import snakemake.report as report
from snakemake.io import get_flag_value, is_flagged

async def lister(dag, *args, **kwargs):
    async def expand(item, job):
        return None if item is None else await report.expand_report_argument(item, job.wildcards, job)
    tree = {}
    for job in dag.jobs:
        for f in job.output:
            if is_flagged(f, "report") and str(f) not in tree:
                filed = get_flag_value(f, "report")
                tree[str(f)] = {"category": await expand(filed.category, job),
                                "subcategory": await expand(filed.subcategory, job),
                                "labels": await report.expand_labels(filed.labels, job.wildcards, job),
                                "caption": dict(job.params.items()).get("caption")}
    print("report tree: " + json.dumps(tree))

report.auto_report = lister
from snakemake.cli import main
sys.argv = ["snakemake", *sys.argv[1:], "--report", "unused.html"]
main()
"""


def report_tree(repo: Path, configfile: str = TINY) -> dict[str, dict]:
    """Per report file of the DAG: its category, subcategory, labels and caption text (where the job's params
    carry one: figure.rst and seed_figure.rst show it), as `snakemake --report` would file it. The run refuses
    a report with no summary to make it from: an empty one stands in (the tree reads the DAG, not the rows)."""
    summary = repo / RESULTS / "summary.csv"
    if not summary.exists():
        summary.parent.mkdir(parents=True, exist_ok=True)
        summary.write_text("")
    result = subprocess.run([sys.executable, "-c", REPORT_LISTER, "--cores", "1", "--configfile", configfile],
                            cwd=repo, env=snakemake_env(repo), capture_output=True, text=True, timeout=300)
    found = re.search(r"^report tree: (.*)$", result.stdout + result.stderr, re.MULTILINE)
    assert found, f"no report tree:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return json.loads(found.group(1))
