# Configuration, backend and the cell grid. Everything here runs when the DAG is built.
import functools
import os
import shlex
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "workflow"))

from convlab.backends import resolve_backend
from convlab.config import ConfigError, validate_config
from convlab.families import build_cells, gallery_size, image_sizes
from convlab.grid import CELL_PATH, LOG_PATH
from convlab.registry import load_registry, relative
from convlab.row import row_format
from convlab.service.client import export_service_settings

# Jobs run the package from this checkout, whatever else is on PYTHONPATH. The path is
# relative to the working directory so that moving the checkout re-runs nothing. `-S`: a job is
# a thin client of the measurement service and needs no site-packages (convlab.cli restarts
# with them where a command runs in the job's own process).
RUNNER = (
    f"PYTHONPATH={os.path.relpath(Path(workflow.basedir) / 'workflow')}"
    "${PYTHONPATH:+:$PYTHONPATH} python -S -m convlab"
)

try:
    config = validate_config(config, source="config (config/config.yaml and --config)")
    BACKEND = resolve_backend(config["backend"], quick=True)
    CELLS = build_cells(config, BACKEND)
except ConfigError as error:
    sys.exit(f"error: {error}")

# The measurement service's settings reach cell jobs through their environment, not their
# params, so that changing a timeout re-runs no cell.
export_service_settings(
    config["timing"]["cell_timeout_s"], config["service"]["idle_timeout_s"]
)
# Part of every cell's params: a change to the row's columns re-measures every cell once.
ROW_FORMAT = row_format()

CELLS_BY_PATH = {cell.path: cell for cell in CELLS}
KERNELS = load_registry()
SIZES = image_sizes(CELLS)
GALLERY_SIZE = gallery_size(config, CELLS)
BANDWIDTH = f"results/device/{BACKEND}_copy_bandwidth.json"
CEILING = f"results/device/{BACKEND}_sgemm_ceiling.json"
GPU_JOB = 1 if BACKEND == "cuda" else 0


# On a cluster these run on the submitting host: they are quick and need no GPU.
localrules:
    all,
    source_image,
    downscale,
    aggregate,
    figures,
    gallery_input,


# A `gpu` limit given with --resources applies per group submission (see the slurm profile).
resource_scopes:
    gpu="local",


wildcard_constraints:
    backend="cuda|cpu",
    size=r"\d+",
    experiment="conv2d|tiling|winograd_layers|gemm",
    kernel="|".join(sorted(KERNELS)),
    # the problem is a path (size~N/stride~S/filter~F, ...); the variant is the last component
    problem=r"[a-z_]+~.+",
    variant=r"[^/]+",


def cell_of(wildcards):
    path = CELL_PATH.format(**wildcards)
    if path not in CELLS_BY_PATH:
        raise ValueError(f"{path} is not a cell of the configured grid")
    return CELLS_BY_PATH[path]


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


def kernel_files(wildcards):
    return list(files_of(wildcards.kernel, wildcards.backend))


def gallery_kernel_files(wildcards):
    return list(files_of(wildcards.kernel, BACKEND))


def figure(name, title):
    """A report figure of the conv2d experiment, captioned by workflow/report/<name>.rst."""
    return report(
        f"results/figures/{name}.png",
        caption=f"../report/{name}.rst",
        category="conv2d",
        subcategory="Figures",
        labels={"figure": title, "backend": BACKEND},
    )


def gallery_cells():
    """One conv2d cell per kernel at the gallery size, stride 1: the edge maps a person looks at."""
    chosen = {}
    for cell in CELLS:
        if (
            cell.experiment == "conv2d"
            and cell.size == GALLERY_SIZE
            and cell.stride == 1
        ):
            chosen.setdefault(cell.kernel, cell)
    return chosen


def stop_measurement_service():
    """At the end of a run, the service it started finishes and exits (else it idles out).
    The jobs' own interpreter asks, so that it finds the service they used."""
    subprocess.run(f"{RUNNER} serve --stop --quiet", shell=True, check=False)


def final_outputs():
    outputs = ["results/summary.csv", "results/figures/time_vs_size.png"]
    outputs += [
        f"results/gallery/{kernel}_{GALLERY_SIZE}.png" for kernel in gallery_cells()
    ]
    return outputs + REPORT_OUTPUTS
