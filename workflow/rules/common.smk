# Configuration, backend and the cell grid. Everything here runs when the DAG is built.
import functools
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "workflow"))

from convlab.snakefile.api import (
    BENCH_FAMILY,
    CELL_PATH,
    FAMILIES,
    GALLERY_FAMILY,
    LOG_PATH,
    RUN_COMMIT_ENV,
    RUN_ID_ENV,
    SIZE_FIGURE_FAMILY,
    UserError,
    WARM_SHAPES_ENV,
    benchmark_kernels,
    build_cells,
    check_results_database,
    choose_backend,
    choose_devices,
    code_versions,
    cpu_source_note,
    end_of_run,
    export_service_settings,
    follows_clean_run,
    forget_clean_run,
    gallery_size,
    grid_shapes,
    image_sizes,
    problem_ranks,
    library_identity,
    live_run_line,
    load_registry,
    logged,
    mark_report_stage,
    move_damaged_rows,
    moved_lines,
    new_run_id,
    node_offers,
    note_clean_run,
    read_git_commit,
    refuse_local_cuda_without_gpu,
    relative,
    release_stale_lock,
    remove_rows_of_other_settings,
    remove_stale,
    rows_of_other_settings,
    stale_summaries,
    row_format,
    service_on,
    shapes_text,
    source_disagrees,
    sources_edited_since_recorded,
    start_service,
    unplaceable,
    validate_config,
)

# Jobs run the package from this checkout, whatever else is on PYTHONPATH. The path is
# relative to the working directory so that moving the checkout re-runs nothing. `-S`: a job is
# a thin client of the measurement service and needs no site-packages (convlab.app.cli restarts
# with them where a command runs in the job's own process).
PACKAGE_PATH = (
    f"PYTHONPATH={os.path.relpath(Path(workflow.basedir) / 'workflow')}"
    "${PYTHONPATH:+:$PYTHONPATH}"
)
RUNNER = f"{PACKAGE_PATH} python -S -m convlab"
# A cell job's own start (convlab.app.cellentry): `-c`, whose start costs less than `-m`'s.
CELL_CLIENT = (
    f"{PACKAGE_PATH} python -S -c 'from convlab.app.cellentry import run; run()'"
)

try:
    config = validate_config(config, source="config (config/config.yaml and --config)")
    CHOICE = choose_backend(config["backend"])
    BACKEND = CHOICE.backend
    PLACEMENTS, DEVICE_LINE = choose_devices(config, BACKEND, list(CHOICE.gpus))
    DEVICES = [placement.label for placement in PLACEMENTS]
    # the same grid under each label
    CELLS = [cell for label in DEVICES for cell in build_cells(config, BACKEND, label)]
except UserError as error:
    sys.exit(f"error: {error}")
KERNELS = load_registry()
# Every output of a device label lives here (the rules' {device} wildcard); other devices'
# results beside it stay untouched.
RESULTS = "results/{device}"
# Each label's cell rows.
CELL_PATHS = {
    label: [cell.path for cell in CELLS if cell.device == label] for label in DEVICES
}

# The run's first lines: the backend and device, and any damaged row, which is moved aside so
# that this run measures its cell again. Jobs that Snakemake starts on cluster nodes re-read
# this file; only the run the user started speaks (and moves files).
if workflow.is_main_process:
    # workflow.dryrun is not set yet while the Snakefile is read; the output settings already
    # hold the command line's dry run, which only says what the real run will do.
    DRY_RUN = workflow.output_settings.dryrun
    # A second run beside a live one stops here, before it moves or prints anything, with the
    # line that names the live run (Snakemake's own refusal advises --unlock).
    beside = None if DRY_RUN else live_run_line()
    if beside:
        sys.exit(beside)
    print(f"{CHOICE.line}; {DEVICE_LINE}", file=sys.stderr)
    for label, paths in CELL_PATHS.items():
        moved = move_damaged_rows(paths, f"results/{label}", DRY_RUN)
        for line in moved_lines(moved, f"results/{label}"):
            print(line, file=sys.stderr)
        # a row knows the settings it was measured with: one of other settings is measured again,
        # whether or not Snakemake's records of the params survive
        other_settings = rows_of_other_settings(
            (cell.path, cell.spec_hash) for cell in CELLS if cell.device == label
        )
        for line in remove_rows_of_other_settings(other_settings, DRY_RUN):
            print(line, file=sys.stderr)
        # every run checks the results database, one with nothing to do too
        for line in check_results_database(
            f"results/{label}",
            [cell for cell in CELLS if cell.device == label],
            config["verdicts"]["threshold"],
            DRY_RUN,
        ):
            print(line, file=sys.stderr)
    if BACKEND == "cpu":
        for label in DEVICES:
            edited = sources_edited_since_recorded(f"results/{label}", CELLS, KERNELS)
            if edited:
                print(cpu_source_note(edited), file=sys.stderr)
    # A run killed with SIGKILL leaves Snakemake's lock behind; the next run removes it (never
    # a live run's).
    released = release_stale_lock(dry_run=DRY_RUN)
    if released:
        print(released, file=sys.stderr)

# The measurement service's settings reach cell jobs through their environment, not their
# params, so that changing a timeout re-runs no cell.
export_service_settings(
    config["timing"]["cell_timeout_s"], config["service"]["idle_timeout_s"]
)
# The shapes of the grid's problems: a service this run starts warms its workers on those alone.
os.environ[WARM_SHAPES_ENV] = shapes_text(grid_shapes(CELLS))
# The commit the rows name, read once per run rather than by the service for every cell.
os.environ[RUN_COMMIT_ENV] = read_git_commit()
# The run's id: its jobs (on a cluster node too, where this file is read again) keep the one the
# user's run chose, so that the record step knows which rows this run measured.
if workflow.is_main_process:
    os.environ[RUN_ID_ENV] = new_run_id()


# Part of every cell's params: a change to the row's columns re-measures every cell once.
ROW_FORMAT = row_format()
# Hashes of the Python code behind each kind of output, in their rules' params.
CODE = code_versions(BACKEND)

CELLS_BY_PATH = {cell.path: cell for cell in CELLS}
# The order cells run in: a problem's cells one after another (its operands and reference are
# made once in the worker), in (10, 11), above the ceiling's and the gallery's device jobs, which
# run midway (MIDWAY) instead of after the last cell, where the report stage waits for them.
CELL_PRIORITY = {path: 10 + rank for path, rank in problem_ranks(CELLS).items()}
MIDWAY = 10.5
SIZES = image_sizes(CELLS)
GALLERY_SIZE = gallery_size(config, CELLS)
BANDWIDTH = f"{RESULTS}/device/{BACKEND}_copy_bandwidth.json"
CEILING = f"{RESULTS}/device/{BACKEND}_sgemm_ceiling.json"
# what compile_ahead() compiled before the cells
COMPILED = f"{RESULTS}/device/{BACKEND}_compiled_kernels.json"
GPU_JOB = 1 if BACKEND == "cuda" else 0


onstart:
    forget_clean_run()
    preflight()
    lift_local_rate_limit()
    start_measuring()


# On a cluster these run on the submitting host: they are quick and need no GPU.
localrules:
    all,
    report_stage_reset,
    source_image,
    downscale,
    aggregate,
    figures,
    gallery_input,


# Limits on these given with --resources apply per group submission, not to the whole run:
# with the slurm profile's gpu=1 and measurement=1 a group holds one cell at a time and asks
# for one cell's GPU, CPUs and memory, and any number of groups run side by side.
resource_scopes:
    gpu="local",
    measurement="local",


wildcard_constraints:
    device="|".join(DEVICES),
    backend="cuda|cpu",
    size=r"\d+",
    experiment="|".join(FAMILIES),
    kernel="|".join(sorted(KERNELS)),
    # the problem is a path (size~N/stride~S/filter~F, ...); the variant is the last component
    problem=r"[a-z_]+~.+",
    variant=r"[^/]+",


def cell_of(wildcards):
    path = CELL_PATH.format(**wildcards)
    if path not in CELLS_BY_PATH:
        raise ValueError(f"{path} is not a cell of the configured grid")
    return CELLS_BY_PATH[path]


def cell_priority(wildcards):
    return CELL_PRIORITY[cell_of(wildcards).path]


def cell_spec(wildcards):
    """The cell's full settings as JSON. A function of the wildcards (not of the output),
    so that Snakemake's params trigger sees it and re-runs a cell whose settings change.
    """
    return cell_of(wildcards).to_json()


def cell_image(wildcards):
    """The picture a cell reads; cells on random data (CNN layers, GEMM) read none."""
    image = cell_of(wildcards).image
    return [image] if image else []


def image_option(wildcards, input):
    return f"--image {input.image}" if input.image else ""


@functools.cache
def files_of(kernel, backend):
    """A kernel's own files: editing one kernel re-runs only the jobs that use it (cached: asked
    once per cell job while the DAG is built)."""
    return [relative(p) for p in KERNELS[kernel].files(backend)]


@functools.cache
def libraries_of(kernel, backend):
    """The libraries a kernel calls and their installed versions: a cell's params carry them, so
    that upgrading one re-measures exactly the cells of the kernels that call it."""
    return library_identity(KERNELS[kernel].libraries(backend))


def kernel_libraries(wildcards):
    return libraries_of(wildcards.kernel, wildcards.backend)


def bench_kernel_files():
    """The files of every kernel the benchmark runs: the conv contenders, our SGEMMs and cuBLAS."""
    return sorted(
        {path for kernel in benchmark_kernels() for path in files_of(kernel, "cuda")}
    )


def kernel_files(wildcards):
    return list(files_of(wildcards.kernel, wildcards.backend))


def gallery_kernel_files(wildcards):
    return list(files_of(wildcards.kernel, BACKEND))


def gallery_cells(device):
    """One cell of the gallery's family per kernel at the gallery size, stride 1: the edge maps a
    person looks at."""
    chosen = {}
    for cell in CELLS:
        if (
            cell.device == device
            and cell.experiment == GALLERY_FAMILY.name
            and cell.size == GALLERY_SIZE
            and cell.stride == 1
        ):
            chosen.setdefault(cell.kernel, cell)
    return chosen


def preflight():
    """Before the first job: refuse what would fail every measurement (cuda with no GPU where
    the jobs run), and a device label that no node of the cluster can run."""
    try:
        refuse_local_cuda_without_gpu(CHOICE, workflow.executor_plugin.name)
    except UserError as error:
        sys.exit(f"error: {error}")
    placed = [p for p in PLACEMENTS if p.gpu_model or p.constraint]
    offers = (
        node_offers() if placed and workflow.executor_plugin.name == "slurm" else None
    )
    if offers:
        problem = unplaceable(placed, *offers)
        if problem:
            sys.exit(f"error: {problem}")


def lift_local_rate_limit():
    """A local run has no job-rate limit. Snakemake's limiter (default 100 jobs/s) ends each
    scheduling round by arming a timer that starts another round a second later, which arms
    another: every finished job adds a timer chain for as long as jobs wait, and each round
    re-evaluates every waiting job. A cluster run keeps it: it paces submissions."""
    if workflow.executor_plugin.name == "local":
        workflow.scheduler.job_rate_limiter = None


def start_measuring():
    """As a local run that measures cells starts, the measurement service starts, and on the cuda
    backend the compile-ahead: neither is waited for (their workers warm up beside the first jobs).
    """
    if workflow.executor_plugin.name != "local":
        return
    if not any(job.rule.name == "cell" for job in workflow.dag.needrun_jobs()):
        return
    if service_on():
        start_service(BACKEND)
    compile_ahead()


def compile_ahead():
    """As a local cuda run that measures cells starts: every source module of the grid compiled on
    all the host's cores, into the device worker that then measures the cells and into CuPy's
    cache, so that no cell pays a cold compile (unchanged modules come from the cache). Not a
    rule: the cells would have to depend on it, and its re-run after one kernel's edit would
    re-measure every cell (with ancient() inputs Snakemake skips the cells' own checks instead).
    Not waited for: it starts the service, whose worker warms up beside it, while the first jobs
    start; the worker takes the cells, the copy bandwidth and the SGEMM ceiling only after both
    (convlab.service.worker). On a cluster each group compiles as its cells ask."""
    if BACKEND != "cuda":
        return
    grid = shlex.quote(json.dumps(config, sort_keys=True))
    for label in DEVICES:
        log = Path(f"results/{label}/logs/device/{BACKEND}_compile_kernels.log")
        log.parent.mkdir(parents=True, exist_ok=True)
        out = COMPILED.format(device=label)
        command = f"{RUNNER} compile-kernels --config {grid} --device {label} --backend {BACKEND} --out {out}"
        with open(log, "w") as output:
            subprocess.Popen(
                command, shell=True, stdout=output, stderr=subprocess.STDOUT
            )


def placement_resources():
    """Resources that send a device label's jobs to its nodes: Slurm's gpu_model (with the
    gpu resource) and constraint, as config devices names them; none for one label."""
    resources = {}
    if any(p.gpu_model for p in PLACEMENTS):
        models = {p.label: p.gpu_model for p in PLACEMENTS}
        resources["gpu_model"] = lambda wildcards: models[wildcards.device]
    if any(p.constraint for p in PLACEMENTS):
        constraints = {p.label: p.constraint for p in PLACEMENTS}
        resources["constraint"] = lambda wildcards: constraints[wildcards.device]
    return resources


# A group submission holds one device label's cells, so that its jobs ask for that label's
# nodes: with several labels the group is one per label, `cells_{device}`, whose size
# (--group-components) is given under that name, wildcard and all.
CELL_GROUP = "cells" if len(DEVICES) == 1 else "cells_{device}"


def device_summaries():
    """This run's summaries and every other device's already under results/."""
    others = sorted(
        str(path)
        for path in Path("results").glob("*/summary.csv")
        if path.parent.name not in DEVICES
    )
    return [f"results/{label}/summary.csv" for label in DEVICES] + others


def verdict_heading(device):
    """The line above a device label's verdict when a run measures several labels."""
    return f"results/{device}:\n" if len(DEVICES) > 1 else ""


def final_outputs():
    # The rows are targets themselves: a row that went missing (say, moved aside as damaged)
    # is measured again even though the summary built from it is still there.
    outputs = [cell.path for cell in CELLS]
    # The downscaled pictures and the summary's slices too: one removed because it no longer stands
    # for what it was made from (freshness, below and in data.smk) is then made again, and what is
    # made from it follows by its time; Snakemake does not make a missing file again where what was
    # made from it looks up to date. Not the source: one deleted to save space is made again only
    # where a picture is.
    outputs += [f"data/input_{size}.png" for size in SIZES]
    outputs += [
        f"results/{label}/summary/{family}.csv"
        for label in DEVICES
        for family in FAMILIES
    ]
    for label in DEVICES:
        results = f"results/{label}"
        outputs += [f"{results}/summary.csv"]
        outputs += [f"{results}/verdicts/latest.txt", f"{results}/history.html"]
        if config["counters"]:
            outputs += [
                f"{results}/counters.html",
                f"{results}/figures/roofline_measured.png",
            ]
        outputs += [
            f"{results}/gallery/{kernel}_{GALLERY_SIZE}.png"
            for kernel in gallery_cells(label)
        ]
    return outputs + expand(DEVICE_REPORT_OUTPUTS, device=DEVICES) + REPORT_OUTPUTS


# Two inputs only order jobs, as ancient() files: the report's drawing jobs start after the
# verdict's file, so that the verdict prints before anything is drawn; and a family's slice of the
# summary waits for every cell (aggregate.smk), so that nothing is drawn while a cell is timed.
# But Snakemake never checks on its own merits a job below an ancient() input of a job that must
# run: an output that a run which stopped left older than its inputs would stay so. So a run that
# does not follow one that ended cleanly (or start from nothing) re-makes the whole report stage:
# the slices take REDRAWN, which is made again whenever REPORT_SUSPECT is newer.
RECORDED = ancient(f"{RESULTS}/verdicts/latest.txt")
REPORT_SUSPECT = ".snakemake/convlab-report-suspect"
REDRAWN = "results/.report-redrawn"
if workflow.is_main_process:
    mark_report_stage(
        Path(REPORT_SUSPECT), suspect=not follows_clean_run(os.path.exists(REDRAWN))
    )
