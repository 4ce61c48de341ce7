"""The run's start and end: what happens as Snakemake starts the first job (Snakemake's `onstart`)
and once the last has ended (`onsuccess`, `onerror`), besides the rules.

At the start: the run forgets that the last one ended cleanly (until this one does), writes the
grid its jobs read (convlab.plan.gridfile), refuses what
would fail every measurement, lifts Snakemake's job-rate limit where it paces nothing, and, where it
will measure cells, starts the measurement service and the compile-ahead without waiting for them.
Where a cell's row is missing, they start earlier, as the DAG's first cell job is made: the
service's start and its workers' warm-up then overlap the rest of the DAG's build. While the service
warms up, the run also does now what Snakemake would do as the cells become ready (each job's
resources) and as the first job ends (importing pandas), so that the first cell waits for neither.
At the end: the service rests (or stops, after a failure), and a clean end is noted.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shlex
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from convlab.backends.choice import refuse_local_cuda_without_gpu
from convlab.paths import REPO_ROOT
from convlab.plan.devicelabel import unplaceable
from convlab.service.client import end_of_run, start_service
from convlab.service.jobenv import service_on
from convlab.snakefile.clusternodes import node_offers
from convlab.snakefile.runlock import forget_clean_run, note_clean_run
from convlab.snakefile.runplan import RunPlan
from convlab.status import UserError


def preflight(plan: RunPlan, executor: str) -> None:
    """Before the first job: UserError for what would fail every measurement (cuda with no GPU where
    the jobs run), and for a device label that no node of the cluster can run."""
    refuse_local_cuda_without_gpu(plan.choice, executor)
    placed = [p for p in plan.placements if p.gpu_model or p.constraint]
    offers = node_offers() if placed and executor == "slurm" else None
    if offers:
        problem = unplaceable(placed, *offers)
        if problem:
            raise UserError(problem)


def lift_local_rate_limit(workflow: Any) -> None:
    """A local run has no job-rate limit. Snakemake's limiter (default 100 jobs/s) ends each
    scheduling round by arming a timer that starts another round a second later, which arms another:
    every finished job adds a timer chain for as long as jobs wait, and each round re-evaluates every
    waiting job. A cluster run keeps it: it paces submissions. (Snakemake offers no setting for it:
    the scheduler's own field is set.)"""
    if workflow.executor_plugin.name == "local":
        workflow.scheduler.job_rate_limiter = None


def start_store_build(plan: RunPlan) -> subprocess.Popen:
    """The grids' modules compiled into the module store by a process of their own
    (convlab.backends.storebuild), which starts compiling before the service's workers can: each
    worker's compile-ahead then waits for it and loads what it built."""
    log = Path(f"results/logs/device/{plan.backend}_store_build.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT / "workflow"),
                                                                     os.environ.get("PYTHONPATH")]))}
    with open(log, "w") as output:
        return subprocess.Popen([sys.executable, "-m", "convlab.backends.storebuild",
                                 *(plan.grid_file(label) for label in plan.devices)],
                                stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT, env=env)


def compile_ahead(plan: RunPlan) -> list[subprocess.Popen]:
    """Every source module of the grid compiled on all the host's cores, into the device worker that
    then measures the cells and into CuPy's cache, so that no cell pays a cold compile (unchanged
    modules come from the cache); the processes started (none off the cuda backend). Not a rule: the
    cells would have to depend on it, and its re-run after one kernel's edit would re-measure every
    cell. Not waited for: the service's worker warms up beside it while the first jobs start, and takes
    the cells only after both (convlab.service.worker). The run's own store build starts first
    (start_store_build): the workers' compile-ahead waits for it and loads what it compiled."""
    if plan.backend != "cuda":
        return []
    started = [start_store_build(plan)]
    for label in plan.devices:
        log = Path(f"results/{label}/logs/device/{plan.backend}_compile_kernels.log")
        log.parent.mkdir(parents=True, exist_ok=True)
        out = plan.compiled.format(device=label)
        command = (f"{plan.runner} compile-kernels --grid {shlex.quote(plan.grid_file(label))} "
                   f"--backend {plan.backend} --out {out}")
        with open(log, "w") as output:
            started.append(subprocess.Popen(command, shell=True, stdout=output, stderr=subprocess.STDOUT))
    return started


def measures_cells(workflow: Any) -> bool:
    """Whether this run has a cell to measure."""
    return any(job.rule.name == "cell" for job in workflow.dag.needrun_jobs())


def start_measuring(plan: RunPlan) -> None:
    """The measurement service, started with the workers of the run's backend, and the compile-ahead
    (which reads the grid written first): once per run, without waiting for either."""
    if plan.measuring_started:
        return
    plan.measuring_started = True
    plan.write_grids()
    if service_on():
        start_service(*pools_for_run(plan.backend))
    compile_ahead(plan)


def pools_for_run(backend: str) -> tuple[str, ...]:
    """The service's pools a run starts as it begins: its backend's, and where the cells are timed on
    a GPU the tools pool too, whose workers (the report stage's) are then warm when the last cell
    ends instead of starting one after another in the report stage's time. On the cpu backend the
    cells are timed on the cores their imports would take."""
    return (backend, "tools") if backend == "cuda" else (backend,)


def start_beside_the_dag(plan: RunPlan, workflow: Any) -> None:
    """As the DAG's first cell job is made (RunPlan.cell_image): where the user's local run will
    measure, start measuring now, beside the rest of the DAG's build (seconds on a large grid),
    instead of at Snakemake's onstart. "Will measure" is known before the DAG only where a cell's
    row is missing: a run that then asks for no cell (a narrower target) leaves the service to idle
    out. A dry run's executor is not local; a run that onstart will refuse is left to it."""
    plugin = workflow.executor_plugin
    if not workflow.is_main_process or plugin is None or plugin.name != "local":
        return
    try:
        preflight(plan, plugin.name)
    except UserError:
        return
    if all(os.path.exists(path) for paths in plan.cell_paths.values() for path in paths):
        return
    start_measuring(plan)


def resolve_job_resources(workflow: Any) -> None:
    """Each job's resources as Snakemake's scheduler counts them, evaluated now, while the service
    warms up: the scheduler evaluates (and keeps) them for each job the first time it is ready, and
    a grid's cells all become ready at once, as the copy bandwidth is written, so that the first
    cell waited for all of them (half a second for a grid as large as the default one, on 2 cores). The same values, at a
    time when nothing waits for them."""
    for job in workflow.dag.needrun_jobs():
        _ = job.scheduler_resources  # evaluated once, and kept by the job


def preload_pandas() -> None:
    """Import pandas on a thread of the run's own process, while its first jobs run: Snakemake imports it
    there as the first job with params ends (its metadata record asks of each param whether it is a
    pandas object, where pandas is installed), and that job is the copy bandwidth, which every cell
    waits for: the import (0.8 s on an H200 host) then held the first cell back."""
    if importlib.util.find_spec("pandas") is not None:
        threading.Thread(target=importlib.import_module, args=("pandas",), name="preload-pandas", daemon=True).start()


def on_start(plan: RunPlan, workflow: Any) -> None:
    """As Snakemake starts the first job (see this module's docstring). UserError where the run must
    not go on. On a cluster each group starts its service and compiles as its cells ask."""
    forget_clean_run()
    plan.write_grids()
    executor = workflow.executor_plugin.name
    preflight(plan, executor)
    lift_local_rate_limit(workflow)
    if executor != "local" or not measures_cells(workflow):
        return
    start_measuring(plan)
    preload_pandas()
    resolve_job_resources(workflow)


def on_end(failed: bool) -> None:
    """Once the last job has ended: the run's service rests, warm for the next run (after a failed run
    it stops), and a clean end is noted for the next run's prologue."""
    end_of_run(failed=failed)
    if not failed:
        note_clean_run()
