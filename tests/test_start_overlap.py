"""The run's start overlapped: the measurement service and its workers start as a run that
measures begins, and warm up beside the first jobs on the shapes of the grid's problems only; the
compile-ahead (untimed, on every core) runs beside the warm-up, while timed work waits for both."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from service_helpers import ServiceSandbox, read_row

from convlab.backends.devicelock import exclusive_device, lock_path, untimed_device
from convlab.plan.config import validate_config
from convlab.plan.grid import build_cells
from convlab.plan.operands import ConvOperands, GemmOperands
from convlab.run.warmup import (
    ALL_SHAPES,
    WARM_SHAPES_ENV,
    grid_shapes,
    shapes_from_environment,
    shapes_text,
    warm_problems,
)
from convlab.service.worker import runs_beside_warm_up

REPO = Path(__file__).resolve().parents[1]


def cells_of(config: dict, backend: str = "cuda") -> list:
    return build_cells(validate_config(config), backend, "h100")


def test_the_warm_up_covers_exactly_the_shapes_of_the_grids_problems():
    # conv2d alone: one picture at a time, in the layouts of its kernels (direct: hwc)
    only_conv2d = {"backend": "cuda", "conv2d": {"sizes": [64], "strides": [1], "kernels": ["direct"]},
                   "tiling": {"enabled": False}, "winograd_layers": {"enabled": False}, "gemm": {"enabled": False}}
    assert grid_shapes(cells_of(only_conv2d)) == {("conv", "hwc")}
    warmed = list(warm_problems(grid_shapes(cells_of(only_conv2d))))
    assert len(warmed) == 1 and isinstance(warmed[0][0], ConvOperands) and not warmed[0][0].problem.batched
    # the tiny grid: batches of pictures (winograd_layers) and matrix products as well, no more
    tiny = yaml.safe_load((REPO / "config" / "tiny-cpu.yaml").read_text())
    shapes = grid_shapes(cells_of(tiny, "cpu"))
    assert ("matrix", "") in shapes and any(kind == "batch" for kind, _ in shapes)
    kinds = {("batch" if isinstance(o, ConvOperands) and o.problem.batched else
              "matrix" if isinstance(o, GemmOperands) else "conv") for o, _ in warm_problems(shapes)}
    assert kinds == {kind for kind, _ in shapes}
    # the default grid leaves out a batch in hwc: one problem fewer than a worker that knows no grid
    default = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    assert grid_shapes(cells_of(default)) < ALL_SHAPES


def test_a_worker_warms_the_shapes_its_run_named_and_every_shape_where_none_was_named(monkeypatch):
    monkeypatch.delenv(WARM_SHAPES_ENV, raising=False)
    assert shapes_from_environment() == ALL_SHAPES
    monkeypatch.setenv(WARM_SHAPES_ENV, shapes_text({("conv", "chw"), ("matrix", "")}))
    assert shapes_from_environment() == {("conv", "chw"), ("matrix", "")}
    monkeypatch.setenv(WARM_SHAPES_ENV, "nonsense,conv:hwc")
    assert shapes_from_environment() == {("conv", "hwc")}


def locks_now(path: Path, mode: int) -> bool:
    """Whether another open of the lock file gets ``mode`` at once."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, mode | fcntl.LOCK_NB)
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(descriptor)


def test_untimed_work_runs_beside_untimed_work_and_never_beside_timed_work(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    key = "cuda-GPU-test"
    with untimed_device(key) as path:
        assert path == lock_path(key)
        assert locks_now(path, fcntl.LOCK_SH)  # another warm-up or compile-ahead goes on
        assert not locks_now(path, fcntl.LOCK_EX)  # a cell's timing waits
    with exclusive_device(key) as path:
        assert not locks_now(path, fcntl.LOCK_SH)  # a warm-up waits for the timing to end
    # a timed measurement asked for during the warm-up starts once the warm-up lets go
    order: list[str] = []

    def time_a_cell() -> None:
        with exclusive_device(key):
            order.append("timed")

    with untimed_device(key):
        timed = threading.Thread(target=time_a_cell)
        timed.start()
        time.sleep(0.2)
        order.append("warm-up ends")
    timed.join(5)
    assert order == ["warm-up ends", "timed"]


def test_only_the_compile_ahead_runs_beside_a_workers_warm_up():
    assert runs_beside_warm_up({"run": {"argv": ["compile-kernels", "--config", "{}"], "cwd": "/x"}})
    for job in ({"run": {"argv": ["bandwidth", "--out", "x.json"], "cwd": "/x"}}, {"request": {}}, {"rest": True},
                {"run": {"argv": [], "cwd": "/x"}}):
        assert not runs_beside_warm_up(job), job


@pytest.fixture
def sandbox(tmp_path):
    box = ServiceSandbox(tmp_path, "cpu")
    yield box
    box.close()


START_AS_A_RUN_DOES = """
import os, sys, time
from convlab.service.client import start_service
from convlab.service.identity import ServicePaths, current_identity, runtime_dir
from convlab.service.runsocket import SOCKET_ENV
paths = ServicePaths.for_key(runtime_dir(), current_identity(sys.executable).key)
os.environ[SOCKET_ENV] = paths.socket
start_service("cpu")
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    if os.path.exists(paths.log) and "workers start" in open(paths.log).read():
        break
    time.sleep(0.05)
"""


def test_a_run_starts_its_workers_and_they_warm_up_before_its_first_cell(sandbox, tmp_path):
    env = {**sandbox.env, WARM_SHAPES_ENV: "conv:hwc"}
    started = subprocess.run([sys.executable, "-c", START_AS_A_RUN_DOES], env=env, cwd=REPO, capture_output=True,
                             text=True, timeout=120)
    assert started.returncode == 0, started.stderr
    deadline = time.monotonic() + 60
    while "warmed up in" not in sandbox.logs() and time.monotonic() < deadline:
        time.sleep(0.05)
    worker = sandbox.status()["workers"][0]["pid"]
    out = tmp_path / "row.csv"
    result = sandbox.run(sandbox.cell("direct"), out)
    assert result.returncode == 0, result.stderr
    assert read_row(out)["status"] == "ok"
    assert sandbox.status()["workers"][0]["pid"] == worker  # the cell went to the worker the run started
    log = sandbox.logs()
    # in the log's order: the run's start, the warm-up on the run's shapes alone, its end
    begins, warming, warmed = (log.index(text) for text in ("a run begins: its cpu workers start",
                                                            "cpu worker 0: warming up on conv:hwc",
                                                            "cpu worker 0: warmed up in"))
    assert begins < warming < warmed


def test_a_backend_whose_first_use_compiles_warms_each_shape_in_a_helper_process_first(monkeypatch):
    from convlab.backends import get_backend
    from convlab.run import warmup

    started: list[tuple[list[str], subprocess.Popen]] = []
    real_popen = subprocess.Popen

    def recording_popen(args, **options):
        process = real_popen(args, **options, env={**os.environ, "PYTHONPATH": str(REPO / "workflow")})
        started.append((args, process))
        return process

    monkeypatch.setattr(warmup.subprocess, "Popen", recording_popen)
    backend = get_backend("cpu")
    shapes = {("conv", "hwc"), ("matrix", "")}
    assert warmup.warm_up_beside(backend, shapes) > 0
    assert started == []  # the cpu compiles nothing on first use: no helper
    monkeypatch.setattr(backend, "compiles_sources", True)
    assert warmup.warm_up_beside(backend, shapes) > 0
    assert sorted(args[-1] for args, _ in started) == ["conv:hwc", "matrix:"]
    assert all(args[1:4] == ["-m", "convlab.run.warmup", "cpu"] for args, _ in started)
    assert all(process.returncode == 0 for _, process in started)  # each warmed its shape and left


def test_each_jobs_scheduler_resources_are_evaluated_as_the_run_starts_not_when_the_cells_become_ready():
    from types import SimpleNamespace

    from convlab.snakefile.runlife import resolve_job_resources

    asked: list[int] = []

    class Job:
        def __init__(self, number: int) -> None:
            self.number = number

        @property
        def scheduler_resources(self) -> dict:
            asked.append(self.number)
            return {"_cores": 1}

    jobs = [Job(number) for number in range(5)]
    workflow = SimpleNamespace(dag=SimpleNamespace(needrun_jobs=lambda: jobs))
    resolve_job_resources(workflow)
    assert asked == [0, 1, 2, 3, 4]
