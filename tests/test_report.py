"""The report stage: the seed comparison join on hand-made frames, and the report rules on the tiny cpu
config in a temporary copy (every figure produced and non-empty, findings computed from the data)."""

import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from convlab.findings import fastest
from convlab.seedcompare import NEVER_RAN, NOT_RUN, compare, load_map, load_seeds, load_summary, read_comparison

REPO = Path(__file__).resolve().parents[1]
SEEDS = REPO / "config/seeds/seed_tables.csv"
MAP = REPO / "config/seeds/method_map.yaml"
SEED_COLUMNS = ["seed", "table", "gpu", "unit", "size", "stride", "filter_size", "method", "block", "layer", "batch",
                "value", "defect", "source_line"]


def _seed(**values) -> dict:
    row = dict.fromkeys(SEED_COLUMNS, "")
    row.update(values)
    return row


def _cell(**values) -> dict:
    row = {"experiment": "conv2d", "kernel": "", "variant": "default", "size": 0.0, "batch": 1.0, "H": 0.0,
           "W": 0.0, "C_in": 3.0, "C_out": 3.0, "filter_size": 3.0, "stride": 1.0, "gemm_m": math.nan,
           "status": "ok", "reason": "", "kernel_ms": math.nan, "gflops": math.nan, "device": "Test GPU"}
    row.update(values)
    return row


MAPPING = {"mappings": [
    {"seed": "001", "table": "1", "method": "direct", "experiment": "conv2d", "kernel": "direct",
     "match": {"block": "from_seed"}},
    {"seed": "001", "table": "4", "method": "block", "experiment": "conv2d", "kernel": "im2col_gemm_block",
     "match": {"block": "from_seed"}},
    {"seed": "000", "table": "stride1", "method": "im2col_gemm", "experiment": "conv2d",
     "kernel": "im2col_gemm_shared", "match": {"variant": "best"}},
], "unmapped": [{"seed": "003", "table": "3-direct", "method": "direct", "reason": "a 6x6 demo"}]}


@pytest.fixture
def joined() -> pd.DataFrame:
    seeds = pd.DataFrame([
        _seed(seed="001", table="1", gpu="Quadro M4000", unit="ms", size="256", stride="2", filter_size="3",
              method="direct", block="16", value="1.0"),
        _seed(seed="001", table="4", gpu="Quadro M4000", unit="ms", size="256", filter_size="3", method="block",
              block="64", value="0.003", defect="block64_launch_failed"),
        _seed(seed="000", table="stride1", gpu="GTX 1050", unit="gflops", size="256", stride="1", filter_size="3",
              method="im2col_gemm", value="10"),
        _seed(seed="000", table="stride1", gpu="GTX 1050", unit="gflops", size="512", stride="1", filter_size="3",
              method="im2col_gemm", value="10"),
        _seed(seed="003", table="3-direct", gpu="unnamed", unit="ms", size="6", stride="1", method="direct",
              value="0.04", defect="stride_ignored"),
    ])
    seeds["value"] = pd.to_numeric(seeds["value"])
    summary = pd.DataFrame([
        _cell(kernel="direct", variant="block~16", size=256, stride=2, kernel_ms=0.25),
        _cell(kernel="direct", variant="block~8", size=256, stride=2, kernel_ms=0.01),  # not the seed's block
        _cell(kernel="direct", variant="block~16", size=256, stride=1, kernel_ms=0.5),  # not the seed's stride
        _cell(kernel="im2col_gemm_block", variant="block~64", size=256, stride=1, status="invalid_config",
              reason="launch refused"),
        _cell(kernel="im2col_gemm_shared", variant="block~8", size=256, kernel_ms=0.2, gflops=50.0),
        _cell(kernel="im2col_gemm_shared", variant="block~16", size=256, kernel_ms=0.1, gflops=100.0),
        _cell(kernel="im2col_gemm_shared", variant="block~32", size=256, kernel_ms=0.05, gflops=200.0,
              status="wrong"),
    ])
    return compare(seeds, MAPPING, summary)


def test_join_takes_the_seeds_block_and_stride(joined):
    row = joined[(joined["seed"] == "001") & (joined["table"] == "1")].iloc[0]
    assert row["variant"] == "block~16" and row["this_value"] == 0.25
    assert row["ratio"] == pytest.approx(4.0)  # seed ms / this ms: this run 4x faster
    assert row["seed_gpu"] == "Quadro M4000" and row["this_gpu"] == "Test GPU"


def test_best_variant_is_the_fastest_correct_one(joined):
    row = joined[(joined["seed"] == "000") & (joined["size"] == 256)].iloc[0]
    assert row["variant"] == "block~16"  # block~32 is faster but wrong
    assert row["ratio"] == pytest.approx(10.0)  # this GFLOPS / seed GFLOPS


def test_defect_row_shows_this_runs_status_and_no_ratio(joined):
    row = joined[(joined["table"] == "4")].iloc[0]
    assert row["this_status"] == "invalid_config" and row["this_reason"] == "launch refused"
    assert math.isnan(row["ratio"]) and "never ran" in row["defect_note"]


def test_missing_problem_and_unmapped_rows(joined):
    assert joined[joined["size"] == 512].iloc[0]["this_status"] == NOT_RUN
    assert joined[joined["seed"] == "003"].iloc[0]["this_status"] == "unmapped"


def test_every_seed_number_gets_one_comparison_row():
    seeds = load_seeds(SEEDS)
    summary = pd.DataFrame([_cell(kernel="direct", variant="block~16", size=256, stride=1, kernel_ms=0.1)])
    table = compare(seeds, load_map(MAP), summary)
    assert len(table) == len(seeds)
    assert set(table["this_status"]) <= {"ok", NOT_RUN, "unmapped"}


# ---- the real rules, on the tiny cpu config with sizes that overlap the seeds' (128)

FIGURES = ["results/seeds/seed000_gflops.png", "results/seeds/seed001_methods.png",
           "results/seeds/seed001_memory.png", "results/seeds/seed001_partition.png",
           "results/seeds/seed002_tiling.png", "results/seeds/seed003_gemm.png",
           "results/seeds/seed004_winograd.png", "results/figures/roofline.png",
           "results/figures/time_vs_size.png", "results/figures/gflops_vs_size.png",
           "results/figures/pct_of_floor_vs_size.png", "results/figures/variants.png",
           "results/figures/status.png"]
PAGES = ["results/seeds/comparison.csv", "results/findings.html", "results/figures/status_table.html",
         *[f"results/seeds/seed{seed}_table.html" for seed in ("000", "001", "002", "003", "004")]]


@pytest.fixture(scope="module")
def reported(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("report") / "repo"
    shutil.copytree(REPO, repo, ignore=shutil.ignore_patterns(
        ".git", ".snakemake", "results", "data", "__pycache__", ".pytest_cache", ".whl", ".venv"))
    config = yaml.safe_load((repo / "config/tiny-cpu.yaml").read_text())
    config["conv2d"]["sizes"] = config["cpu"]["sizes"] = [96, 128]
    (repo / "config/report-test.yaml").write_text(yaml.safe_dump(config))
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    # the targets go before --configfile, which takes every argument after it
    result = subprocess.run([sys.executable, "-m", "snakemake", *FIGURES, *PAGES, "--cores", "2", "--configfile",
                             "config/report-test.yaml"], cwd=repo, env=env,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return repo


@pytest.mark.pipeline
def test_every_report_file_is_produced_and_non_empty(reported):
    for name in FIGURES + PAGES:
        path = reported / name
        assert path.is_file() and path.stat().st_size > 0, name
    for name in FIGURES:
        assert (reported / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name


@pytest.mark.pipeline
def test_comparison_has_ratios_where_both_sides_exist(reported):
    table = read_comparison(reported / "results/seeds/comparison.csv")
    # a defect such as search_timed still gets a ratio (flagged); a launch that never ran does not
    both = table[(table["this_status"] == "ok") & table["this_value"].notna() & ~table["defect"].isin(NEVER_RAN)]
    assert not both.empty  # seed 000 at 128 (direct and cuDNN twins) and seed 004's speed-up
    assert both["ratio"].notna().all() and (both["ratio"] > 0).all()
    assert set(both["seed"]) >= {"000", "004"}
    assert (table[table["this_status"] != "ok"]["ratio"].isna()).all()


@pytest.mark.pipeline
def test_findings_name_the_fastest_kernel_of_the_data(reported):
    summary = load_summary(reported / "results/summary.csv")
    table = fastest(summary, "conv2d")
    winner = table["fastest"].value_counts().index[0]
    page = (reported / "results/findings.html").read_text()
    assert re.search(rf"<b>{re.escape(winner)}</b> is the fastest kernel in", page)
    largest = table.sort_values(["size", "stride"], ascending=[False, True]).iloc[0]
    assert f"the fastest is <b>{largest['fastest']}</b>" in page
    assert "AMD" in page or "cores" in page or "cpu" in page.lower()


@pytest.mark.pipeline
def test_seed_tables_show_defects(reported):
    page = (reported / "results/seeds/seed001_table.html").read_text()
    assert "block64_launch_failed" in page and "never ran" in page
    assert "not_run" in page  # the tiny run has no 001 cells: said, not hidden
