"""The measurement service on a real GPU (marker gpu): a sticky CUDA error and a hung kernel each
become an error row, the worker is replaced, and the next cell's row is what a clean run gives."""

from __future__ import annotations

from pathlib import Path

import pytest
from service_helpers import ServiceSandbox, check_a_hang_times_out, differences, read_row

pytestmark = pytest.mark.gpu


@pytest.fixture
def sandbox(tmp_path: Path):
    box = ServiceSandbox(tmp_path, "cuda")
    yield box
    box.close()


def test_rows_name_the_gpu_they_ran_on(sandbox, tmp_path):
    result = sandbox.run(sandbox.cell("direct"), tmp_path / "row.csv")
    assert result.returncode == 0, result.stderr
    row = read_row(tmp_path / "row.csv")
    assert row["status"] == "ok" and row["gpu_uuid"].startswith("GPU-")
    workers = {w["index"]: w for w in sandbox.status()["workers"]}  # one per visible GPU
    worker = workers[int(row["gpu_index"])]
    assert worker["uuid"] == row["gpu_uuid"] and worker["device"] == row["device"]


def test_a_sticky_cuda_error_is_an_error_row_and_the_next_cell_gets_a_fresh_worker(sandbox, tmp_path):
    direct = sandbox.cell("direct")
    assert sandbox.run(direct, tmp_path / "clean.csv").returncode == 0
    sandbox.convlab("serve", "--stop")
    assert sandbox.run(sandbox.cell("direct", stride=2), tmp_path / "warm.csv").returncode == 0
    before = {w["pid"] for w in sandbox.status()["workers"]}
    fault = sandbox.run(sandbox.cell("fault_oob_write"), tmp_path / "fault.csv")
    assert fault.returncode == 0, fault.stderr
    row = read_row(tmp_path / "fault.csv")
    assert row["status"] == "error" and "illegal" in row["reason"].lower(), row["reason"]
    assert row["kernel_ms"] == ""
    after = sandbox.run(direct, tmp_path / "after.csv")
    assert after.returncode == 0, after.stderr
    changed = differences(read_row(tmp_path / "after.csv"), read_row(tmp_path / "clean.csv"))
    assert set(changed) <= {"gpu_uuid", "gpu_index"}, changed  # on a host of several GPUs, maybe another one
    assert {w["pid"] for w in sandbox.status()["workers"]} != before  # the poisoned worker left; a fresh one came


def test_a_hung_kernel_times_out_and_the_gpu_measures_again(sandbox, tmp_path):
    check_a_hang_times_out(sandbox, tmp_path, timeout_s=10, within_s=120)


def test_a_repeated_cudnn_cell_reuses_its_plans_and_its_choice(sandbox, tmp_path):
    """plan: best times every plan once per problem in a worker; the second cell only allocates."""
    cell = sandbox.cell("cudnn", size=64)
    cell = cell.__class__(**{**cell.__dict__, "tunables": {"plan": "best"}})
    rows = []
    for name in ("first.csv", "second.csv"):  # on one GPU: each worker keeps its own plans
        assert sandbox.run(cell, tmp_path / name, CUDA_VISIBLE_DEVICES="0").returncode == 0
        rows.append(read_row(tmp_path / name))
    assert rows[0]["status"] == rows[1]["status"] == "ok"
    assert rows[0]["engine"] == rows[1]["engine"]
    assert float(rows[1]["setup_ms"]) < float(rows[0]["setup_ms"]) / 5
