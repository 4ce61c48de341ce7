"""What the run hands its jobs through their environment (the one writer of the run's `CONVLAB_*`
variables; the service and the cell jobs read them, convlab.service.jobenv and convlab.service.runsocket).

Through the environment, not the jobs' params, so that none of them re-runs a job: the service's
timeouts, the code's hash and the service's socket (convlab.service.client), the shapes of the grid's
problems (a service this run starts warms its workers on those alone), the commit the rows name (read
once per run rather than by the service for every cell), the run's id, and BASH_ENV, by which each
job's shell stamps the moment it starts (a cell job's start-up is timed from it). Snakemake's jobs inherit the
environment of the process that reads the Snakefile, on a cluster node too, where it is read again:
there the jobs keep the id the user's run chose (its environment travels with the submission), so
that the record step knows which rows this run measured.
"""

from __future__ import annotations

import locale
import os
from collections.abc import Mapping
from pathlib import Path

from convlab.measure.provenance import read_git_commit
from convlab.measure.rowjournal import new_run_id
from convlab.run.warmup import WARM_SHAPES_ENV, grid_shapes, shapes_text
from convlab.service.client import export_service_settings
from convlab.service.jobenv import RUN_COMMIT_ENV, RUN_ID_ENV
from convlab.snakefile.runplan import RunPlan

# sourced by each job's bash as it starts (job_shell_start)
JOB_START_SCRIPT = Path(__file__).with_name("jobstart.sh")
# the BASH_ENV the user had, which the script sources after its stamp
USER_BASH_ENV = "CONVLAB_USER_BASH_ENV"
# glibc builds it in (2.35 and newer): installed wherever the run is
FALLBACK_LOCALE = "C.UTF-8"


def run_facts(plan: RunPlan, main_process: bool) -> dict[str, str]:
    """The grid's shapes, the commit and (in the run the user started) a new run id."""
    facts = {WARM_SHAPES_ENV: shapes_text(grid_shapes(plan.cells)), RUN_COMMIT_ENV: read_git_commit()}
    if main_process:
        facts[RUN_ID_ENV] = new_run_id()
    return facts


def job_shell_start(environment: Mapping[str, str]) -> dict[str, str]:
    """BASH_ENV naming JOB_START_SCRIPT, which each job's bash sources as it starts: it stamps the
    moment (JOB_STARTED_ENV) and then sources the BASH_ENV the user had (USER_BASH_ENV). The
    kernel's own start time of a process counts in clock ticks of 10 ms, as coarse as the start-up a
    cell job measures from it. Nothing where the script is not there to source, or its path is one
    bash would change."""
    script = str(JOB_START_SCRIPT)
    # bash expands BASH_ENV before it reads the file: a path it would change cannot be named there
    if not JOB_START_SCRIPT.is_file() or any(character in script for character in "$`\\"):
        return {}
    user = environment.get("BASH_ENV", "")
    # a cluster node's run inherits the submitting run's BASH_ENV, which is already the script
    kept = environment.get(USER_BASH_ENV, "") if user == script else user
    return {"BASH_ENV": script, USER_BASH_ENV: kept}


def missing_locale() -> str | None:
    """The locale the environment names (LC_ALL, LC_CTYPE or LANG) where it is not installed here, or
    None: every job's shell would warn of it (bash's `setlocale` line, once per job)."""
    try:
        locale.setlocale(locale.LC_ALL, "")
    except locale.Error:
        return next((os.environ[name] for name in ("LC_ALL", "LC_CTYPE", "LANG") if os.environ.get(name)), "?")
    return None


def export_job_environment(plan: RunPlan, main_process: bool) -> None:
    """Set every variable the run's jobs read (see this module's docstring), and a locale that is
    installed where the one the environment names is not (FALLBACK_LOCALE: the prologue says so once)."""
    export_service_settings(plan.config["timing"]["cell_timeout_s"], plan.config["service"]["idle_timeout_s"])
    os.environ.update(run_facts(plan, main_process))
    os.environ.update(job_shell_start(os.environ))
    if missing_locale():
        os.environ["LC_ALL"] = FALLBACK_LOCALE
