"""A fault of the machine while a worker measures a cell (results/ made read-only mid-run, a full
disk) is its one line with the path and the fix, not an internal error; any other error still is."""

from __future__ import annotations

import errno

import pytest

from convlab.service import worker


@pytest.fixture
def job():
    return {"request": {"client": {}}, "pending": "results/local/unrecorded/pending.csv"}


def raising(error: Exception):
    def measure(*_args, **_kwargs):
        raise error
    return measure


def test_a_read_only_results_folder_mid_run_is_one_line_naming_the_path(job, monkeypatch):
    path = "results/local/unrecorded/.reason.txt.tmp"
    monkeypatch.setattr(worker, "measure_job", raising(OSError(errno.EROFS, "Read-only file system", path)))
    answer = worker.measure_one(job, backend=None)
    assert answer["ok"] is False and "internal error" not in answer["error"]
    assert answer["error"].startswith(path) and not answer["error"].startswith("error:")


def test_a_full_disk_mid_run_is_one_line(job, monkeypatch):
    monkeypatch.setattr(worker, "measure_job", raising(OSError(errno.ENOSPC, "No space left on device", "results/x.csv")))
    answer = worker.measure_one(job, backend=None)
    assert answer["ok"] is False and "internal error" not in answer["error"] and "results/x.csv" in answer["error"]


def test_another_oserror_is_still_an_internal_error_with_its_traceback_in_the_log(job, monkeypatch, capsys):
    monkeypatch.setattr(worker, "measure_job", raising(FileNotFoundError(errno.ENOENT, "No such file", "kernels/x.cu")))
    answer = worker.measure_one(job, backend=None)
    assert answer["error"].startswith("internal error in the measurement worker: FileNotFoundError")
    assert "Traceback" in capsys.readouterr().err
