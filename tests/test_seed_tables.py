"""The seeds' reference numbers (config/seeds/seed_tables.csv) are well formed, match the seed text they were
transcribed from, and each series names the pipeline kernel that reproduces it (config/seeds/method_map.yaml)."""

import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

SEEDS = Path(__file__).resolve().parents[1] / "config/seeds"
TEXT = SEEDS / "text"
SEED_FILES = {
    "000": "000_66918d1887a6bfe0.txt",
    "001": "001_a2a364bb9e739ec8.txt",
    "002": "002_3a5c8fd2860a179c.txt",
    "003": "003_bab785683fa1a6a0.txt",
    "004": "004_5317bfaff8d68f64.txt",
}
COLUMNS = ["seed", "table", "gpu", "unit", "size", "stride", "filter_size", "method", "block", "layer", "batch",
           "value", "defect", "source_line"]
KEY = ["seed", "table", "size", "stride", "filter_size", "method", "block", "layer", "batch"]
INT_OR_EMPTY = ["size", "stride", "filter_size", "block", "batch"]
UNITS = {"ms", "gflops", "x"}
DEFECTS = {"block64_launch_failed", "stride_ignored", "search_timed", "weights_bug", "block_over_1024_launch_failed"}
# The registry's kernel names; to be replaced by kernels/registry.yaml once every family is registered there.
KERNELS = {
    # conv2d
    "direct", "direct_nchw", "direct_const", "tiled_input", "tiled_output", "tiled_cached",
    "im2col_gemm_basic", "im2col_gemm_shared", "im2col_gemm_register",
    "im2col_gemm_row", "im2col_gemm_col", "im2col_gemm_block", "im2col_cublas",
    "cudnn", "cudnn_nchw", "cudnn_tf32", "winograd", "fft", "ndimage",
    # gemm
    "sgemm_naive", "sgemm_shared", "sgemm_register", "sgemm_vectorized", "cublas",
    # winograd_layers
    "conv_naive_batched", "winograd_batched", "im2col_cublas_batched", "cudnn_tf32_nchw",
}
EXPERIMENTS = {"conv2d", "tiling", "gemm", "winograd_layers"}

# Spot checks: (seed, table, method, size, stride, block, the literal in the seed, seed unit -> CSV unit factor).
# The literal must appear on the row's source_line and, scaled, equal the row's value.
SPOT_CHECKS = [
    ("000", "stride1", "direct", "128", "1", "16", "9.420", 1.0),
    ("000", "stride2", "cudnn", "2048", "2", "", "12.690", 1.0),
    ("000", "stride3", "im2col_gemm", "1024", "3", "", "6.190", 1.0),
    ("001", "1", "direct", "4096", "1", "16", "37.888800", 1.0),
    ("001", "3", "register", "2048", "", "16", "9.422144", 1.0),
    ("001", "4", "block", "256", "", "64", "0.002464", 1.0),
    ("001", "4", "row", "4096", "", "64", "41211.000000", 1.0),
    ("001", "5", "cudnn", "1024", "3", "", "0.291264", 1.0),
    ("001", "6", "im2col_gemm", "2048", "2", "", "14.317300", 1.0),
    ("002", "test", "basic", "16384", "1", "", "11798", 1e-3),  # us in the seed
    ("002", "test", "cached", "16384", "1", "32", "13940", 1e-3),
    ("003", "1-gemm", "naive", "2048", "", "32", "72.109825", 1.0),
    ("003", "1-gemm", "naive", "8192", "", "512", "130.412506", 1.0),
    ("003", "2-cublas", "cublas", "8192", "", "", "609.340515", 1.0),
    ("003", "3-direct", "direct", "6", "1", "3", "0.040256", 1.0),
    ("004", "text", "winograd", "", "", "256", "1.7", 1.0),
]


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return pd.read_csv(SEEDS / "seed_tables.csv", dtype=str, keep_default_na=False)


@pytest.fixture(scope="module")
def method_map() -> dict:
    return yaml.safe_load((SEEDS / "method_map.yaml").read_text(encoding="utf-8"))


def seed_line(seed: str, line: int) -> str:
    return (TEXT / SEED_FILES[seed]).read_text(encoding="utf-8").splitlines()[line - 1]


def test_seed_texts_are_in_the_repository():
    for name in [*SEED_FILES.values(), "README.md"]:
        assert (TEXT / name).is_file(), f"config/seeds/text/{name} is missing"


def test_columns_and_types(table):
    assert list(table.columns) == COLUMNS
    assert set(table["seed"]) == set(SEED_FILES)
    assert (table["table"] != "").all() and (table["gpu"] != "").all() and (table["method"] != "").all()
    assert set(table["unit"]) <= UNITS, set(table["unit"]) - UNITS
    assert table["method"].str.fullmatch(r"[a-z0-9]+(_[a-z0-9]+)*").all()
    for column in INT_OR_EMPTY:
        bad = table.loc[~table[column].str.fullmatch(r"(\d+)?"), column]
        assert bad.empty, f"{column}: not an int or empty: {sorted(set(bad))}"
    values = table["value"].astype(float)
    assert values.map(math.isfinite).all() and (values > 0).all()
    assert set(table["defect"]) <= DEFECTS | {""}, set(table["defect"]) - DEFECTS
    lines = table["source_line"].astype(int)
    assert (lines >= 1).all()
    for seed, group in table.groupby("seed"):
        n_lines = len((TEXT / SEED_FILES[seed]).read_text(encoding="utf-8").splitlines())
        assert (group["source_line"].astype(int) <= n_lines).all(), seed
    assert (table.loc[table["seed"] != "004", "layer"] == "").all(), "layer is for seed 004 only"


def test_no_duplicate_keys(table):
    duplicated = table[table.duplicated(KEY, keep=False)]
    assert duplicated.empty, duplicated.to_string()


def test_every_seed_has_rows(table):
    counts = table.groupby("seed").size()
    assert counts.to_dict() == {"000": 45, "001": 180, "002": 4, "003": 23, "004": 1}


def test_known_defects_are_flagged(table):
    def rows(**where):
        mask = pd.Series(True, index=table.index)
        for column, value in where.items():
            mask &= table[column] == value
        return table[mask]

    failed = rows(seed="001", table="4", method="block", block="64")
    assert len(failed) == 5 and (failed["defect"] == "block64_launch_failed").all()
    assert (failed["value"].astype(float) < 0.01).all()
    assert (rows(seed="000", method="cudnn")["defect"] == "search_timed").all()
    assert (rows(seed="000", method="direct")["defect"] == "weights_bug").all()
    assert (rows(seed="003", method="direct")["defect"] == "stride_ignored").all()
    naive = rows(seed="003", method="naive")
    assert ((naive["block"].astype(int) > 32) == (naive["defect"] == "block_over_1024_launch_failed")).all()


@pytest.mark.parametrize("seed,tab,method,size,stride,block,literal,factor", SPOT_CHECKS,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}-{c[3]}-{c[5]}" for c in SPOT_CHECKS])
def test_spot_check_against_seed_text(table, seed, tab, method, size, stride, block, literal, factor):
    row = table[(table["seed"] == seed) & (table["table"] == tab) & (table["method"] == method)
                & (table["size"] == size) & (table["stride"] == stride) & (table["block"] == block)]
    assert len(row) == 1, f"expected one row, got {len(row)}"
    row = row.iloc[0]
    assert literal in seed_line(seed, int(row["source_line"])), (literal, seed_line(seed, int(row["source_line"])))
    assert float(row["value"]) == pytest.approx(float(literal) * factor, rel=1e-9)


def test_spot_checks_cover_every_seed():
    assert {check[0] for check in SPOT_CHECKS} == set(SEED_FILES)
    assert len(SPOT_CHECKS) >= 8


def test_every_value_is_on_its_source_line(table):
    """Beyond the spot checks: each value, in the seed's own unit, is written on its source line."""
    for _, row in table.iterrows():
        text = seed_line(row["seed"], int(row["source_line"]))
        literal = row["value"]
        if row["seed"] == "002":  # microseconds in the seed
            literal = str(round(float(literal) * 1000))
        assert literal in text, (row.to_dict(), text)


def test_method_map_entries(method_map):
    assert set(method_map) == {"mappings", "unmapped"}
    for entry in method_map["mappings"]:
        where = f"{entry.get('seed')}/{entry.get('table')}/{entry.get('method')}"
        assert isinstance(entry["seed"], str) and isinstance(entry["table"], str), where
        assert entry["experiment"] in EXPERIMENTS, where
        assert entry["kernel"] in KERNELS, where
        if "baseline" in entry:
            assert entry["baseline"] in KERNELS, where
        match = entry.get("match", {})
        assert set(match) <= {"block", "threads", "variant"}, where
        for key in ("block", "threads"):
            if key in match:
                assert match[key] == "from_seed", where
    for entry in method_map["unmapped"]:
        assert entry["reason"].strip(), entry


def test_every_series_is_mapped(table, method_map):
    series = {tuple(key) for key in table.loc[table["table"] != "text", ["seed", "table", "method"]].values}
    mapped = [(e["seed"], e["table"], e["method"]) for e in method_map["mappings"]]
    unmapped = [(e["seed"], e["table"], e["method"]) for e in method_map["unmapped"]]
    assert len(set(mapped)) == len(mapped), "a (seed, table, method) is mapped twice"
    assert not set(mapped) & set(unmapped)
    missing = series - set(mapped) - set(unmapped)
    assert not missing, f"no method_map entry: {sorted(missing)}"
    everything = {tuple(key) for key in table[["seed", "table", "method"]].values}
    stale = (set(mapped) | set(unmapped)) - everything
    assert not stale, f"method_map entries without CSV rows: {sorted(stale)}"


def test_from_seed_blocks_are_present(table, method_map):
    """An entry that takes the variant from the row's block column needs a block on every row it covers."""
    for entry in method_map["mappings"]:
        if "from_seed" in entry.get("match", {}).values():
            rows = table[(table["seed"] == entry["seed"]) & (table["table"] == entry["table"])
                         & (table["method"] == entry["method"])]
            assert (rows["block"] != "").all(), entry


def test_the_report_seed_table_draws_what_the_csv_and_the_method_map_hold(table, method_map):
    """convlab.report.seeds has every seed of the CSV, draws each figure from tables the seed has, and the
    family that claims the seed (its report category) is the one method_map.yaml reproduces it with."""
    from convlab.report.familydisplay import seed_family
    from convlab.report.seeds import SEEDS

    assert set(SEEDS) == set(table["seed"])
    for seed in SEEDS.values():
        tables = set(table.loc[table["seed"] == seed.id, "table"])
        for figure in seed.figures:
            assert set(figure.tables) <= tables, (seed.id, figure.name, set(figure.tables) - tables)
        experiments = {entry["experiment"] for entry in method_map["mappings"] if entry["seed"] == seed.id}
        assert experiments == {seed_family(seed.id).name}, (seed.id, experiments)
