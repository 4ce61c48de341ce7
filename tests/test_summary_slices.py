"""Each family's rows are a slice of the summary (results/<device>/summary/<family>.csv), and the report's jobs read
the narrowest they need: the summary joined from the slices is the summary of the cells, byte for byte, and the
seed comparison joined from the families' comparisons is the comparison of the whole summary."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from convlab.app.cli import main
from convlab.measure.row import COLUMNS, format_row
from convlab.plan.families import FAMILIES
from convlab.report.aggregate import RowRefused, aggregate, write_slice
from convlab.report.familydisplay import display
from convlab.report.seedcompare import comparison_from_files, join_comparisons

SEEDS = "config/seeds/seed_tables.csv"
MAP = "config/seeds/method_map.yaml"
DEVICE = "AMD EPYC (2 cores)"


def _row(**values) -> dict:
    row = {"experiment": "", "kernel": "direct", "variant": "default", "backend": "cpu", "size": 64, "status": "ok",
           "git_commit": "abc", "code_version": "0123456789ab", "kernel_ms": 0.5, "reps": 3, "max_rel_err": 1e-7,
           "tolerance": 1e-5, "flops": 100, "gflops": 2.0, "device": DEVICE, "started_at": "2026-11-24T10:00:00", "finished_at": "2026-11-24T10:00:01",
           "implementation": "numpy sliding-window (cpu twin of direct)"}
    row.update(values)
    row["gflops"] = row["flops"] / row["kernel_ms"] / 1e6  # what its time gives
    return row


def _cells(tmp_path) -> dict[str, list]:
    """Cell rows of three families, typed differently column by column: the summary types a column over every
    row (gemm_m is empty in the convolutions' rows, H in GEMM's), which one family's slice cannot."""
    conv2d, tiling, *_, gemm = FAMILIES  # whatever their names: the size figures, one channel, GEMM
    rows = {
        conv2d: [_row(experiment=conv2d, H=size, W=size, stride=stride, filter_size=3, kernel_ms=0.01 * size + stride)
                 for size in (128, 64) for stride in (2, 1)],
        tiling: [_row(experiment=tiling, H=64, W=64, C_in=1, stride=1, filter_size=fs, kernel_ms=1.5) for fs in (5, 3)],
        gemm: [_row(experiment=gemm, kernel="cublas", size=48, gemm_m=48, gemm_n=48, gemm_k=48, kernel_ms=0.25),
               _row(experiment=gemm, kernel="cublas", size=64, gemm_m=64, gemm_n=64, gemm_k=64, status="wrong",
                    kernel_ms=1.0 / 3)],
    }
    files = {}
    for family, family_rows in rows.items():
        files[family] = []
        for number, row in enumerate(family_rows):
            path = tmp_path / "cells" / family / f"{number}.csv"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(format_row(row))
            files[family].append(path)
    return files


def test_the_summary_joined_from_the_families_slices_is_the_summary_of_the_cells(tmp_path):
    cells = _cells(tmp_path)
    aggregate([path for paths in cells.values() for path in paths], tmp_path / "direct.csv")
    slices = []
    for family, paths in cells.items():
        slices.append(tmp_path / f"summary/{family}.csv")
        write_slice(paths, slices[-1])
    # a family without cells: a slice with the header alone
    write_slice([], tmp_path / "summary/none.csv")
    assert (tmp_path / "summary/none.csv").read_text() == ",".join(COLUMNS) + "\n"
    summary, warnings = aggregate([*slices, tmp_path / "summary/none.csv"], tmp_path / "joined.csv", slices=True)
    assert (tmp_path / "joined.csv").read_bytes() == (tmp_path / "direct.csv").read_bytes()
    assert len(summary) == 8 and warnings == []
    # a slice holds the rows as the cells wrote them, in the summary's order
    gemm = pd.read_csv(slices[-1], dtype=str, keep_default_na=False)
    assert list(gemm["gemm_m"]) == ["48", "64"]
    conv2d = pd.read_csv(slices[0])
    assert list(zip(conv2d["H"], conv2d["stride"])) == [(64, 1), (64, 2), (128, 1), (128, 2)]


def test_a_damaged_slice_is_refused_and_the_summary_kept(tmp_path):
    cells = _cells(tmp_path)
    family, paths = next(iter(cells.items()))
    write_slice(paths, tmp_path / "slice.csv")
    lines = (tmp_path / "slice.csv").read_text().splitlines(keepends=True)
    lines[2] = lines[2].replace(",abc,", ",abd,", 1)  # an edited value
    (tmp_path / "slice.csv").write_text("".join(lines))
    (tmp_path / "summary.csv").write_text("the previous summary\n")
    with pytest.raises(RowRefused, match="line 3 is damaged"):
        aggregate([tmp_path / "slice.csv"], tmp_path / "summary.csv", slices=True)
    assert (tmp_path / "summary.csv").read_text() == "the previous summary\n"


def test_the_aggregate_command_writes_a_slice_and_joins_slices(tmp_path, monkeypatch, capsys):
    cells = _cells(tmp_path)
    monkeypatch.chdir(tmp_path)
    for family, paths in cells.items():
        assert main(["aggregate", "--slice", "--out", f"summary/{family}.csv", *map(str, paths)], forward=False) == 0
    said = capsys.readouterr().out
    assert "summary/" in said and "2 rows; by status: {'ok': 1, 'wrong': 1}" in said
    assert main(["aggregate", "--slices", "--out", "summary.csv", *(f"summary/{f}.csv" for f in cells)],
                forward=False) == 0
    assert "8 rows" in capsys.readouterr().out


def _conv(family: str, kernel: str, size: int, stride: int, ms: float, **values) -> dict:
    return {**dict.fromkeys(COLUMNS, ""), "experiment": family, "kernel": kernel, "variant": "default",
            "backend": "cpu", "size": size, "H": size, "W": size, "C_in": 3, "C_out": 3, "filter_size": 3,
            "stride": stride, "batch": 1, "status": "ok", "kernel_ms": ms, "gflops": 1.0 / ms, "device": DEVICE,
            "implementation": "numpy sliding-window (cpu twin of direct)", **values}


def test_the_seed_comparison_joined_from_the_families_is_the_comparison_of_the_summary(tmp_path):
    """Every family's seeds against its slice alone, joined in the seed table's order: the comparison of the
    whole summary, this run's device named also where a family has no row (from the bandwidth record)."""
    conv2d, *_, gemm = FAMILIES
    rows = [_conv(conv2d, kernel, size, stride, 0.001 * size * stride)
            for kernel in ("direct", "cudnn") for size in (128, 256) for stride in (1, 2, 3)]
    rows += [{**_conv(gemm, "cublas", size, 1, 0.002 * size, gemm_m=size, H="", W=""),
              "implementation": "numpy float32 BLAS matmul (cpu twin of the tiled SGEMM kernels)"} for size in (512,)]
    summary = pd.DataFrame(rows, columns=COLUMNS)
    summary.to_csv(tmp_path / "summary.csv", index=False)
    (tmp_path / "bandwidth.json").write_text(json.dumps({"backend": "cpu", "device": DEVICE, "copy_gbps": 10.0}))
    whole = comparison_from_files(SEEDS, MAP, tmp_path / "summary.csv")
    parts = []
    for family in FAMILIES:
        if not display(family).seeds:
            continue
        summary[summary["experiment"] == family].to_csv(tmp_path / f"{family}.csv", index=False)
        part = comparison_from_files(SEEDS, MAP, tmp_path / f"{family}.csv", family, tmp_path / "bandwidth.json")
        assert set(part["seed"]) == set(display(family).seeds)
        parts.append(tmp_path / f"comparison_{family}.csv")
        part.to_csv(parts[-1], index=False)
    assert join_comparisons(reversed(parts)) == whole.to_csv(index=False)
    assert set(whole["this_gpu"]) == {DEVICE}
    assert not math.isnan(whole.loc[whole["this_status"] == "ok", "ratio"].iloc[0])
