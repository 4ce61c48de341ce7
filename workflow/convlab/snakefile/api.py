"""What the Snakefile's rules take from the package: the one module they import (workflow/rules/
*.smk), so that the rules' contract with the Python code is read here, and a rule reaches no
module's internals.

The rules build the grid and the run's first lines from these; the jobs then run
`python -m convlab <command>` (convlab.app), never this module.
"""

from __future__ import annotations

from convlab.backends.choice import choose_backend, refuse_local_cuda_without_gpu
from convlab.bench.floor import CONTENDERS
from convlab.bench.floor import FAMILY as BENCH_FAMILY
from convlab.bench.sgemm import LIBRARY as SGEMM_LIBRARY
from convlab.bench.sgemm import OURS as SGEMM_OURS
from convlab.codeversion import (
    benchmark_version,
    data_version,
    gallery_version,
    history_version,
    measurement_version,
    report_version,
    summary_version,
)
from convlab.measure.hostinfo import cpu_name
from convlab.measure.provenance import read_git_commit
from convlab.measure.row import row_format
from convlab.measure.rowjournal import new_run_id
from convlab.pictures.source import check_source_image, source_disagrees
from convlab.plan.cell import CELL_PATH, LOG_PATH
from convlab.plan.config import validate_config
from convlab.plan.configfile import DEFAULT_CONFIG_FILE, check_config_files, check_working_directory
from convlab.plan.cpusources import cpu_source_note, sources_edited_since_recorded
from convlab.plan.devicelabel import choose_devices, unplaceable
from convlab.plan.families import FAMILIES, GALLERY_FAMILY
from convlab.plan.grid import build_cells, gallery_size, image_sizes, problem_ranks
from convlab.plan.libraryversions import identity as library_identity
from convlab.plan.registry import load_registry, relative
from convlab.report.familydisplay import DISPLAYS as FAMILY_DISPLAYS
from convlab.report.familydisplay import SIZE_FIGURE_FAMILY, seed_family
from convlab.report.figuretable import BACKEND as FIGURE_BACKEND
from convlab.report.figuretable import BY_FILE as FIGURES_BY_FILE
from convlab.report.figuretable import SIZE_FAMILY
from convlab.report.figuretable import TABLE as FIGURE_TABLE
from convlab.report.seeds import SEEDS, figure_names, figure_stem, figure_stems, report_labels, seed_figure, table_stem
from convlab.run.warmup import WARM_SHAPES_ENV, grid_shapes, shapes_text
from convlab.service.client import end_of_run, export_service_settings, start_service
from convlab.service.jobenv import RUN_COMMIT_ENV, RUN_ID_ENV, service_on
from convlab.snakefile.clusternodes import node_offers
from convlab.snakefile.damaged import move_damaged_rows, moved_lines
from convlab.snakefile.database import check_results_database
from convlab.snakefile.freshness import (
    remove_rows_of_other_settings,
    remove_stale,
    rows_of_other_settings,
    stale_summaries,
)
from convlab.snakefile.jobshell import logged
from convlab.snakefile.runlock import (
    follows_clean_run,
    forget_clean_run,
    live_run_line,
    mark_report_stage,
    note_clean_run,
    release_stale_lock,
)
from convlab.status import UserError

__all__ = [
    "WARM_SHAPES_ENV", "grid_shapes", "service_on", "shapes_text", "start_service",
    "BENCH_FAMILY", "CELL_PATH", "DEFAULT_CONFIG_FILE", "FAMILIES", "FAMILY_DISPLAYS", "FIGURES_BY_FILE", "FIGURE_BACKEND",
    "FIGURE_TABLE", "GALLERY_FAMILY", "LOG_PATH", "RUN_COMMIT_ENV", "RUN_ID_ENV", "SEEDS", "SIZE_FAMILY",
    "SIZE_FIGURE_FAMILY", "UserError", "benchmark_kernels", "build_cells", "check_config_files",
    "check_results_database", "check_source_image", "check_working_directory", "choose_backend", "choose_devices", "code_versions", "cpu_name", "cpu_source_note",
    "end_of_run", "export_service_settings", "figure_names", "figure_stem", "figure_stems", "follows_clean_run",
    "forget_clean_run", "gallery_size", "image_sizes", "problem_ranks", "library_identity", "live_run_line", "load_registry", "logged",
    "mark_report_stage", "move_damaged_rows", "moved_lines", "new_run_id", "node_offers", "note_clean_run", "read_git_commit",
    "refuse_local_cuda_without_gpu", "relative", "release_stale_lock", "report_labels", "row_format", "seed_family",
    "seed_figure", "source_disagrees", "sources_edited_since_recorded", "stale_summaries", "remove_stale", "rows_of_other_settings", "remove_rows_of_other_settings", "table_stem", "unplaceable", "validate_config",
]


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
    """Every kernel the benchmark rule runs: the convolution contenders, our SGEMMs and the
    library's."""
    return sorted({kernel for _, _, kernel in CONTENDERS} | {*SGEMM_OURS, SGEMM_LIBRARY})
