"""The tools pool grows as the report stage needs it: one worker for a lone job, and every missing
worker at once as soon as a job finds them all busy (the report stage's jobs come in bursts); a GPU
run's start starts them all, warm before its last cell."""

from __future__ import annotations

import sys
import threading
import time

from convlab.service.pool import WorkerPool
from convlab.snakefile.runlife import pools_for_run

# Says hello, then answers every job as a tools worker does, after a start as slow as a real one's.
FAKE_WORKER = """
import json, os, sys, time
time.sleep(0.3)
print(json.dumps({"ok": True, "pid": os.getpid(), "device": "host"}), flush=True)
for line in sys.stdin:
    print(json.dumps({"ok": True, "exit_code": 0, "stdout": "", "stderr": ""}), flush=True)
"""


def tools_pool(tmp_path, limit: int) -> WorkerPool:
    pool = WorkerPool("tools", {}, tmp_path / "service.log", [sys.executable, "-c", FAKE_WORKER], tools_limit=limit)
    pool.ensure_started()
    return pool


def wait_for_workers(pool: WorkerPool, count: int, seconds: float = 20.0) -> int:
    deadline = time.monotonic() + seconds
    while len(pool.describe()) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return len(pool.describe())


def test_a_lone_job_starts_one_tools_worker(tmp_path):
    pool = tools_pool(tmp_path, limit=4)
    try:
        worker = pool.acquire()
        assert worker is not None and worker.index == 0
        pool.release(worker)
        again = pool.acquire()
        assert again is worker  # free again: no second worker
        time.sleep(1.0)
        assert len(pool.describe()) == 1
    finally:
        pool.stop()


def test_a_job_that_finds_every_worker_busy_starts_the_whole_pool(tmp_path):
    pool = tools_pool(tmp_path, limit=4)
    try:
        first, second = pool.acquire(), pool.acquire()
        assert {first.index, second.index} == {0, 1}
        # the other two start beside the second, without a job asking
        assert wait_for_workers(pool, 4) == 4
        started = time.monotonic()
        third, fourth = pool.acquire(), pool.acquire()
        assert time.monotonic() - started < 0.2  # both were waiting, warm
        assert {third.index, fourth.index} == {2, 3}
        assert all(w["alive"] for w in pool.describe())
        assert third.run({"run": {"argv": ["figures"], "cwd": str(tmp_path)}}, 10)["ok"]
    finally:
        pool.stop()


def test_a_runs_start_warms_the_whole_tools_pool_before_any_job_asks(tmp_path):
    pool = WorkerPool("tools", {}, tmp_path / "service.log", [sys.executable, "-c", FAKE_WORKER], tools_limit=3)
    try:
        pool.start_for_run()
        assert wait_for_workers(pool, 3) == 3
        started = time.monotonic()
        workers = [pool.acquire() for _ in range(3)]
        assert time.monotonic() - started < 0.2  # every one warm: no job waits for a start
        assert sorted(w.index for w in workers) == [0, 1, 2]
    finally:
        pool.stop()


def test_only_a_gpu_run_starts_the_report_stages_workers_with_its_own():
    assert pools_for_run("cuda") == ("cuda", "tools")
    assert pools_for_run("cpu") == ("cpu",)  # the cells are timed on the cores the imports would take


def test_a_job_that_comes_while_the_pool_starts_waits_for_a_worker_instead_of_failing(tmp_path):
    pool = WorkerPool("tools", {}, tmp_path / "service.log", [sys.executable, "-c", FAKE_WORKER], tools_limit=2)
    try:
        pool.start_for_run()
        worker = pool.acquire()  # before any worker has said hello: a data job at the run's start
        assert worker is not None and pool.error is None
    finally:
        pool.stop()


# Says it started (a file named by its pid), then says hello only once the gate file exists.
GATED_WORKER = """
import json, os, sys, time
folder = sys.argv[1]
open(os.path.join(folder, f"started-{os.getpid()}"), "w").close()
while not os.path.exists(os.path.join(folder, "gate")):
    time.sleep(0.01)
print(json.dumps({"ok": True, "pid": os.getpid(), "device": "host"}), flush=True)
for line in sys.stdin:
    print(json.dumps({"ok": True, "exit_code": 0, "stdout": "", "stderr": ""}), flush=True)
"""


def test_jobs_that_come_at_once_start_their_workers_side_by_side(tmp_path):
    pool = WorkerPool("tools", {}, tmp_path / "service.log", [sys.executable, "-c", GATED_WORKER, str(tmp_path)],
                      tools_limit=2)
    pool.ensure_started()
    got: list = []
    jobs = [threading.Thread(target=lambda: got.append(pool.acquire())) for _ in range(2)]
    try:
        for job in jobs:
            job.start()
        deadline = time.monotonic() + 20
        while len(list(tmp_path.glob("started-*"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        # the second job's worker starts while the first one's is still starting
        assert len(list(tmp_path.glob("started-*"))) == 2
    finally:
        (tmp_path / "gate").touch()
        for job in jobs:
            job.join(20)
        pool.stop()
    assert len(got) == 2 and None not in got and {worker.index for worker in got} == {0, 1}
