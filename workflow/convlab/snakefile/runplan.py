"""The run's plan: one object built once from the config, which owns the backend, the device
labels and the cells, and answers every question the rules ask of them.

The rules (workflow/rules/*.smk) hold rules, wildcard constraints and one-line lookups on the plan;
what they ask of a job's wildcards (its cell, its kernel's files, its priority) are the plan's
methods, which Snakemake calls as input and params functions. Nothing here runs a check or a repair
(convlab.snakefile.prologue) or sets the jobs' environment (convlab.snakefile.jobenvironment).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from convlab.backends.choice import BackendChoice, choose_backend
from convlab.bench.floor import CONTENDERS
from convlab.bench.floor import FAMILY as BENCH_FAMILY
from convlab.bench.sgemm import LIBRARY as SGEMM_LIBRARY
from convlab.bench.sgemm import OURS as SGEMM_OURS
from convlab.codeversion import (
    benchmark_version,
    data_version,
    file_contents,
    fingerprint_contents,
    gallery_version,
    history_version,
    measurement_version,
    report_version,
    summary_version,
)
from convlab.history.verdictpolicy import VerdictPolicy
from convlab.measure.row import row_format
from convlab.paths import REPO_ROOT
from convlab.plan.cell import CELL_PATH, LOG_PATH, Cell
from convlab.plan.config import validate_run_config
from convlab.plan.configfile import DEFAULT_CONFIG_FILE
from convlab.plan.devicelabel import Placement, choose_devices
from convlab.plan.families import FAMILIES, GALLERY_FAMILY
from convlab.plan.grid import build_cells, gallery_size, image_sizes, problem_ranks
from convlab.plan.gridfile import grid_path, grid_text, write_grid
from convlab.plan.libraryversions import identity as library_identity
from convlab.plan.registry import KernelSpec, load_registry, relative
from convlab.service.door import CELL_CLIENT
from convlab.snakefile.reportplan import ReportPlan
from convlab.snakefile.rulefunction import rule_function

# Every output of a device label lives here (the rules' {device} wildcard); other devices' results
# beside it stay untouched.
RESULTS = "results/{device}"
# The cells run in (10, 11) by problem (problem_ranks): above the device jobs the report alone needs
# (the SGEMM ceiling, the gallery), which run midway instead of after the last cell, where the
# report stage would wait for them.
CELL_PRIORITY_BASE = 10
MIDWAY = 10.5
# The report stage's marks (convlab.snakefile.prologue writes the first): the whole report stage is
# made again from REDRAWN whenever REPORT_SUSPECT is newer.
REPORT_SUSPECT = ".snakemake/convlab-report-suspect"
REDRAWN = "results/.report-redrawn"


def code_versions(backend: str) -> dict[str, str]:
    """Hashes of the Python code behind each kind of output, for their rules' params: an edit to the
    measurement code re-measures the cells, an edit to a figure re-renders only the report."""
    return {
        "measurement": measurement_version(backend),
        "summary": summary_version(),
        "history": history_version(),
        "report": report_version(),
        "gallery": gallery_version(backend),
        "data": data_version(),
        "benchmark": benchmark_version(),
    }


def benchmark_kernels() -> list[str]:
    """Every kernel the benchmark rule runs: the convolution contenders, our SGEMMs and the library's."""
    return sorted({kernel for _, _, kernel in CONTENDERS} | {*SGEMM_OURS, SGEMM_LIBRARY})


def job_commands(basedir: str | Path, working_dir: str | Path = ".") -> tuple[str, str]:
    """How a job runs the package (`python -m convlab`) and how a cell job sends its cell.

    Jobs run the package from this checkout, whatever else is on PYTHONPATH; the path is relative to
    the working directory, so that moving the checkout re-runs nothing. `-S`: a job is a thin client
    of the measurement service and needs no site-packages (convlab.app.cli restarts with them where
    a command runs in the job's own process). A cell job's own shell reads the cell client
    (convlab/service/cellclient.sh), which sends the cell without starting Python where it can."""
    package = os.path.relpath(Path(basedir) / "workflow", working_dir)
    runner = f"PYTHONPATH={package}${{PYTHONPATH:+:$PYTHONPATH}} python -S -m convlab"
    return runner, f". {shlex.quote(os.path.join(package, CELL_CLIENT))}"


class RunPlan:
    """The validated config, the backend chosen for it (and why), the device labels and the cells of
    each, the kernel registry, and the lookups the rules make on them."""

    def __init__(self, config: Mapping[str, Any], choice: BackendChoice, placements: list[Placement],
                 device_line: str, cells: list[Cell], kernels: Mapping[str, KernelSpec], basedir: str | Path) -> None:
        self.config = dict(config)
        self.choice = choice
        self.backend = choice.backend
        self.placements = list(placements)
        self.device_line = device_line
        self.devices = [placement.label for placement in placements]
        self.cells = list(cells)
        self.kernels = dict(kernels)
        self.runner, self.cell_client = job_commands(basedir)
        self.results = RESULTS
        # a cell's row and its job's log, by its wildcards
        self.cell_path = CELL_PATH
        self.log_path = LOG_PATH
        self.midway = MIDWAY
        self.report_suspect = REPORT_SUSPECT
        self.redrawn = REDRAWN
        self.cells_by_path = {cell.path: cell for cell in self.cells}
        self.cell_paths = {label: [cell.path for cell in self.cells if cell.device == label] for label in self.devices}
        self.family_cell_paths = {
            label: {name: [cell.path for cell in self.cells if cell.device == label and cell.experiment == name]
                    for name in FAMILIES}
            for label in self.devices}
        self.priorities = {path: CELL_PRIORITY_BASE + rank for path, rank in problem_ranks(self.cells).items()}
        self.sizes = image_sizes(self.cells)
        self.gallery_size = gallery_size(self.config, self.cells)
        self.bandwidth = f"{RESULTS}/device/{self.backend}_copy_bandwidth.json"
        self.ceiling = f"{RESULTS}/device/{self.backend}_sgemm_ceiling.json"
        # what the compile-ahead compiled before the cells
        self.compiled = f"{RESULTS}/device/{self.backend}_compiled_kernels.json"
        self.gpu_job = 1 if self.backend == "cuda" else 0
        # A group submission holds one device label's cells, so that its jobs ask for that label's
        # nodes: with several labels the group is one per label, `cells_{device}`, whose size
        # (--group-components) is given under that name, wildcard and all.
        self.cell_group = "cells" if len(self.devices) == 1 else "cells_{device}"
        # Part of every cell's params: a change to the row's columns re-measures every cell once.
        self.row_format = row_format()
        # Hashes of the Python code behind each kind of output, in their rules' params.
        self.code = code_versions(self.backend)
        # the numbers the verdicts are judged by, read from the config once
        self.policy = VerdictPolicy.from_config(self.config)
        # The grid as the jobs that need it whole (pair, record, counters, the compile-ahead) read it:
        # a file per device label named by its content, written as the run starts (write_grids). The
        # config as validated: the report's intro is added to self.config after the plan is built.
        self._grid_config = dict(self.config)
        self._grid_texts: dict[str, str] = {}
        self.report = ReportPlan(self.config, self.choice, self.devices, self.cells, basedir)
        self._files: dict[tuple[str, str], tuple[str, ...]] = {}
        self._kernel_hashes: dict[tuple[str, str], str] = {}
        self._libraries: dict[tuple[str, str], str] = {}
        # the pictures: the source (generated, or made from the user's picture) and its record
        self.source_size = self.config["source_size"]
        self.source_image = f"data/source_{self.source_size}.png"
        self.source_record = f"data/source_{self.source_size}.json"
        self.source_log = f"results/logs/data/source_{self.source_size}.log"
        user_image = self.config["source_image"]
        self.user_image_input = [user_image] if user_image and os.path.isfile(user_image) else []
        self.user_image_option = f"--user-image {shlex.quote(user_image)}" if user_image else ""
        # the benchmark rule's grid
        self.bench_sizes = list(self.config[BENCH_FAMILY]["sizes"])
        self.bench_strides = list(self.config[BENCH_FAMILY]["strides"])
        self.families = list(FAMILIES)
        self.gallery_family = GALLERY_FAMILY.name
        # the verdict's file: the report's drawing jobs wait for it (as an ancient() input)
        self.recorded = f"{RESULTS}/verdicts/latest.txt"
        # whether a row whose settings or measuring code differ from the plan's is measured again: as
        # Snakemake's params trigger does, unless the user turned it off (--rerun-triggers mtime)
        self.params_decide = True
        # what the run does as the DAG's first cell job is made (convlab.snakefile.entry sets it in the
        # run the user started), and whether the service and the compile-ahead have started
        self.on_first_cell_job: Callable[[], None] | None = None
        self.measuring_started = False

    @classmethod
    def build(cls, config: Mapping[str, Any], basedir: str | Path, default_file: str | None = DEFAULT_CONFIG_FILE,
              configfiles: Sequence[str | Path] = (), overrides: Mapping[str, Any] | None = None) -> RunPlan:
        """The plan of ``config`` (Snakemake's, its defaults not yet filled in: ``default_file``, each of
        ``configfiles`` laid over it, then the --config ``overrides``). UserError (ConfigError,
        BackendUnavailable) with one line for a config or a backend that cannot run, a config's naming
        the layer that made it."""
        default = default_file if default_file and Path(default_file).is_file() else None
        validated = validate_run_config(dict(config), default, configfiles, dict(overrides or {}))
        choice = choose_backend(validated["backend"])
        placements, device_line = choose_devices(validated, choice.backend, list(choice.gpus))
        # the same grid under each label
        cells = [cell for placement in placements for cell in build_cells(validated, choice.backend, placement.label)]
        return cls(validated, choice, placements, device_line, cells, load_registry(), basedir)

    # -- what the wildcards of the rules may be
    def wildcard_values(self) -> dict[str, str]:
        """The rules' wildcard constraints: each wildcard's values as a regular expression."""
        return {"device": "|".join(self.devices), "backend": "cuda|cpu", "size": r"\d+",
                "experiment": "|".join(FAMILIES), "kernel": "|".join(sorted(self.kernels)),
                # the problem is a path (size~N/stride~S/filter~F, ...); the variant is the last component
                "problem": r"[a-z_]+~.+", "variant": r"[^/]+"}

    # -- the grid a job over a device label's cells reads
    def grid_file(self, label: str) -> str:
        """The file a device label's grid is read from by its jobs (convlab.plan.gridfile)."""
        if label not in self._grid_texts:
            cells = [cell for cell in self.cells if cell.device == label]
            self._grid_texts[label] = grid_text(self._grid_config, cells)
        return grid_path(label, self._grid_texts[label])

    @rule_function
    def grid_of(self, wildcards: Any) -> str:
        """grid_file() of a job's device wildcard."""
        return self.grid_file(wildcards.device)

    def write_grids(self) -> None:
        """Each device label's grid file, as the run starts."""
        for label in self.devices:
            write_grid(self.grid_file(label), self._grid_texts[label])

    # -- a cell job's lookups, by its wildcards
    def cell_of(self, wildcards: Any) -> Cell:
        path = CELL_PATH.format(**wildcards)
        if path not in self.cells_by_path:
            raise ValueError(f"{path} is not a cell of the configured grid")
        return self.cells_by_path[path]

    @rule_function
    def cell_priority(self, wildcards: Any) -> float:
        return self.priorities[self.cell_of(wildcards).path]

    @rule_function
    def picture_priority(self, wildcards: Any) -> float:
        """A downscaled picture is made as its first reader's turn comes: the highest priority of the
        cells that read it (and the gallery's, where it shows it), so that the cells still run by
        problem and the gallery midway, whichever order Snakemake would give pictures of equal rank."""
        path = f"data/input_{wildcards.size}.png"
        readers = [self.priorities[cell.path] for cell in self.cells if cell.image == path]
        if int(wildcards.size) == self.gallery_size:
            readers.append(MIDWAY)
        return max(readers, default=0)

    @rule_function
    def cell_spec(self, wildcards: Any) -> str:
        """The cell's full settings as JSON. A function of the wildcards (not of the output), so that
        Snakemake's params trigger sees it and re-runs a cell whose settings change."""
        return self.cell_of(wildcards).to_json()

    @rule_function
    def cell_image(self, wildcards: Any) -> list[str]:
        """The picture a cell reads; cells on random data (CNN layers, GEMM) read none. Snakemake asks
        it first of each cell job it makes: the first ask runs on_first_cell_job."""
        if self.on_first_cell_job is not None:
            first, self.on_first_cell_job = self.on_first_cell_job, None
            first()
        image = self.cell_of(wildcards).image
        return [image] if image else []

    @rule_function
    def image_option(self, wildcards: Any, input: Any) -> str:
        return f"--image {input.image}" if input.image else ""

    def files_of(self, kernel: str, backend: str) -> tuple[str, ...]:
        """A kernel's own files: editing one kernel re-runs only the jobs that use it (kept: asked
        once per cell job while the DAG is built)."""
        key = (kernel, backend)
        if key not in self._files:
            self._files[key] = tuple(relative(path) for path in self.kernels[kernel].files(backend))
        return self._files[key]

    def kernel_hash(self, kernel: str, backend: str) -> str:
        """The hash of a kernel's own files now, as the results database keeps it beside each of its
        measurements ('' where the files lie outside the checkout)."""
        key = (kernel, backend)
        if key not in self._kernel_hashes:
            try:
                contents = file_contents(self.kernels[kernel].files(backend), root=REPO_ROOT)
            except ValueError:
                contents = None
            self._kernel_hashes[key] = fingerprint_contents(contents) if contents is not None else ""
        return self._kernel_hashes[key]

    def libraries_of(self, kernel: str, backend: str) -> str:
        """The libraries a kernel calls and their installed versions: a cell's params carry them, so
        that upgrading one re-measures exactly the cells of the kernels that call it."""
        key = (kernel, backend)
        if key not in self._libraries:
            self._libraries[key] = library_identity(self.kernels[kernel].libraries(backend))
        return self._libraries[key]

    @rule_function
    def kernel_files(self, wildcards: Any) -> list[str]:
        return list(self.files_of(wildcards.kernel, wildcards.backend))

    @rule_function
    def kernel_libraries(self, wildcards: Any) -> str:
        return self.libraries_of(wildcards.kernel, wildcards.backend)

    @rule_function
    def gallery_kernel_files(self, wildcards: Any) -> list[str]:
        return list(self.files_of(wildcards.kernel, self.backend))

    def bench_kernel_files(self) -> list[str]:
        """The files of every kernel the benchmark runs: the conv contenders, our SGEMMs and cuBLAS."""
        return sorted({path for kernel in benchmark_kernels() for path in self.files_of(kernel, "cuda")})

    def gallery_cells(self, device: str) -> dict[str, Cell]:
        """One cell of the gallery's family per kernel at the gallery size, stride 1: the edge maps a
        person looks at."""
        chosen: dict[str, Cell] = {}
        for cell in self.cells:
            if (cell.device == device and cell.experiment == GALLERY_FAMILY.name and cell.size == self.gallery_size
                    and cell.stride == 1):
                chosen.setdefault(cell.kernel, cell)
        return chosen

    @rule_function
    def gallery_spec(self, wildcards: Any) -> str:
        return self.gallery_cells(wildcards.device)[wildcards.kernel].to_json()

    @rule_function
    def family_cells(self, wildcards: Any) -> list[str]:
        """A family slice's rows: the cells of its family on its device label."""
        return self.family_cell_paths[wildcards.device][wildcards.experiment]

    @rule_function
    def other_family_cells(self, wildcards: Any) -> list[str]:
        """Every other cell of the slice's device label: the slice waits for them, so that no report
        job draws while a cell is timed."""
        return [path for name, paths in self.family_cell_paths[wildcards.device].items()
                if name != wildcards.experiment for path in paths]

    @rule_function
    def device_cells(self, wildcards: Any) -> list[str]:
        return self.cell_paths[wildcards.device]

    def placement_resources(self) -> dict[str, Any]:
        """Resources that send a device label's jobs to its nodes: Slurm's gpu_model (with the gpu
        resource) and constraint, as config devices names them; none for one label."""
        resources: dict[str, Any] = {}
        if any(p.gpu_model for p in self.placements):
            models = {p.label: p.gpu_model for p in self.placements}
            resources["gpu_model"] = lambda wildcards: models[wildcards.device]
        if any(p.constraint for p in self.placements):
            constraints = {p.label: p.constraint for p in self.placements}
            resources["constraint"] = lambda wildcards: constraints[wildcards.device]
        return resources

    @rule_function
    def verdict_heading(self, wildcards: Any) -> str:
        """The line above a device label's verdict when a run measures several labels."""
        return f"results/{wildcards.device}:\n" if len(self.devices) > 1 else ""

    def device_summaries(self, results: str | Path = "results") -> list[str]:
        """This run's summaries and every other device's already under results/."""
        others = sorted(str(path) for path in Path(results).glob("*/summary.csv") if path.parent.name not in self.devices)
        return [f"results/{label}/summary.csv" for label in self.devices] + others

    def final_outputs(self) -> list[str]:
        """What `rule all` asks for."""
        # The rows are targets themselves: a row that went missing (say, moved aside as damaged) is
        # measured again even though the summary built from it is still there.
        outputs = [cell.path for cell in self.cells]
        # The downscaled pictures and the summary's slices too: one removed because it no longer
        # stands for what it was made from (the prologue) is then made again, and what is made from
        # it follows by its time; Snakemake does not make a missing file again where what was made
        # from it looks up to date. Not the source: one deleted to save space is made again only
        # where a picture is.
        outputs += [f"data/input_{size}.png" for size in self.sizes]
        outputs += [f"results/{label}/summary/{family}.csv" for label in self.devices for family in FAMILIES]
        for label in self.devices:
            results = f"results/{label}"
            # the history page's figure too: Snakemake makes again only the outputs someone asks for,
            # so a figure removed beside its page that is still there would stay missing
            outputs += [f"{results}/summary.csv", f"{results}/verdicts/latest.txt", f"{results}/history.html",
                        f"{results}/figures/history.png"]
            if self.config["counters"]:
                outputs += [f"{results}/counters.html", f"{results}/figures/roofline_measured.png"]
            outputs += [f"{results}/gallery/{kernel}_{self.gallery_size}.png" for kernel in self.gallery_cells(label)]
        return outputs + self.report.outputs()
