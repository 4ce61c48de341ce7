"""A measurement worker: one long-lived process per GPU (or the cpu), started by the service;
and tools workers, which run the pipeline's other commands (data, reports) warm.

It keeps what a one-shot cell job rebuilt every time: the CUDA context, compiled modules, the
cuDNN handle and plans, CuPy's float64 reference kernels, decoded pictures, and the last few
problems' operands, device inputs and references (convlab.plan.problemcache). It measures one
cell at a time (convlab.run.celljob.measure_job, as a job measuring in its own process does),
writes the row, and frees the memory pools before the next cell.

Any other command (``run`` jobs) it hands to the command runner it was started with (the
command line's: convlab.app.workerentry), which calls the command's handler with a console that
collects what it says: the reply carries its exit code and output. The service knows nothing of
the command line: it starts workers with the command its caller names.

Between runs the service lets it rest (``rest`` jobs): it drops what it keeps for the next cell and
stays warm.

Talks to the service over its standard input (one JSON job per line) and a private copy of its
standard output (one JSON reply per line); anything a library prints goes to the service log.
A sticky device error ends the worker after its row is written: the service starts a fresh one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, TextIO

from convlab.backends import get_backend
from convlab.backends.base import Backend
from convlab.codeversion import measurement_version
from convlab.machinefaults import machine_fault
from convlab.measure.provenance import now_utc
from convlab.pictures import loading as pictures
from convlab.plan import problemcache
from convlab.run.celljob import CellJob, JobContext, measure_job, status_line
from convlab.run.warmup import shapes_from_environment, shapes_text, warm_up_beside
from convlab.service.cellrequest import job_fields
from convlab.status import ERROR, OOM, UserError

PARENT_POLL_S = 0.2
# `python -m convlab <argv>` for a job in a folder, in the worker's process: the reply to send back
CommandRunner = Callable[[list[str], str], dict[str, Any]]
PICTURES_KEPT = 8
PROBLEMS_KEPT = 4


def _watch_parent(parent: int) -> None:
    """Leave with the service: a worker orphaned mid-cell must not go on holding the GPU."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(3)


def _reply(channel: TextIO, message: dict[str, Any]) -> None:
    channel.write(json.dumps(message) + "\n")
    channel.flush()


def _visible_devices() -> list[dict[str, Any]]:
    # a cuda worker's only: CuPy, and the cuda backend that imports it, are not installed everywhere
    import cupy

    from convlab.backends.cuda import gpu_uuid

    devices = []
    for index in range(cupy.cuda.runtime.getDeviceCount()):
        props = cupy.cuda.runtime.getDeviceProperties(index)
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        devices.append({"index": index, "uuid": gpu_uuid(props), "name": name})
    return devices


def _job_phases(job: dict[str, Any], taken_at: float) -> dict[str, float]:
    """The client's start-up, its connection (with the service's start, if it had to), and the
    wait for this worker (a free GPU), in ms."""
    client = job["request"]["client"]
    started, sent = client.get("started_at", taken_at), client.get("sent_at", taken_at)
    startup = client.get("startup_ms", 0.0)
    return {"startup": startup, "connect": max(0.0, (sent - started) * 1e3 - startup),
            "queue": max(0.0, (taken_at - sent) * 1e3)}



def _open_tools() -> None:
    """The tools worker renders figures, on Agg: the report draws on bare figures in scoped styles,
    so no command leaves plotting state behind for the next."""
    import matplotlib  # a tools worker's only: a device's worker draws nothing

    matplotlib.use("Agg")


def _open_backend(backend_name: str, gpu_index: int) -> Backend:
    backend = get_backend(backend_name)
    backend.open_context()
    if backend_name == "cuda":
        backend.gpu_index = gpu_index
    pictures.PICTURES.capacity = PICTURES_KEPT
    problemcache.PROBLEMS.capacity = PROBLEMS_KEPT
    return backend


def measure_one(job: dict[str, Any], backend: Backend) -> dict[str, Any]:
    """One cell: its row written to the job's pending path, and the reply for the service."""
    taken_at = time.time()
    request = job["request"]
    cell_job = CellJob(**job_fields(request))
    faults: list[str | None] = []

    def settle(status: str) -> None:
        """A sticky device error ends this worker; otherwise free the cell's device memory, and after
        a cell that ran out of it the kept problems' too, so that the next cell has all of it."""
        faults.append(backend.fault() if status == ERROR else None)
        if status == OOM:
            problemcache.PROBLEMS.clear()
        if faults[-1] is None:
            backend.release_memory()

    context = JobContext(_job_phases(job, taken_at), started_at=request["client"].get("started_at", taken_at),
                         service_started=taken_at,
                         extra={"git_commit": job["git_commit"]} if job.get("git_commit") else {},
                         write_to=job["pending"], settle=settle)
    try:
        row = measure_job(cell_job, backend, context)
    except UserError as error:
        return {"ok": False, "error": str(error)}
    except OSError as error:
        # a fault of the machine (results/ made read-only mid-run, a full disk): its one line, with
        # the path and the fix; any other OSError is a bug below
        line = machine_fault(error.errno, error.filename or "") if error.errno else None
        if line is not None:
            return {"ok": False, "error": line.removeprefix("error: ")}
        traceback.print_exc()
        return {"ok": False, "error": f"internal error in the measurement worker: {type(error).__name__}: {error}"}
    except Exception as error:  # a pipeline bug: the traceback goes to the service log
        traceback.print_exc()
        return {"ok": False, "error": f"internal error in the measurement worker: {type(error).__name__}: {error}"}
    path = cell_job.cell.path
    fault = faults[0] if faults else None
    if fault is not None:
        print(f"device unusable after {path}: {fault}; this worker leaves", file=sys.stderr)
    return {"ok": True, "line": status_line(row, path), "status": row["status"],
            "service_ms": row.get("service_ms"), "exit": fault is not None, "fault": fault}


def rest(backend: Backend | None) -> dict[str, Any]:
    """Between runs: let go of what is kept for the next cell (the problems' operands, device inputs
    and references, the decoded pictures, the pooled device memory), keeping the process, its
    context and its compiled modules warm for the next run."""
    problemcache.PROBLEMS.clear()
    pictures.PICTURES.clear()
    if backend is not None:
        backend.release_memory()
    return {"ok": True}


def warm(backend: Backend, name: str) -> None:
    """The worker's first pass through a cell's device work (convlab.run.warmup), after its hello, so
    that the service starts every GPU's worker at once and each warms beside the others. A failure
    here changes nothing: the cells meet it again and report it."""
    shapes = shapes_from_environment()
    print(f"{now_utc()} {name}: warming up on {shapes_text(shapes) or 'no shape'}", file=sys.stderr, flush=True)
    try:
        seconds = warm_up_beside(backend, shapes)
    except Exception:  # the cells that follow say what is wrong in their rows
        traceback.print_exc()
        print(f"{name}: the warm-up failed (above); its cells will report what fails", file=sys.stderr, flush=True)
    else:
        print(f"{name}: warmed up in {seconds:.2f} s", file=sys.stderr, flush=True)


# Commands that may run beside the warm-up: untimed work that holds the device's lock shared (as the
# warm-up does) and no CuPy array work of its own, only its compiler process and module loads.
BESIDE_WARM_UP = frozenset({"compile-kernels"})


def runs_beside_warm_up(job: dict[str, Any]) -> bool:
    argv = job.get("run", {}).get("argv") or [""]
    return argv[0] in BESIDE_WARM_UP


def serve_jobs(backend_name: str, gpu_index: int, jobs: TextIO, replies: TextIO, run_command: CommandRunner) -> int:
    if backend_name != "tools":
        measurement_version(backend_name)  # rows name the code this worker loaded, not a later edit
    backend = None
    try:
        if backend_name == "tools":
            _open_tools()
            info, devices = {"device": "host"}, []
        else:
            backend = _open_backend(backend_name, gpu_index)
            info = backend.device_info()
            devices = _visible_devices() if backend_name == "cuda" else []
    except Exception as error:  # the backend cannot run here: one line for every cell that asks
        _reply(replies, {"ok": False, "error": str(error).splitlines()[0] if str(error) else repr(error)})
        return 2
    _reply(replies, {"ok": True, "pid": os.getpid(), "device": info["device"], "uuid": info.get("gpu_uuid", ""),
                     "devices": devices})
    warming = None
    if backend is not None:
        # on a thread: the run's compile-ahead (its own compiler process on every core) goes on
        # beside the warm-up instead of after it; any other job waits for the warm-up to end
        warming = threading.Thread(target=warm, args=(backend, f"{backend_name} worker {gpu_index}"),
                                   name="warm-up", daemon=True)
        warming.start()
    for line in jobs:
        job = json.loads(line)
        if warming is not None and not runs_beside_warm_up(job):
            warming.join()
            warming = None
        if "rest" in job:
            _reply(replies, rest(backend))
        elif "run" in job:
            _reply(replies, run_command(job["run"]["argv"], job["run"]["cwd"]))
            if backend is not None:
                backend.release_memory()
        elif backend is None:
            _reply(replies, {"ok": False, "error": "the tools worker measures no cells"})
        else:
            reply = measure_one(job, backend)
            _reply(replies, reply)
            if reply.get("exit"):
                return 0
    return 0


def main(argv: list[str] | None, run_command: CommandRunner, prog: str) -> int:
    """A worker's process: its options (``argv``), and what runs the commands its jobs name."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--backend", required=True, choices=["cuda", "cpu", "tools"])
    parser.add_argument("--index", type=int, default=0)
    args = parser.parse_args(argv)
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # stray prints (libraries, warnings) go to the log, not into the protocol
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    return serve_jobs(args.backend, args.index, sys.stdin, replies, run_command)
