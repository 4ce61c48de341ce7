"""The pipeline benchmark: how much of a full Snakemake run of the DAG is the measurement itself,
and how much is Snakemake's and the cell jobs' own cost.

In a scratch folder: a copy of a checkout, rebuilt in full (no results/, no .snakemake/), timed
with `snakemake`, then its no-op run; every cell row's times (convlab.bench.pipelinefigures); and
a bare Snakemake of as many trivial jobs, with the checkout's profile, cores and options, for
what Snakemake alone costs per job and for nothing to do. Standard library only.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from convlab.bench.pipelinefigures import CellTimes, Runs, TimedRun, read_cells
from convlab.status import UserError

# What a checkout that is not a git one is copied with: the workflow and what its rules read.
SOURCES = ("Snakefile", "workflow", "kernels", "config", "profiles", "envs")
# Never copied: a full rebuild starts without any result or Snakemake state (results/README.md is tracked).
LEFT_OUT = ("results", ".snakemake")
COMPLETE_LOG = re.compile(r"^Complete log\S*: (\S+)$", re.IGNORECASE | re.MULTILINE)
JOB_TOTAL = re.compile(r"^Job stats:\n(?:.*\n)*?total\s+(\d+)\s*$", re.MULTILINE)
NOTHING_TO_DO = "Nothing to be done"
# N - 1 independent jobs and `all`. Each job stamps its start with a bash builtin, so the stamps
# time Snakemake's own scheduling and job start, not a process of the job's.
BARE_SNAKEFILE = """\
# A bare Snakemake DAG of as many jobs as the benchmarked run: what Snakemake alone costs per job.
shell.executable("bash")


rule all:
    input:
        expand("stamps/{{job}}.txt", job=range({independent})),


rule stamp:
    output:
        "stamps/{{job}}.txt",
    shell:
        "printf '%s\\\\n' \\"$EPOCHREALTIME\\" > {{output}}"
"""


class PipelineFailed(UserError):
    """A benchmarked run failed, or its copy could not be made: one line, naming its log."""


@dataclass(frozen=True)
class Benchmark:
    """What the benchmark read: the cell rows' times, the timed runs, the rows it could not read,
    the scratch folder (removed afterwards unless kept) and the run's line naming its backend."""

    cells: list[CellTimes]
    runs: Runs
    skipped: list[str]
    scratch: Path
    backend_line: str = ""


def checkout_files(checkout: Path) -> list[str] | None:
    """The files git knows in ``checkout``: tracked ones, and new ones it does not ignore (a module
    not yet committed is part of the code under test); None where it is not a git checkout or
    tracks nothing."""
    try:
        listed = subprocess.run(["git", "-C", str(checkout), "ls-files", "-z", "--cached", "--others",
                                 "--exclude-standard"], capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    files = sorted({name for name in listed.decode().split("\0") if name})
    return files or None


def copy_checkout(checkout: Path, target: Path) -> int:
    """Copy ``checkout``'s files and its data/ to ``target`` with their times kept, so that its
    pictures are not made again (a GPU machine may have no ffmpeg); never its results/ or
    .snakemake/. The number of files copied."""
    files = checkout_files(checkout)
    if files is None:
        files = [str(path.relative_to(checkout)) for name in SOURCES for path in
                 ([checkout / name] if (checkout / name).is_file() else sorted((checkout / name).rglob("*")))
                 if path.is_file() and "__pycache__" not in path.parts]
    target.mkdir(parents=True, exist_ok=True)
    copied = 0
    for name in files:
        if Path(name).parts[0] in LEFT_OUT:
            continue
        source = checkout / name
        if not source.is_file() and not source.is_symlink():  # tracked, deleted since
            continue
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target / name, follow_symlinks=False)
        copied += 1
    if (checkout / "data").is_dir():
        shutil.copytree(checkout / "data", target / "data", copy_function=shutil.copy2, dirs_exist_ok=True)
    return copied


def snakemake_env() -> dict[str, str]:
    """This environment, with this interpreter's folder first on PATH (the jobs' `python` is the
    one running Snakemake) and PYTHONPATH without any folder that holds a convlab package: a
    benchmarked checkout runs its own code only, while packages installed onto PYTHONPATH (with
    pip --target, say) stay found."""
    env = dict(os.environ)
    kept = [folder for folder in env.pop("PYTHONPATH", "").split(os.pathsep)
            if folder and not os.path.isfile(os.path.join(folder, "convlab", "__init__.py"))]
    if kept:
        env["PYTHONPATH"] = os.pathsep.join(kept)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def timed_snakemake(workdir: Path, options: Sequence[str], log: Path) -> TimedRun:
    """`snakemake OPTIONS` in ``workdir``, its output to ``log``: when it started and ended.
    PipelineFailed naming the log if it fails."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as output:
        started = time.time()
        code = subprocess.run([sys.executable, "-m", "snakemake", *options], cwd=workdir, env=snakemake_env(),
                              stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT).returncode
        finished = time.time()
    if code != 0:
        raise PipelineFailed(f"snakemake {' '.join(options)} failed in {workdir} (exit {code}); log: {log}")
    return TimedRun(started, finished)


def complete_log(workdir: Path, output: str) -> Path | None:
    """The run's complete log: the one its output names, else the newest under .snakemake/log/."""
    named = [Path(path) for path in COMPLETE_LOG.findall(output)]
    logs = named or sorted((workdir / ".snakemake" / "log").glob("*.snakemake.log"), key=os.path.getmtime)
    return logs[-1] if logs and logs[-1].is_file() else None


def job_total(log_text: str) -> int | None:
    """The `total` of the first "Job stats" table of a complete log: every job of the DAG."""
    found = JOB_TOTAL.search(log_text)
    return int(found[1]) if found else None


def bare_snakefile(jobs: int) -> str:
    """A Snakefile of ``jobs`` jobs: ``jobs`` - 1 independent ones and `all`."""
    return BARE_SNAKEFILE.format(independent=jobs - 1)


def read_stamps(folder: Path) -> list[float]:
    return sorted(float(path.read_text().strip().replace(",", ".")) for path in folder.glob("*.txt"))


def configfile_in(copy: Path, checkout: Path, configfile: str) -> str:
    """The config file as the run in ``copy`` names it: as given where the copy holds it, else the
    file's absolute path (a file git ignores, or one outside the checkout)."""
    path = Path(configfile)
    if not path.is_absolute() and (copy / path).is_file():
        return configfile
    for candidate in (path, checkout / path):
        if candidate.is_file():
            return str(candidate.resolve())
    raise PipelineFailed(f"no config file {configfile} (in {checkout} or here)")


def scratch_folder(keep: str | None) -> Path:
    if keep is None:
        return Path(tempfile.mkdtemp(prefix="convlab-bench-pipeline-"))
    folder = Path(keep)
    if folder.exists() and any(folder.iterdir()):
        raise PipelineFailed(f"--keep {keep}: not empty (the benchmark rebuilds from nothing)")
    folder.mkdir(parents=True, exist_ok=True)
    return folder.resolve()


def benchmark_pipeline(checkout: Path, configfile: str, cores: int, extra: Sequence[str], scratch: Path,
                       say: Callable[[str], None] = lambda line: None) -> Benchmark:
    """The real run and its no-op in ``scratch``/checkout, the bare run and its no-op in
    ``scratch``/bare, each with ``cores`` and the ``extra`` options; logs in ``scratch``/logs."""
    copy, bare, logs = scratch / "checkout", scratch / "bare", scratch / "logs"
    say(f"copied {copy_checkout(checkout, copy)} files of {checkout} to {copy}")
    options = ["--cores", str(cores), "--configfile", configfile_in(copy, checkout, configfile), *extra]
    say(f"snakemake {' '.join(options)} (log: {logs / 'pipeline.log'})")
    real = timed_snakemake(copy, options, logs / "pipeline.log")
    output = (logs / "pipeline.log").read_text(errors="replace")
    backend_line = next((line for line in output.splitlines() if line.startswith("backend ")), "")
    log = complete_log(copy, output)
    # The job count is the complete log's "Job stats" total: the DAG Snakemake ran, `all` included.
    jobs = job_total(log.read_text(errors="replace")) if log else None
    if not jobs:
        raise PipelineFailed(f"no Job stats table in the run's complete log ({log or 'none found'}) to count jobs")
    noop = timed_snakemake(copy, options, logs / "pipeline-noop.log")
    noop_idle = NOTHING_TO_DO in (logs / "pipeline-noop.log").read_text(errors="replace")
    say(f"bare Snakemake of {jobs} jobs (log: {logs / 'bare.log'})")
    bare.mkdir()
    (bare / "Snakefile").write_text(bare_snakefile(jobs))
    if (copy / "profiles").is_dir():  # the same default profile: logger plugin, rerun-incomplete
        shutil.copytree(copy / "profiles", bare / "profiles")
        # which reads each --configfile with the package beside the Snakefile, installed or not
        (bare / "workflow").symlink_to(copy / "workflow", target_is_directory=True)
    bare_options = ["--cores", str(cores), *extra]
    bare_run = timed_snakemake(bare, bare_options, logs / "bare.log")
    bare_noop = timed_snakemake(bare, bare_options, logs / "bare-noop.log")
    cells, skipped = read_cells(copy / "results")
    runs = Runs(real, noop, bare_run, bare_noop, jobs, read_stamps(bare / "stamps"), noop_idle)
    return Benchmark(cells, runs, skipped, scratch, backend_line)
