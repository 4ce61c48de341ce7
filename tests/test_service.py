"""The measurement service on the cpu backend: thin clients, one service per identity, refusals,
and every fault a status row (a worker that dies, a cell that hangs, a service killed mid-cell)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from service_helpers import (
    REPO,
    ServiceSandbox,
    check_a_hang_times_out,
    differences,
    read_row,
    stable_part,
    wait_for_exit,
)
from workflow_helpers import convlab

from convlab.service import client, identity, pool
from convlab.service.identity import Identity, code_fingerprint, current_identity
from convlab.service.pool import mixed_models


@pytest.fixture
def sandbox(tmp_path: Path):
    box = ServiceSandbox(tmp_path, "cpu")
    yield box
    box.close()


def frame(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


def exchange(path: Path, raw: bytes) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(20)
        sock.connect(str(path))
        sock.sendall(raw)
        header = sock.recv(4)
        (length,) = struct.unpack(">I", header)
        body = b""
        while len(body) < length:
            body += sock.recv(length - len(body))
    return json.loads(body)


def test_a_cell_goes_through_the_service_and_records_its_phases(sandbox, tmp_path):
    out = tmp_path / "row.csv"
    result = sandbox.run(sandbox.cell("direct"), out)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("results/local/cells/cpu/conv2d/kernel~direct/size~64/stride~1/filter~3/default.csv: ok ")
    assert len(result.stdout.splitlines()) == 1
    row = read_row(out)
    assert row["status"] == "ok" and float(row["max_rel_err"]) < 1e-5
    phases = [part.split("=")[0] for part in row["phase_ms"].split(";")]
    assert phases[:5] == ["startup", "connect", "queue", "load", "lock_wait"] and "verify" in phases
    assert 0 < float(row["service_ms"]) < float(row["job_ms"])
    worker = sandbox.status()["workers"]
    assert [(w["backend"], w["alive"]) for w in worker] == [("cpu", True)]
    # the cpu worker measures on one thread, whatever the machine's cores, and the row says so
    assert row["host_threads"] == "1"


def test_the_cell_job_imports_neither_numpy_nor_cupy(sandbox, tmp_path):
    """The job is a thin client: the standard library and convlab's client modules only."""
    cell = sandbox.cell("direct")
    assert sandbox.run(cell, tmp_path / "warm.csv").returncode == 0  # the service is up
    probe = ("import sys; from convlab.app.cli import main; code = main(sys.argv[1:]); "
             "heavy = sorted(m for m in ('numpy', 'cupy', 'pandas', 'cv2', 'yaml', 'jsonschema') if m in sys.modules); "
             "print('HEAVY', heavy, code)")
    result = subprocess.run([sys.executable, "-c", probe, "cell", "--spec", cell.to_json(), "--image",
                             str(sandbox.image), "--out", str(tmp_path / "row.csv")],
                            env=sandbox.env, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.stdout.strip().splitlines()[-1] == "HEAVY [] 0", result.stdout + result.stderr
    assert read_row(tmp_path / "row.csv")["status"] == "ok"


def test_concurrent_first_clients_start_exactly_one_service(sandbox, tmp_path):
    cells = [sandbox.cell(kernel) for kernel in ("direct", "cudnn", "fft", "im2col_cublas")]
    jobs = [sandbox.start(cell, tmp_path / f"{i}.csv") for i, cell in enumerate(cells)]
    for job in jobs:
        stdout, stderr = job.communicate(timeout=300)
        assert job.returncode == 0, stderr
        assert ": ok " in stdout
    assert sandbox.logs().count("listening on") == 1
    assert len(list(sandbox.runtime.glob("*.sock"))) == 1


def test_service_and_in_process_give_the_same_statuses_and_errors(sandbox, tmp_path):
    """CONVLAB_SERVICE=off measures in the job's own process: same rows (times aside), same error lines."""
    cases = [sandbox.cell("direct"), sandbox.cell("winograd", stride=2), sandbox.cell("cudnn", stride=2)]
    for index, cell in enumerate(cases):
        served = sandbox.run(cell, tmp_path / f"served{index}.csv")
        alone = sandbox.run(cell, tmp_path / f"alone{index}.csv", CONVLAB_SERVICE="off")
        assert served.returncode == alone.returncode == 0, served.stderr + alone.stderr
        assert served.stdout.split()[:2] == alone.stdout.split()[:2]
        in_service, in_process = read_row(tmp_path / f"served{index}.csv"), read_row(tmp_path / f"alone{index}.csv")
        assert stable_part(in_service) == stable_part(in_process)
        assert in_process["service_ms"] == "" and in_service["service_ms"] != ""
    assert read_row(tmp_path / "served1.csv")["status"] == "unsupported"
    missing = tmp_path / "missing.png"
    served = sandbox.run(cases[0], tmp_path / "x.csv", image=missing)
    alone = sandbox.run(cases[0], tmp_path / "y.csv", image=missing, CONVLAB_SERVICE="off")
    assert served.returncode == alone.returncode == 2
    assert served.stderr.strip() == alone.stderr.strip() == f"error: image not found: {missing}"
    assert not (tmp_path / "x.csv").exists() and not (tmp_path / "y.csv").exists()


def test_malformed_requests_are_refused_in_one_line_and_the_service_serves_on(sandbox, tmp_path):
    assert sandbox.run(sandbox.cell("direct"), tmp_path / "row.csv").returncode == 0
    (path,) = sandbox.runtime.glob("*.sock")
    cases = {
        frame(b"{not json"): "not JSON",
        frame(b"[1, 2]"): "JSON object",
        frame(json.dumps({"op": "ping", "extra": 1}).encode()): "unknown field(s) for ping: extra",
        frame(json.dumps({"op": "launch"}).encode()): "unknown op 'launch'",
        frame(json.dumps({"op": "cell", "spec": 3, "out": "x", "client": {}}).encode()): "field spec has the wrong type",
        frame(json.dumps({"op": "cell", "out": "x", "client": {}}).encode()): "missing field(s) for cell: spec",
        struct.pack(">I", 1 << 30): "exceeds the limit",
    }
    for raw, fragment in cases.items():
        answer = exchange(path, raw)
        assert answer["ok"] is False and fragment in answer["error"], answer
        assert "\n" not in answer["error"] and answer["error"].startswith("refused: ")
    assert exchange(path, frame(b'{"op": "ping"}'))["ok"] is True
    assert sandbox.run(sandbox.cell("direct"), tmp_path / "again.csv").returncode == 0


# The other user's client needs an interpreter it may run: a virtual environment under /root is closed to it.
SYSTEM_PYTHON = next((p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.access(p, os.X_OK)), None)


@pytest.mark.skipif(os.getuid() != 0 or SYSTEM_PYTHON is None,
                    reason="switching to another uid needs root and a system python3 (CI has both)")
def test_another_user_is_refused_by_uid(tmp_path):
    """Even where the folder and socket were opened to everyone, a peer of another uid gets a refusal."""
    import shutil
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="convlab-uid-test-", dir="/tmp"))  # pytest's tmp_path is closed to others
    sandbox = ServiceSandbox(root, "cpu")
    try:
        assert sandbox.run(sandbox.cell("direct"), tmp_path / "row.csv").returncode == 0
        (path,) = sandbox.runtime.glob("*.sock")
        for folder in (root, sandbox.runtime):
            folder.chmod(0o755)
        path.chmod(0o666)
        answer = _ping_as_nobody(path)
    finally:
        sandbox.close()
        shutil.rmtree(root, ignore_errors=True)
    assert answer == {"ok": False, "error": "refused: this measurement service belongs to uid 0, not 65534"}


def _ping_as_nobody(path: Path) -> dict:
    script = ("import json, socket, struct, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
              "body = json.dumps({'op': 'ping'}).encode(); s.sendall(struct.pack('>I', len(body)) + body); "
              "n = struct.unpack('>I', s.recv(4))[0]; print(s.recv(n).decode())")
    result = subprocess.run([SYSTEM_PYTHON, "-c", script, str(path)], user=65534, capture_output=True, text=True,
                            timeout=60, cwd="/")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_runtime_folder_open_to_others_is_refused_in_one_line(sandbox, tmp_path):
    sandbox.runtime.chmod(0o755)
    result = sandbox.run(sandbox.cell("direct"), tmp_path / "row.csv")
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: {sandbox.runtime} is open to other users (mode 0o755); run: chmod 700 {sandbox.runtime}"


def test_a_worker_that_dies_mid_cell_is_an_error_row_and_the_next_cell_is_clean(sandbox, tmp_path):
    direct = sandbox.cell("direct")
    assert sandbox.run(direct, tmp_path / "clean.csv").returncode == 0
    sandbox.convlab("serve", "--stop")
    first_worker = None
    crash = sandbox.run(sandbox.cell("fault_oob_write"), tmp_path / "crash.csv")
    assert crash.returncode == 0, crash.stderr
    row = read_row(tmp_path / "crash.csv")
    assert row["status"] == "error" and row["kernel"] == "fault_oob_write"
    # it killed its worker, and the fresh one it was sent to once more
    assert "the measurement worker died (killed by signal 9 (SIGKILL)), twice" in row["reason"]
    assert crash.stdout.strip().endswith(row["reason"])
    first_worker = sandbox.status()["workers"][0]["pid"]
    after = sandbox.run(direct, tmp_path / "after.csv")
    assert after.returncode == 0
    assert differences(read_row(tmp_path / "after.csv"), read_row(tmp_path / "clean.csv")) == {}
    assert first_worker == sandbox.status()["workers"][0]["pid"]  # the replacement worker took it


def test_a_hung_cell_times_out_into_an_error_row(sandbox, tmp_path):
    check_a_hang_times_out(sandbox, tmp_path, timeout_s=3, within_s=60)


def start_a_slow_cell(sandbox, tmp_path) -> subprocess.Popen:
    """A cell job whose cell is slow the first time, once the cell has started in a worker."""
    marker = tmp_path / "in-the-cell"
    job = sandbox.start(sandbox.cell("slow_first_direct"), tmp_path / "row.csv", CONVLAB_TEST_MARKER=str(marker))
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert time.monotonic() < deadline and job.poll() is None, "the cell never started"
        time.sleep(0.02)
    return job


def test_a_service_killed_mid_cell_is_retried_once_in_a_fresh_one(sandbox, tmp_path):
    job = start_a_slow_cell(sandbox, tmp_path)
    first = sandbox.info()["pid"]
    workers = [w["pid"] for w in sandbox.status()["workers"]]
    os.kill(first, signal.SIGKILL)
    stdout, stderr = job.communicate(timeout=300)
    assert job.returncode == 0, stderr
    assert "went away during this cell" in stderr and "sending it to a fresh one" in stderr
    row = read_row(tmp_path / "row.csv")
    assert row["status"] == "ok", (row["reason"], stderr, sandbox.logs())
    assert sandbox.info()["pid"] != first
    assert all(wait_for_exit(pid, 10) for pid in workers), "an orphaned worker outlived its service"


def test_a_worker_killed_from_outside_mid_cell_loses_no_cell_a_fresh_one_measures_it(sandbox, tmp_path):
    job = start_a_slow_cell(sandbox, tmp_path)
    (killed,) = [w["pid"] for w in sandbox.status()["workers"]]
    os.kill(killed, signal.SIGKILL)
    stdout, stderr = job.communicate(timeout=300)
    assert job.returncode == 0, stderr
    row = read_row(tmp_path / "row.csv")
    assert row["status"] == "ok", (row["reason"], stderr, sandbox.logs())
    assert "during a cell; sending it to a fresh worker" in sandbox.logs()
    assert [w["pid"] for w in sandbox.status()["workers"]] != [killed]
    # where something went wrong the log outlives the service: what to read then
    service = sandbox.info()["pid"]
    (log,) = sandbox.runtime.glob("*.log")
    os.kill(service, signal.SIGTERM)
    assert wait_for_exit(service, 30)
    assert list(sandbox.runtime.iterdir()) == [log]


def test_an_idle_service_exits_and_a_dead_ones_socket_is_replaced(sandbox, tmp_path):
    assert sandbox.run(sandbox.cell("direct"), tmp_path / "a.csv", CONVLAB_SERVICE_IDLE_S="1").returncode == 0
    pid = sandbox.info()["pid"]
    assert wait_for_exit(pid, 20)
    # a service that ended after nothing went wrong leaves no file behind: socket, record, log, lock
    assert list(sandbox.runtime.iterdir()) == []
    assert sandbox.run(sandbox.cell("direct"), tmp_path / "b.csv").returncode == 0
    os.kill(sandbox.info()["pid"], signal.SIGKILL)  # leaves its socket behind
    time.sleep(0.2)
    assert list(sandbox.runtime.glob("*.sock"))
    assert sandbox.run(sandbox.cell("direct"), tmp_path / "c.csv").returncode == 0


def test_a_run_that_ends_leaves_its_service_resting_and_warm_for_the_next(sandbox, tmp_path, monkeypatch):
    """The end of a run (end_of_run, through the socket the run named for its jobs) lets the
    workers drop what they keep and keeps their processes; a failed run's end stops the service."""
    from convlab.service.client import end_of_run
    from convlab.service.runsocket import SOCKET_ENV

    assert sandbox.run(sandbox.cell("direct"), tmp_path / "a.csv").returncode == 0
    pid, worker = sandbox.info()["pid"], sandbox.status()["workers"][0]["pid"]
    (socket_path,) = sandbox.runtime.glob("*.sock")
    monkeypatch.setenv(SOCKET_ENV, str(socket_path))
    assert exchange(socket_path, frame(b'{"op": "rest"}')) == {"ok": True, "pid": pid, "rested": 1}
    end_of_run(failed=False)
    assert (sandbox.info()["pid"], sandbox.status()["workers"][0]["pid"]) == (pid, worker)
    assert sandbox.run(sandbox.cell("direct", stride=2), tmp_path / "b.csv").returncode == 0
    assert sandbox.status()["workers"][0]["pid"] == worker  # the next run's cell: the same warm worker
    end_of_run(failed=True)
    assert wait_for_exit(pid, 30)


def test_the_identity_separates_jobs_users_gpus_and_code(tmp_path):
    base = Identity(host="n1", uid=1000, python="/usr/bin/python3", repo="/lab", code="abc", gpus=("0: GPU-1",),
                    env=(("SLURM_JOB_ID", "1"),))
    variants = [base._replace(**change) for change in (
        {"env": (("SLURM_JOB_ID", "2"),)}, {"uid": 1001}, {"gpus": ("0: GPU-2",)}, {"code": "abd"},
        {"repo": "/lab2"}, {"host": "n2"})]
    assert len({base.key, *(v.key for v in variants)}) == 1 + len(variants)
    package = tmp_path / "convlab"
    (package / "measure").mkdir(parents=True)
    (package / "measure" / "timing.py").write_text("X = 1\n")
    before = code_fingerprint(package)
    (package / "measure" / "timing.py").write_text("X = 1\n#\n")
    assert code_fingerprint(package) != before


def test_the_cpu_worker_limits_its_pools_whatever_the_thread_variables_say_and_they_name_no_other_service(
        monkeypatch):
    """Snakemake sets OMP_NUM_THREADS and the like for each job to its own threads: a cell job and a
    report job must still find one service, whose cpu worker sizes its pools itself (threadpoolctl
    reports one thread each, and OpenCV's too), as the code that names the service says."""
    keys = set()
    for threads in ("1", "2", None):
        if threads is None:
            monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        else:
            monkeypatch.setenv("OMP_NUM_THREADS", threads)
        keys.add(current_identity().key)
    assert len(keys) == 1
    probe = ("import json, cv2, threadpoolctl; from convlab.backends.cpu import CpuBackend; b = CpuBackend(); "
             "print(json.dumps([[p['internal_api'], p['num_threads']] for p in threadpoolctl.threadpool_info()] "
             "+ [['opencv', cv2.getNumThreads()], ['row', b.device_info()['host_threads']]]))")
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "2"}
    seen = json.loads(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env,
                                     check=True).stdout)
    assert any(name == "openblas" for name, _ in seen), seen  # NumPy's BLAS is among them
    assert all(threads == 1 for _, threads in seen), seen


def test_gpus_of_different_models_are_one_line_asking_to_choose():
    same = [{"index": 0, "name": "NVIDIA H200"}, {"index": 1, "name": "NVIDIA H200"}]
    assert mixed_models(same) is None
    mixed = [{"index": 0, "name": "NVIDIA H100"}, {"index": 1, "name": "NVIDIA H200"}, {"index": 2, "name": "NVIDIA H100"}]
    line = mixed_models(mixed)
    assert "\n" not in line and "0: NVIDIA H100, 1: NVIDIA H200, 2: NVIDIA H100" in line
    assert line.endswith("CUDA_VISIBLE_DEVICES=0,2")


def test_a_week_old_identity_leaves_no_files_behind(tmp_path):
    from convlab.service.server import prune_runtime_dir

    old, current = tmp_path / "aaaa.log", tmp_path / "bbbb.log"
    for path in (old, tmp_path / "aaaa.start.lock", current, tmp_path / "bbbb.start.lock", tmp_path / "notes.txt"):
        path.write_text("x")
    week_ago = time.time() - 8 * 24 * 3600
    for path in tmp_path.iterdir():
        os.utime(path, (week_ago, week_ago))
    prune_runtime_dir(tmp_path, keep="bbbb")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bbbb.log", "bbbb.start.lock", "notes.txt"]


def test_a_report_command_runs_in_a_tools_worker_for_the_jobs_directory(sandbox, tmp_path):
    """A report command goes to a warm tools worker, which never leaves its own directory: its files
    land where the job's relative paths say (its defaults too), and it prints what the job's own
    process would."""
    job = tmp_path / "job"
    rows = job / "results" / "local" / "cells"
    rows.mkdir(parents=True)
    made = sandbox.run(sandbox.cell("direct"), rows / "direct.csv", CONVLAB_SERVICE="off")
    assert made.returncode == 0, made.stderr

    def run(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
        return convlab(*args, cwd=cwd, service=None, timeout=120, **{**sandbox.env, **env})

    summary = run(job, "aggregate", "--out", "results/local/summary.csv", "results/local/cells/direct.csv")
    assert summary.stdout == "results/local/summary.csv: 1 rows; by status: {'ok': 1}\n", summary.stderr
    served = run(job, "gpus", "--out", "gpus.html")  # the first job starts the service, in its own directory
    alone = run(job, "gpus", "--out", "alone.html", CONVLAB_SERVICE="off")
    assert served.returncode == alone.returncode == 0, served.stderr + alone.stderr
    assert (served.stdout, alone.stdout) == ("gpus.html\n", "alone.html\n")
    assert (job / "gpus.html").read_text() == (job / "alone.html").read_text()
    assert [w["backend"] for w in sandbox.status()["workers"]] == ["tools"]
    # a job elsewhere: its relative paths, --results' default among them, are its own, not the worker's
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(job / "results", elsewhere / "results")
    moved = run(elsewhere, "gpus", "--out", "gpus.html")
    assert moved.returncode == 0, moved.stderr
    assert moved.stdout == f"{elsewhere / 'gpus.html'}\n"
    assert (elsewhere / "gpus.html").read_text() == (job / "gpus.html").read_text()


def test_a_spec_that_is_no_cell_is_the_same_one_line_in_the_service_and_in_process(sandbox, tmp_path):
    spec = json.dumps({"backend": "cpu", "kernel": "direct"})
    command = [sys.executable, "-S", "-m", "convlab", "cell", "--spec", spec, "--out", str(tmp_path / "row.csv")]
    served, alone = (subprocess.run(command, env={**sandbox.env, **env}, cwd=REPO, capture_output=True, text=True,
                                    timeout=120) for env in ({}, {"CONVLAB_SERVICE": "off"}))
    assert served.returncode == alone.returncode == 2
    assert served.stderr == alone.stderr
    assert served.stderr.startswith("error: not a valid cell: TypeError: ") and len(served.stderr.splitlines()) == 1
    assert not (tmp_path / "row.csv").exists()


def test_the_service_runs_this_checkouts_package_and_names_this_checkout():
    """The folders the service's start and identity are computed from, whatever room holds them:
    a service started by the run itself (not by a job, whose PYTHONPATH names workflow/) must
    import this checkout's package, not one installed elsewhere."""
    workflow = REPO / "workflow"
    assert Path(client.PACKAGE_PARENT) == workflow and pool.PACKAGE_PARENT == workflow
    assert Path(identity.PACKAGE_DIR) == workflow / "convlab"
    assert current_identity().repo == str(REPO)


def test_serve_stop_and_status_see_a_service_that_a_run_started_with_another_environment(sandbox, tmp_path):
    """A run's jobs carry variables the user's shell lacks (here one of the identity's), so their
    service has another identity than the shell's: `serve --status` and `--stop` find it by its
    checkout all the same."""
    assert sandbox.run(sandbox.cell("direct"), tmp_path / "row.csv", CUPY_TF32="1").returncode == 0
    pid = sandbox.info()["pid"]
    assert sandbox.info()["identity"]["env"].get("CUPY_TF32") == "1"
    assert sandbox.status()["pid"] == pid
    stopped = sandbox.convlab("serve", "--stop")
    assert stopped.stdout.strip() == f"measurement service {pid} stopped", stopped.stdout + stopped.stderr
    assert wait_for_exit(pid, 30)
    again = sandbox.convlab("serve", "--stop")
    assert again.stdout.strip() == "no measurement service is running for this checkout"


def test_a_start_lock_removed_while_a_client_waits_on_it_is_taken_anew(tmp_path):
    """The ending service removes the lock file it holds; a client that opened that file meanwhile
    takes the one at the path once it gets the lock, so two clients never both start a service."""
    from convlab.service.startlock import start_lock

    path = str(tmp_path / "key.start.lock")
    taken: list[int] = []
    with start_lock(path):
        def waiter() -> None:
            with start_lock(path) as lock:
                taken.append(os.fstat(lock.fileno()).st_ino)

        thread = threading.Thread(target=waiter)
        thread.start()
        time.sleep(0.3)  # the waiter has opened the old file and waits on it
        os.unlink(path)
    thread.join(timeout=10)
    # a waiter that kept the removed file would leave no file at the path: it made the next one and locked it
    assert taken and os.path.exists(path) and os.stat(path).st_ino == taken[0]
