"""The service's side of its workers: start one per GPU (or one for the cpu), hand each a cell,
wait with a deadline, and replace a worker that died, hung or hit a sticky device error.
Standard library only: the service itself never touches the GPU.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from convlab.service.handout import FreeWorkers

PACKAGE_PARENT = Path(__file__).resolve().parents[2]  # workflow/, so `-m convlab...` finds this checkout
HELLO_TIMEOUT_S = 300.0  # a cold CUDA context and cuDNN load take seconds, not minutes
# The tools pool's size: the report stage's drawing jobs run side by side on this many workers (the
# default profile limits its `render` resource to it).
TOOLS_WORKERS = min(8, os.cpu_count() or 1)
REST_TIMEOUT_S = 30.0  # dropping kept arrays and freeing pools


class WorkerGone(RuntimeError):
    """The worker exited or was killed while it had a cell; the text says how."""


class WorkerTimeout(RuntimeError):
    """The worker did not answer within the cell's timeout and was killed."""


def _exit_text(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class Worker:
    """One worker process and its two pipes."""

    def __init__(self, backend: str, index: int, env: dict[str, str], log: Path, command: Sequence[str]) -> None:
        self.backend, self.index, self.log = backend, index, log
        environment = dict(env)
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_PARENT), env.get("PYTHONPATH")]))
        with open(log, "ab") as log_handle:
            self.process = subprocess.Popen(
                [*command, "--backend", backend, "--index", str(index)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log_handle, env=environment)
        self._buffer = b""
        self.hello: dict[str, Any] = {}

    def _read_line(self, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        fd = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                self.process.wait()
                raise WorkerGone(f"the measurement worker died ({_exit_text(self.process.returncode)})")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def start(self) -> dict[str, Any]:
        """Wait for the worker's hello: its device, or why the backend cannot run here."""
        try:
            self.hello = self._read_line(HELLO_TIMEOUT_S)
        except TimeoutError:
            self.kill()
            self.hello = {"ok": False, "error": f"the {self.backend} worker did not start within {HELLO_TIMEOUT_S:.0f} s"}
        except WorkerGone as gone:
            self.hello = {"ok": False, "error": f"the {self.backend} worker failed to start ({gone}); "
                          f"see {self.log}"}
        return self.hello

    def run(self, job: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        try:
            self.process.stdin.write((json.dumps(job) + "\n").encode())
            self.process.stdin.flush()
        except (BrokenPipeError, OSError) as error:
            self.process.wait()
            raise WorkerGone(f"the measurement worker died ({_exit_text(self.process.returncode)})") from error
        try:
            return self._read_line(timeout_s)
        except TimeoutError as error:
            self.kill()
            raise WorkerTimeout(f"timeout after {timeout_s:g} s") from error

    def await_exit(self, seconds: float = 30.0) -> None:
        """Wait for a worker that said it is leaving; kill it if it lingers."""
        try:
            self.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            self.kill()

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
        self.process.wait()

    def stop(self) -> None:
        """End of service: close its input so it leaves after the cell in hand, else kill it."""
        try:
            self.process.stdin.close()
            self.process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()


def mixed_models(devices: list[dict[str, Any]]) -> str | None:
    """One line asking the user to choose, when the visible GPUs are not all one model."""
    names = sorted({device["name"] for device in devices})
    if len(names) <= 1:
        return None
    listing = ", ".join(f"{d['index']}: {d['name']}" for d in devices)
    same = ",".join(str(d["index"]) for d in devices if d["name"] == devices[0]["name"])
    return (f"the visible GPUs are of different models ({listing}); results are not keyed by GPU model, so "
            f"measure one model per run: set CUDA_VISIBLE_DEVICES, e.g. CUDA_VISIBLE_DEVICES={same}")


class WorkerPool:
    """The workers of one pool: every visible GPU for cuda, one for the cpu, and up to
    ``tools_limit`` for the other commands (reports, data). A job takes a free worker, preferably
    one that holds its problem (convlab.service.handout); with none free it waits, so each
    device measures one cell at a time."""

    def __init__(self, backend: str, env: dict[str, str], log: Path, command: Sequence[str], tools_limit: int = 1) -> None:
        self.backend, self.env, self.log, self.command = backend, env, log, tuple(command)
        self.limit = tools_limit if backend == "tools" else 0  # 0: as many as there are devices
        self.error: str | None = None
        self.devices: list[dict[str, Any]] = []
        self._free = FreeWorkers()
        self._workers: dict[int, Worker] = {}
        self._starting: set[int] = set()  # tools workers started, not yet ready
        self._started = False
        self._lock = threading.Lock()

    def _environment(self, index: int) -> dict[str, str]:
        env = dict(self.env)
        if self.backend == "cuda" and self.devices:
            env["CUDA_VISIBLE_DEVICES"] = self.devices[index]["uuid"] or str(index)
        return env

    def _spawn(self, index: int) -> Worker | None:
        worker = Worker(self.backend, index, self._environment(index), self.log, self.command)
        hello = worker.start()
        if not hello.get("ok"):
            self.error = hello.get("error") or f"the {self.backend} worker failed to start; see {self.log}"
            worker.kill()
            return None
        self._workers[index] = worker
        return worker

    def ensure_started(self) -> None:
        """Start the workers on first use: the first one tells how many GPUs are visible."""
        with self._lock:
            if self._started:
                return
            self._started = True
            if self.backend == "tools":
                return  # started one at a time as jobs need them (_grow)
            first = self._spawn(0)
            if first is None:
                return
            self.devices = first.hello.get("devices") or []
            self.error = mixed_models(self.devices)
            if self.error:
                first.kill()
                return
            self._free.put(first)
            with ThreadPoolExecutor(max_workers=max(1, len(self.devices) - 1)) as pool:
                for worker in pool.map(self._spawn, range(1, len(self.devices))):
                    if worker is not None:
                        self._free.put(worker)
            if len(self._workers) == max(1, len(self.devices)):
                self.error = None  # a later worker's failure must not hide the ones that run

    def start_for_run(self) -> None:
        """As a run begins: the workers of a device's pool (ensure_started); the tools pool's, every
        one at once, each on a thread of its own (_grow_ahead), so that the report stage after the
        run's cells finds them warm instead of starting them one after another in its own time."""
        self.ensure_started()
        if self.backend == "tools":
            self._grow_ahead()

    def acquire(self, problem: Hashable | None = None) -> Worker | None:
        """A free worker for a job of ``problem`` (convlab.service.handout.problem_of; None: any),
        waiting while all are busy; None once no worker is left (self.error says why)."""
        while True:
            # a worker that is starting (ahead, or for another job) will be free soon
            coming = bool(self._workers or self._starting)
            worker = self._free.get(problem, timeout_s=0.5 if coming else 0.01)
            if worker is not None:
                return worker
            grown = self._grow()
            if grown is not None:
                return grown
            if not self._workers and not self._starting:
                return None

    def _grow(self) -> Worker | None:
        """One more tools worker while all are busy and the limit allows, started outside the lock,
        so that jobs that come at once start theirs side by side. Where one was busy (jobs came at
        once), the rest of the pool starts beside it (_grow_ahead)."""
        with self._lock:
            if self.error or len(self._workers) + len(self._starting) >= self.limit:
                return None
            busy = len(self._workers)
            index = next(i for i in range(self.limit) if i not in self._workers and i not in self._starting)
            self._starting.add(index)
        try:
            grown = self._spawn(index)
        finally:
            with self._lock:
                self._starting.discard(index)
        if grown is not None and busy:
            self._grow_ahead()
        return grown

    def _grow_ahead(self) -> None:
        """Every missing tools worker, started at once, each on a thread of its own, free once it
        says hello. Jobs that find every worker busy come in bursts (the report stage's slices,
        then its figures): a worker started only when a job asks makes that job wait for its start
        and its imports, one worker after another."""
        with self._lock:
            missing = [i for i in range(self.limit) if i not in self._workers and i not in self._starting]
            self._starting.update(missing)
        for index in missing:
            threading.Thread(target=self._start_ahead, args=(index,), name=f"tools-{index}", daemon=True).start()

    def _start_ahead(self, index: int) -> None:
        try:
            worker = self._spawn(index)
        finally:
            with self._lock:
                self._starting.discard(index)
        if worker is not None:
            self._free.put(worker, fresh=True)

    def release(self, worker: Worker, holds_nothing: bool = False) -> None:
        """Back to the pool, or replaced by a fresh worker on the same device if it is gone.
        ``holds_nothing``: it let go of the problems it kept."""
        if not worker.alive():
            self._workers.pop(worker.index, None)
            replacement = self._spawn(worker.index)
            if replacement is None:
                return  # self.error says why; cells that wait for this device are answered with it
            worker, holds_nothing = replacement, True
        self._free.put(worker, fresh=holds_nothing)

    def rest(self) -> int:
        """Each free worker lets go of what it keeps for the next cell and stays warm (a busy one is
        measuring: not at rest anyway): how many did."""
        rested = 0
        for worker in self._free.take_all():
            try:
                rested += bool(worker.run({"rest": True}, REST_TIMEOUT_S).get("ok"))
            except (WorkerGone, WorkerTimeout):
                pass  # release() replaces a worker that is gone
            finally:
                self.release(worker, holds_nothing=True)
        return rested

    def stop(self) -> None:
        for worker in list(self._workers.values()):
            worker.stop()

    def describe(self) -> list[dict[str, Any]]:
        return [{"backend": self.backend, "index": w.index, "pid": w.process.pid, "alive": w.alive(),
                 "device": w.hello.get("device"), "uuid": w.hello.get("uuid")} for w in self._workers.values()]
