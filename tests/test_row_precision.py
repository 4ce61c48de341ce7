"""A row records the precision its cell computed in, the one it was verified in, and the report ranks it by that:
a config that lets a strict fp32 kernel use TF32 math (kernels: {cudnn: {math: tf32}}) gives a cell verified and
ranked as TF32. A summary from before the column still reads, with its kernels' declared precisions. Every reader
of a summary (the pages, the figures, compare, the devices page) reads it through one typed reader."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import cv2
import numpy as np
import pandas as pd
import pytest

from convlab.history.compare import load_set
from convlab.history.summary import SummaryError, read_summary
from convlab.measure.row import COLUMNS, format_row
from convlab.plan.config import validate_config
from convlab.plan.grid import build_cells
from convlab.report import gpus
from convlab.report.aggregate import aggregate
from convlab.report.figures import render_figures
from convlab.report.findings import fastest, findings_html, reduced_precision_fastest
from convlab.report.precision import row_precisions
from convlab.report.seedcompare import compare
from convlab.run.runner import run_cell

SIZE = 48
FP32_TOLERANCE, TF32_TOLERANCE = 1e-5, 5e-3
SEED_COLUMNS = ["seed", "table", "gpu", "unit", "size", "stride", "filter_size", "method", "block", "layer", "batch",
                "value", "defect", "source_line"]


@pytest.fixture(scope="module")
def image_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("image") / f"input_{SIZE}.png"
    cv2.imwrite(str(path), np.random.default_rng(1).integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8))
    return path


def cells(overrides: dict) -> dict:
    """The tiny conv2d cells of direct and cudnn on the cpu backend, under the config's kernel ``overrides``."""
    config = validate_config({
        "backend": "cpu", "kernels": overrides,
        "conv2d": {"sizes": [SIZE], "strides": [1], "kernels": ["direct", "cudnn"]},
        "cpu": {"sizes": [SIZE], "budget_s": 0.01},
        "timing": {"min_reps": 3, "e2e_reps": 1},
        "verify": {"tolerance": {"fp32": FP32_TOLERANCE, "tf32": TF32_TOLERANCE}},
    })
    return {cell.kernel: cell for cell in build_cells(config, "cpu") if cell.experiment == "conv2d"}


@pytest.fixture(scope="module")
def tf32_rows(image_path) -> dict:
    """The rows of direct and of cudnn allowed TF32 math by the config (its description says strict fp32)."""
    return {kernel: run_cell(cell, image_path) for kernel, cell in cells({"cudnn": {"math": "tf32"}}).items()}


def test_a_row_records_the_precision_its_cell_was_verified_in(tf32_rows, image_path):
    assert tf32_rows["cudnn"]["status"] == "ok", tf32_rows["cudnn"]["reason"]
    assert (tf32_rows["cudnn"]["precision"], tf32_rows["cudnn"]["tolerance"]) == ("tf32", TF32_TOLERANCE)
    assert (tf32_rows["direct"]["precision"], tf32_rows["direct"]["tolerance"]) == ("fp32", FP32_TOLERANCE)
    # without the override, the description's strict fp32
    plain = run_cell(cells({})["cudnn"], image_path)
    assert (plain["precision"], plain["tolerance"]) == ("fp32", FP32_TOLERANCE)


def _summary(rows: list[dict], folder: Path) -> Path:
    """The rows written as cells and aggregated into a summary, as the pipeline does."""
    paths = []
    for number, row in enumerate(rows):
        path = folder / "cells" / f"{number}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(format_row(row))
        paths.append(path)
    aggregate(paths, folder / "summary.csv")
    return folder / "summary.csv"


def test_the_findings_rank_a_cell_by_the_precision_its_row_records(tf32_rows, tmp_path):
    # cudnn the faster of the two in every case: allowed TF32, it is never the fastest strict fp32 code
    cudnn = tf32_rows["cudnn"]
    rows = [{**cudnn, "kernel_ms": 0.001, "kernel_ms_min": 0.001, "kernel_ms_max": 0.001, "kernel_ms_iqr": 0.0,
             # the columns computed from the time, as its new time gives them
             "gflops": cudnn["flops"] / 0.001 / 1e6, "gbps": cudnn["bytes"] / 0.001 / 1e6,
             "pct_of_floor": cudnn["floor_ms"] / 0.001 * 100}, tf32_rows["direct"]]
    summary = read_summary(_summary(rows, tmp_path))
    assert row_precisions(summary).tolist() == ["tf32", "fp32"]
    strict = fastest(summary, "conv2d")
    named = set(strict["fastest"]) | set(strict["runner_up"]) | set(strict["library"])
    assert not any(name.startswith("cudnn") for name in named), strict
    reduced = reduced_precision_fastest(summary, "conv2d")
    assert set(reduced["precision"]) == {"TF32"} and reduced["fastest"].str.startswith("cudnn").all()
    page = findings_html(summary, compare(pd.DataFrame(columns=SEED_COLUMNS), {"mappings": [], "unmapped": []},
                                          summary), {}, {})
    assert "(TF32) is the fastest TF32 code in 1 of 1 problems" in page


def _older_summary(folder: Path) -> Path:
    """A summary written before rows recorded their precision: no precision column."""
    columns = [column for column in COLUMNS if column != "precision"]
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=columns, lineterminator="\n", restval="")
    writer.writeheader()
    for kernel, ms in (("cudnn_tf32", 0.05), ("cudnn", 0.2), ("direct", 0.15)):
        writer.writerow({"experiment": "conv2d", "kernel": kernel, "variant": "default", "backend": "cuda",
                         "size": 256, "batch": 1, "H": 256, "W": 256, "C_in": 3, "C_out": 3, "filter_size": 3,
                         "stride": 1, "padding": 1, "status": "ok", "kernel_ms": ms, "kernel_ms_iqr": ms / 50,
                         "reps": 20, "flops": 10**7, "bytes": 10**6, "gflops": 10**7 / ms / 1e6,
                         "device": "NVIDIA H100 80GB HBM3", "timing_mode": "warm", "git_commit": "abc",
                         "code_version": "c0de"})
    path = folder / "older" / "summary.csv"
    path.parent.mkdir(parents=True)
    path.write_text(text.getvalue())
    return path


def test_an_older_summary_reads_each_kernels_declared_precision(tmp_path):
    summary = read_summary(_older_summary(tmp_path))
    assert "precision" not in summary.columns
    assert dict(zip(summary["kernel"], row_precisions(summary))) == {"cudnn_tf32": "tf32", "cudnn": "fp32",
                                                                      "direct": "fp32"}
    assert set(fastest(summary, "conv2d")["fastest"]) == {"direct"}


def test_an_older_summary_still_draws_compares_and_lists(tmp_path):
    older = _older_summary(tmp_path)
    drawn = render_figures(older, tmp_path / "figures")
    assert drawn and all(path.stat().st_size > 0 for path in drawn)
    assert len(load_set(older).rows) == 3
    assert gpus.device_table(gpus.device_summaries(tmp_path))["ok"].tolist() == [3]


def test_every_reader_types_a_summary_alike(tmp_path):
    older = _older_summary(tmp_path)
    summary = read_summary(older)
    pd.testing.assert_frame_equal(load_set(older).rows, summary)
    # numbers as numbers (NaN where empty), the rest as text ('' where empty)
    assert summary["kernel_ms"].dtype == float and math.isnan(summary["kernel_ms_min"].iloc[0])
    assert summary["size"].tolist() == [256.0] * 3 and summary["reason"].tolist() == [""] * 3


def test_an_even_older_summary_gets_the_default_family_size_and_batch(tmp_path):
    path = tmp_path / "summary.csv"
    path.write_text("kernel,variant,H,status,kernel_ms\ndirect,default,64,ok,0.5\n")
    summary = read_summary(path)
    assert summary[["experiment", "size", "batch"]].iloc[0].tolist() == ["conv2d", 64.0, 1.0]


@pytest.mark.parametrize("text", ["", "\x89PNG\x00\xff"])
def test_a_file_that_is_not_a_summary_is_one_line(tmp_path, text):
    path = tmp_path / "summary.csv"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(SummaryError, match=r"is not a summary CSV \(") as raised:
        read_summary(path)
    assert "\n" not in str(raised.value)
    with pytest.raises(SummaryError, match="no such summary"):
        read_summary(tmp_path / "missing.csv")
