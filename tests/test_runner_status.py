"""Status semantics on the cpu backend: what each kind of failure leaves in the row."""

import csv
import os

import cv2
import numpy as np
import pytest
from cpu_helpers import SIZE, SabotagedBackend, cell_for

from convlab.backends.base import PreparedKernel
from convlab.measure.row import COLUMNS, write_row_atomically
from convlab.run.runner import run_cell
from convlab.status import DeviceOutOfMemory, LaunchConfigError, UnsupportedCell


def test_ok_row_has_time_error_and_floor(image_path):
    row = run_cell(cell_for("direct", stride=2, filter_kind="laplacian"), image_path)
    assert row["status"] == "ok", row["reason"]
    assert row["kernel_ms"] > 0 and row["kernel_ms_min"] <= row["kernel_ms"] <= row["kernel_ms_max"]
    assert row["reps"] >= 3 and row["setup_ms"] >= 0 and row["e2e_ms"] > 0
    assert row["max_rel_err"] < 1e-5
    assert row["OH"] == row["OW"] == SIZE // 2
    assert row["floor_ms"] > 0 and row["pct_of_floor"] == pytest.approx(row["floor_ms"] / row["kernel_ms"] * 100)
    assert row["backend"] == "cpu" and row["device"]


def test_seed_000_channel_bug_is_wrong_not_timed_silently(image_path):
    """Seed 000 copied the same filter slice for every output channel; the check must catch it."""

    def first_slice_everywhere(honest, problem, buffers):
        def run():
            honest.run()
            buffers.output[:, :, 1:] = buffers.output[:, :, :1]  # every channel got channel 0's filter

        return PreparedKernel(run, honest.info)

    row = run_cell(cell_for("direct"), image_path, backend=SabotagedBackend(first_slice_everywhere))
    assert row["status"] == "wrong"
    assert row["kernel_ms"] > 0  # the time is kept, flagged by the status
    assert row["max_rel_err"] > 1e-2
    assert "exceeds tolerance" in row["reason"]


def test_unwritten_output_is_wrong(image_path):
    """Seed 003 computed positions regardless of stride; here half the output is never written."""

    def half_output(honest, problem, buffers):
        def run():
            honest.run()
            buffers.output[: problem.out_height // 2] = np.nan  # as if those threads never ran

        return PreparedKernel(run, honest.info)

    row = run_cell(cell_for("cudnn"), image_path, backend=SabotagedBackend(half_output))
    assert row["status"] == "wrong"
    assert row["nonfinite"] > 0 and "NaN" in row["reason"]


def test_a_kernel_that_goes_wrong_after_its_first_runs_is_wrong(image_path):
    """What is verified is a run after the timing's (the round trip's last), not the first launch:
    a kernel that keeps state between runs (a counter it never resets) and is right only at first."""

    def right_twice(honest, problem, buffers):
        runs = []

        def run():
            honest.run()
            runs.append(1)
            if len(runs) > 2:
                buffers.output[:] *= 1.5

        return PreparedKernel(run, honest.info)

    row = run_cell(cell_for("direct"), image_path, backend=SabotagedBackend(right_twice))
    assert row["status"] == "wrong" and row["max_rel_err"] > 0.4


def test_a_kernel_that_stops_writing_after_its_first_launch_is_wrong(image_path):
    """Each round trip starts from a NaN-filled output: a kernel that writes nothing after its first
    launch leaves NaN there, which the check finds, however right its first output was."""

    def writes_once(honest, problem, buffers):
        runs = []

        def run():
            if not runs:
                honest.run()
            runs.append(1)

        return PreparedKernel(run, honest.info)

    row = run_cell(cell_for("direct"), image_path, backend=SabotagedBackend(writes_once))
    assert row["status"] == "wrong" and row["nonfinite"] > 0 and "NaN" in row["reason"]


@pytest.mark.parametrize("failure,status", [
    (LaunchConfigError("launch refused: CUDA_ERROR_INVALID_VALUE: invalid argument", "launch"), "invalid_config"),
    (DeviceOutOfMemory("out of memory allocating 9 GB", "launch"), "oom"),
    (UnsupportedCell("stride 2 is not implemented", "setup"), "unsupported"),
])
def test_kernel_failures_are_rows_without_times(image_path, failure, status):
    def failing(honest, problem, buffers):
        def run():
            raise failure

        return PreparedKernel(run, honest.info)

    row = run_cell(cell_for("direct"), image_path, backend=SabotagedBackend(failing))
    assert row["status"] == status
    assert row["reason"] == failure.reason
    for timed in ("kernel_ms", "gflops", "pct_of_floor", "e2e_ms"):
        assert row.get(timed) is None


def test_a_pipeline_bug_raises_instead_of_writing_a_row(image_path):
    def buggy(honest, problem, buffers):
        def run():
            raise ZeroDivisionError("a bug in the harness, not in the kernel")

        return PreparedKernel(run, honest.info)

    with pytest.raises(ZeroDivisionError):
        run_cell(cell_for("direct"), image_path, backend=SabotagedBackend(buggy))


def test_image_of_the_wrong_size_is_refused(tmp_path):
    path = tmp_path / "small.png"
    cv2.imwrite(str(path), np.full((10, 12, 3), 128, dtype=np.uint8))
    with pytest.raises(ValueError, match="the cell needs"):
        run_cell(cell_for("direct"), path)


def test_row_write_is_atomic(tmp_path, monkeypatch):
    target = tmp_path / "cells" / "row.csv"
    write_row_atomically({"kernel": "direct", "status": "ok"}, target)
    with open(target) as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == COLUMNS and rows[0]["status"] == "ok"

    def crash(*args):
        raise KeyboardInterrupt  # e.g. the job killed between write and rename

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        write_row_atomically({"kernel": "direct", "status": "wrong"}, target)
    assert sorted(p.name for p in target.parent.iterdir()) == ["row.csv"]  # no temp file left
    with open(target) as handle:
        assert next(csv.DictReader(handle))["status"] == "ok"  # the old row is intact


def test_unknown_column_is_refused(tmp_path):
    with pytest.raises(KeyError, match="not in the row contract"):
        write_row_atomically({"kernel_time": 1.0}, tmp_path / "x.csv")
