"""The real workflow: `snakemake --cores 2` on the tiny cpu config in a temporary copy, then
incremental behaviour read from Snakemake's dry runs (never from timings)."""

import subprocess
from pathlib import Path

import pandas as pd
import pytest
from workflow_helpers import (
    CELL_OUTPUT,
    RESULTS,
    FinishedRun,
    copy_finished_run,
    copy_repo,
    job_events,
    most_at_once,
    planned_outputs,
    snakemake_env,
)
from workflow_helpers import snakemake as run_snakemake

from convlab.measure.row import COLUMNS
from convlab.report.familydisplay import SIZE_FIGURE_FAMILY, display, seed_family
from convlab.report.figuretable import EVERY_ROW
from convlab.report.figuretable import FIGURES as FIGURE_TABLE
from convlab.report.seeds import SEEDS, figure_stem, table_stem
from convlab.service.pool import TOOLS_WORKERS

pytestmark = pytest.mark.pipeline


def snakemake(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return run_snakemake(repo, 2, *args, timeout=900)


def scheduled_cells(repo: Path, *args: str) -> set[str]:
    result = snakemake(repo, "--dry-run", *args)
    return set(CELL_OUTPUT.findall(result.stdout + result.stderr))


@pytest.fixture(scope="module")
def built(tiny_run: FinishedRun, tmp_path_factory) -> Path:
    """A copy of the session's tiny run (--cores 2), which this module's tests change in turn."""
    return copy_finished_run(tiny_run.repo, tmp_path_factory.mktemp("pipeline") / "repo")


def test_summary_has_one_verified_row_per_cell(built):
    summary = pd.read_csv(built / f"{RESULTS}/summary.csv")
    assert list(summary.columns) == COLUMNS
    assert set(summary["status"]) == {"ok"}
    assert set(summary["backend"]) == {"cpu"}
    assert (summary["max_rel_err"] < 1e-5).all()
    assert (summary["kernel_ms"] > 0).all() and (summary["floor_ms"] > 0).all()
    conv2d = summary[summary["experiment"] == "conv2d"]
    assert len(conv2d) == 2 * 2 * 2  # kernels x sizes x strides
    assert sorted(set(conv2d["H"])) == [64, 96]
    by_stride = conv2d.set_index(["kernel", "H", "stride"])["OH"]
    assert by_stride[("direct", 96, 2)] == 48  # the stride is honoured, not ignored
    job_phases = {part.split("=")[0] for part in conv2d["phase_ms"].iloc[0].split(";")}
    assert {"startup", "connect", "queue", "load", "lock_wait", "setup", "timing", "verify"} <= job_phases
    # measured by the service: its time on the cell is inside the job's, and holds the kernel's
    assert (summary["job_ms"] > summary["service_ms"]).all() and (summary["service_ms"] > summary["kernel_ms"]).all()


def test_every_family_runs_and_is_verified(built):
    """tiling (a 320 mosaic of the 256 source), CNN layers with a batch, and GEMM: each family's
    cells of the tiny config, checked against float64 like conv2d's."""
    summary = pd.read_csv(built / f"{RESULTS}/summary.csv")
    tiling = summary[summary["experiment"] == "tiling"]
    assert set(tiling["C_in"]) == {1} and set(tiling["size"]) == {64, 320} and set(tiling["filter_size"]) == {3, 5}
    layers = summary[summary["experiment"] == "winograd_layers"]
    assert set(layers["batch"]) == {1, 2} and set(zip(layers["C_in"], layers["H"], layers["W"], layers["C_out"])) == {
        (3, 12, 12, 4), (4, 9, 7, 6)}
    assert set(layers["kernel"]) >= {"conv_naive_batched", "winograd_batched", "im2col_cublas_batched"}
    gemm = summary[summary["experiment"] == "gemm"]
    assert set(gemm["gemm_m"]) == {48, 64} and set(gemm["kernel"]) >= {"sgemm_naive", "cublas"}
    assert (gemm["flops"] == 2 * gemm["gemm_m"] ** 3).all()


def test_cells_never_overlap_even_with_two_cores(built):
    """The run used --cores 2; the device lock keeps measurements one at a time."""
    summary = pd.read_csv(built / f"{RESULTS}/summary.csv")
    spans = sorted(zip(pd.to_datetime(summary["started_at"]), pd.to_datetime(summary["finished_at"])))
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert start >= end


def test_figures_gallery_and_report(built, tiny_report):
    for name in ("time_vs_size", "gflops_vs_size", "pct_of_floor_vs_size", "variants", "status"):
        assert (built / f"{RESULTS}/figures/{name}.png").stat().st_size > 5000, name
    for name in ("input_96", "direct_96", "cudnn_96"):
        assert (built / f"{RESULTS}/gallery/{name}.png").stat().st_size > 1000, name
    # the session's `snakemake --report` of the same run
    report = tiny_report / "results/report.html"
    assert report.stat().st_size > 50_000
    text = report.read_text(errors="replace")
    for name in ("time_vs_size.png", "summary.csv", "direct_96.png"):
        assert name in text


def test_nothing_runs_without_a_change(built):
    result = snakemake(built, "--dry-run")
    assert "Nothing to be done" in result.stdout + result.stderr


def test_editing_a_kernel_reruns_exactly_its_cells(built):
    # its launch description: the cpu backend runs the kernel's twin, never its .cu
    source = built / "kernels/direct.yaml"
    source.write_text(source.read_text() + "\n# an edit\n")
    scheduled = scheduled_cells(built)
    summary = pd.read_csv(built / f"{RESULTS}/summary.csv")
    # direct takes part in conv2d and tiling: its cells in both, and nothing else
    assert len(scheduled) == (summary["kernel"] == "direct").sum() == 8
    assert all("kernel~direct/" in path for path in scheduled)
    snakemake(built)  # bring the results up to date again
    assert "Nothing to be done" in (lambda r: r.stdout + r.stderr)(snakemake(built, "--dry-run"))


# The report stage's jobs: thin clients of the service's tools workers, run side by side.
RENDERING = {"aggregate_family", "aggregate", "figures", "seed_comparison_family", "seed_comparison", "seed_table",
             "seed_figure", "roofline", "findings", "gpus"}


def report_outputs(families: set[str]) -> set[str]:
    """The report files that read the rows of ``families`` (those of every family read them all), as the
    figure table, the seed table and the families say."""
    results = Path(RESULTS)
    outputs = {f"{results}/summary/{family}.csv" for family in families}
    outputs |= {f"{results}/seeds/comparison/{family}.csv" for family in families if display(family).seeds}
    for entry in FIGURE_TABLE.values():
        if entry.reads == EVERY_ROW or SIZE_FIGURE_FAMILY.name in families:
            outputs.add(f"{results}/figures/{entry.file}")
    for seed in SEEDS.values():
        if seed_family(seed.id).name in families:
            outputs.add(f"{results}/seeds/{table_stem(seed.id)}.html")
            outputs |= {f"{results}/seeds/{figure_stem(seed.id, figure.name)}.png" for figure in seed.figures}
    # every row: the summary, the seed comparison, the roofline, the findings, the devices page, the history
    # (and the pairs of the cells whose kernel files changed, before it)
    outputs |= {f"{results}/{name}" for name in ("summary.csv", "seeds/comparison.csv", "figures/roofline.png",
                                                 "findings.html", "verdicts/paired.csv", "verdicts/latest.txt",
                                                 "verdicts/latest.csv", "figures/history.png", "history.html")}
    return outputs | {"results/gpus.html"}


def test_an_edit_to_one_kernel_plans_only_the_report_jobs_that_read_its_families(built):
    """direct takes part in conv2d and tiling: their slices of the summary, and what reads them or every row,
    are drawn again; the other families' seed pages are not. A GEMM kernel's edit redraws GEMM's pages and
    what reads every row, none of the figures against size."""
    for kernel in ("direct", "sgemm_naive"):
        source = built / f"kernels/{kernel}.yaml"
        original = source.read_bytes()
        source.write_text(source.read_text() + "\n# an edit\n")
        summary = pd.read_csv(built / f"{RESULTS}/summary.csv")
        families = set(summary.loc[summary["kernel"] == kernel, "experiment"])
        planned = planned_outputs(snakemake(built, "--dry-run"))
        assert {path for path in planned if "/cells/" not in path and "/gallery/" not in path} == \
            report_outputs(families), kernel
        source.write_bytes(original)
    assert "Nothing to be done" in (lambda r: r.stdout + r.stderr)(snakemake(built, "--dry-run"))


def test_the_report_stage_runs_side_by_side_at_one_core_and_no_wider_than_its_limit(built):
    """At --cores 1 the report's jobs (no core of their own) run together, at most `render` (the profile's
    limit, the tools pool's size) at once; with the service off each of them is a process of its own. The
    report's pictures removed: their drawing jobs (13 on the tiny grid) are what the run makes."""
    pictures = [*built.glob(f"{RESULTS}/figures/*.png"), *built.glob(f"{RESULTS}/seeds/*.png")]
    assert len(pictures) > 8
    for picture in pictures:
        picture.unlink()
    run = run_snakemake(built, 1, env={**snakemake_env(built), "CONVLAB_SERVICE": "off"}, timeout=900)
    assert all(picture.stat().st_size > 0 for picture in pictures)
    limit = TOOLS_WORKERS
    most = most_at_once(run, RENDERING)
    assert most <= limit and (most >= 2 or limit < 2), (most, limit)


def test_at_one_core_the_report_stage_waits_for_the_cells_alone_not_for_the_gallerys_jobs(tmp_path):
    """A run from nothing at --cores 1: the report stage's reset (a touch, which every slice waits for)
    runs before the cells, and the gallery's jobs (one core each) run among the cells, so that the
    slices start as soon as the last cell ends, with no gallery job left to run."""
    repo = copy_repo(tmp_path / "repo")
    events = job_events(run_snakemake(repo, 1, timeout=900))
    assert events.index(("end", "report_stage_reset")) < events.index(("start", "cell")), events
    last_gallery = max(index for index, event in enumerate(events) if event == ("end", "gallery"))
    last_cell = max(index for index, event in enumerate(events) if event == ("end", "cell"))
    assert last_gallery < last_cell < events.index(("start", "aggregate_family")), events


def test_changing_one_kernels_settings_reruns_exactly_its_cells(built):
    scheduled = scheduled_cells(built, "--config", "kernels={'cudnn': {'workspace_limit_mb': 64}}")
    assert len(scheduled) == 4 and all("kernel~cudnn/" in path for path in scheduled)


def test_the_catalogs_workflow_snakefile_runs_the_same_dag_as_the_root_one(built):
    """workflow/Snakefile (Snakemake's standard layout) reads the root Snakefile: run in the checkout,
    it plans the same cells, with a default target of its own."""
    root = scheduled_cells(built, "--forcerun", "cell")
    # every cell planned from its default target (Snakemake plans nothing where it has none)
    standard = scheduled_cells(built, "--forcerun", "cell", "-s", "workflow/Snakefile")
    assert root and standard == root


def test_cuda_grid_dry_run_without_a_gpu(built):
    """The DAG for a GPU cluster is built on a machine without one (e.g. a login node), which
    names the GPU model its jobs run on."""
    scheduled = scheduled_cells(built, "--config", "backend=cuda", "device=h100")
    assert scheduled and all(p.startswith("results/h100/cells/cuda/") for p in scheduled)
    conv2d = {p for p in scheduled if "/conv2d/" in p}
    variants = {Path(p).stem for p in conv2d}
    assert {"block~8", "block~16", "block~32", "plan~heuristic", "plan~best"} <= variants
    assert len(conv2d) == 2 * 2 * (3 + 2)  # sizes x strides x (blocks + plans)
    for family in ("tiling", "winograd_layers", "gemm"):
        assert any(f"/{family}/" in p for p in scheduled), family


def test_the_benchmark_depends_on_every_kernel_it_runs(built):
    """An edit to any kernel the benchmark runs (or to its own code, a param) re-runs it."""
    import re

    from convlab.bench.floor import CONTENDERS
    from convlab.bench.sgemm import LIBRARY, OURS
    from convlab.plan.registry import get_kernel, relative

    result = snakemake(built, "--dry-run", "benchmark", "--config", "backend=cuda", "device=h100")
    # the benchmark of the one device label (`benchmark` collects one per label)
    inputs = set(re.search(r"rule benchmark_device:\s+input: ([^\n]+)", result.stdout).group(1).split(", "))
    for kernel in [*(kernel for _, _, kernel in CONTENDERS), *OURS, LIBRARY]:
        assert {relative(path) for path in get_kernel(kernel).files("cuda")} <= inputs, kernel
