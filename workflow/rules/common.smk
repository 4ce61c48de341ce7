# The run's plan, built once from the config (convlab.snakefile.runplan): the backend, the device
# labels and their cells, and every lookup the rules make on them. Building it validates the config,
# and in the run the user started runs the prologue (every check and repair before the DAG:
# convlab.snakefile.prologue) and sets the jobs' environment (convlab.snakefile.jobenvironment).
import os

from convlab.snakefile.api import logged, run_ended, run_started, start_run

PLAN = start_run(config, workflow)
# validated, every default filled in
config = PLAN.config
BACKEND = PLAN.backend
DEVICES = PLAN.devices
FAMILIES = PLAN.families
RESULTS = PLAN.results
CELL_PATH = PLAN.cell_path
LOG_PATH = PLAN.log_path
RUNNER = PLAN.runner
CODE = PLAN.code
BANDWIDTH = PLAN.bandwidth
CEILING = PLAN.ceiling
GPU_JOB = PLAN.gpu_job
MIDWAY = PLAN.midway
CELL_GROUP = PLAN.cell_group
PLACEMENT = PLAN.placement_resources()
WILDCARDS = PLAN.wildcard_values()
# Two inputs only order jobs, as ancient() files: the report's drawing jobs start after the
# verdict's file, so that the verdict prints before anything is drawn; and a family's slice of the
# summary waits for every cell (aggregate.smk). A run that may have left the report stage stale
# makes it again from REDRAWN (the prologue marks REPORT_SUSPECT).
RECORDED = ancient(PLAN.recorded)
REPORT_SUSPECT = PLAN.report_suspect
REDRAWN = PLAN.redrawn


onstart:
    run_started(PLAN, workflow)


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
    device=WILDCARDS["device"],
    backend=WILDCARDS["backend"],
    size=WILDCARDS["size"],
    experiment=WILDCARDS["experiment"],
    kernel=WILDCARDS["kernel"],
    problem=WILDCARDS["problem"],
    variant=WILDCARDS["variant"],
