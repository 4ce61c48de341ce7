"""The measurement service: a Unix socket in a directory only its user can open, one connection
per cell job, and a pool of workers per backend (convlab.service.pool). Cell jobs whose shell sends
the cell itself come by its door instead (convlab.service.door: a loopback port and a secret).

It refuses peers of another uid (SO_PEERCRED; at the door, any that cannot say the secret) and
malformed requests (one line each, then it serves on), turns a worker that dies or hangs into an
``error`` row, and exits after its idle timeout or when asked to stop. Standard library only, the
package's row writer and cell included (they import the standard library only).
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from convlab.measure.provenance import now_utc, read_git_commit
from convlab.measure.row import failure_row, write_row_atomically
from convlab.measure.rowjournal import keep_unrecorded
from convlab.plan.cell import Cell
from convlab.service.client import process_alive
from convlab.service.door import (
    DoorRefused,
    door_refusal,
    door_reply,
    open_door,
    read_door_request,
    remove_door_file,
)
from convlab.service.handout import problem_of
from convlab.service.identity import Identity, ServicePaths
from convlab.service.pool import TOOLS_WORKERS, WorkerGone, WorkerPool, WorkerTimeout
from convlab.service.protocol import (
    POOLS,
    ProtocolError,
    check_request,
    error_response,
    receive_message,
    send_frame,
    send_message,
    text_reply,
)
from convlab.service.startlock import remove_service_files

REQUEST_READ_TIMEOUT_S = 30.0
COMMAND_TIMEOUT_S = 3600.0
PEER_CREDENTIALS = struct.Struct("3i")  # pid, uid, gid


STALE_AFTER_S = 7 * 24 * 3600


def prune_runtime_dir(folder: Path, keep: str) -> None:
    """Every code edit makes a new identity and leaves the old one's log and lock behind: drop
    those untouched for a week."""
    cutoff = time.time() - STALE_AFTER_S
    for path in folder.glob("*"):
        if path.name.startswith(keep) or path.suffix not in (".log", ".lock", ".json", ".door"):
            continue
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
        except OSError:
            pass


def peer_uid(connection: socket.socket) -> int:
    raw = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, PEER_CREDENTIALS.size)
    return PEER_CREDENTIALS.unpack(raw)[1]


def client_connected(connection: socket.socket) -> bool:
    """False once the peer has closed or reset its end (it sends nothing while it waits)."""
    try:
        connection.setblocking(False)
        return connection.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        connection.setblocking(True)



class MeasurementService:
    def __init__(self, paths: ServicePaths, identity: Identity, idle_timeout_s: float,
                 worker_command: Sequence[str]) -> None:
        self.paths, self.identity, self.idle_timeout_s = paths, identity, idle_timeout_s
        self.pools = {name: WorkerPool(name, dict(os.environ), Path(paths.log), worker_command,
                                       tools_limit=TOOLS_WORKERS)
                      for name in POOLS}
        self._in_flight = 0
        # what went wrong while it served (note_fault): its log then outlives it
        self.faults = 0
        self._last_activity = time.monotonic()
        self._state = threading.Condition()
        self._stopping = threading.Event()
        self._listener: socket.socket | None = None
        self._socket_inode = 0
        # the door for cell jobs that start no Python, and its secret (None: they use the socket)
        self._door: socket.socket | None = None
        self._door_secret, self._door_port = "", 0
        # inside a Slurm job the service lives no longer than the job's task
        self._job_task = int(os.environ["SLURM_TASK_PID"]) if os.environ.get("SLURM_TASK_PID", "").isdigit() else 0

    # -- lifetime -------------------------------------------------------------------------------
    def bind(self) -> None:
        socket_path = Path(self.paths.socket)
        socket_path.unlink(missing_ok=True)  # a dead service's socket; the caller holds the start lock
        prune_runtime_dir(socket_path.parent, keep=self.paths.key)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.paths.socket)
        os.chmod(self.paths.socket, 0o600)
        listener.listen(128)
        listener.settimeout(1.0)
        self._listener = listener
        self._socket_inode = socket_path.stat().st_ino
        try:
            self._door, self._door_secret = open_door(self.paths.socket)
            self._door.settimeout(1.0)
            self._door_port = self._door.getsockname()[1]
        except OSError as error:
            print(f"{now_utc()} no door for cell jobs ({error}): they come by the socket", file=sys.stderr, flush=True)
        Path(self.paths.info).write_text(json.dumps({"pid": os.getpid(), "started_at": now_utc(),
                                               "idle_timeout_s": self.idle_timeout_s,
                                               "identity": self.identity.describe()}, indent=2) + "\n")

    def serve_forever(self) -> None:
        assert self._listener is not None
        print(f"{now_utc()} service {os.getpid()} listening on {self.paths.socket}", file=sys.stderr, flush=True)
        # one thread accepts at both, so that an idle exit never races a connection at the other
        listeners = [listener for listener in (self._listener, self._door) if listener is not None]
        while not self._stopping.is_set():
            ready = select.select(listeners, [], [], 1.0)[0]
            if not ready:
                if self._idle_for() > self.idle_timeout_s:
                    print(f"{now_utc()} idle for {self.idle_timeout_s:g} s: leaving", file=sys.stderr, flush=True)
                    break
                if self._job_task and not process_alive(self._job_task):
                    # where the cluster does not end a job's detached processes itself
                    print(f"{now_utc()} Slurm job {os.environ.get('SLURM_JOB_ID')} ended: leaving",
                          file=sys.stderr, flush=True)
                    break
                continue
            for listener in ready:
                try:
                    connection, _ = listener.accept()
                except (BlockingIOError, TimeoutError):
                    continue
                with self._state:
                    self._in_flight += 1  # counted from accept, so an idle exit never races a new cell
                threading.Thread(target=self._handle, args=(connection, listener is self._door), daemon=True).start()
        self.shutdown()

    def note_fault(self, line: str) -> None:
        """A line of something that went wrong, in the log, which then outlives the service."""
        self.faults += 1
        print(f"{now_utc()} {line}", file=sys.stderr, flush=True)

    def request_stop(self) -> None:
        """Stop accepting cells: the socket goes at once, so the next client starts a new service;
        the accept loop notices within a second and shuts down."""
        self._stopping.set()
        self._retire_socket()

    def _retire_socket(self) -> None:
        """Remove the socket, door file and record, unless a newer service has already put its own there."""
        if self._door_port:
            remove_door_file(self.paths.socket, self._door_port)
        try:
            if os.stat(self.paths.socket).st_ino == self._socket_inode:
                os.unlink(self.paths.socket)
                Path(self.paths.info).unlink(missing_ok=True)
        except FileNotFoundError:
            pass

    def _idle_for(self) -> float:
        with self._state:
            return 0.0 if self._in_flight else time.monotonic() - self._last_activity

    def shutdown(self) -> None:
        """Take the socket away first (new clients start a new service), finish the cells in
        flight, then stop the workers."""
        self._stopping.set()
        self._retire_socket()
        for listener in (self._listener, self._door):
            if listener is not None:
                listener.close()
        with self._state:
            self._state.wait_for(lambda: self._in_flight == 0)
        for pool in self.pools.values():
            pool.stop()

    # -- one connection -------------------------------------------------------------------------
    def _handle(self, connection: socket.socket, at_door: bool) -> None:
        try:
            if at_door:
                self._converse_at_door(connection)
            else:
                self._converse(connection)
        finally:
            with self._state:
                self._in_flight -= 1
                self._last_activity = time.monotonic()
                self._state.notify_all()

    def _converse(self, connection: socket.socket) -> None:
        with connection:
            connection.settimeout(REQUEST_READ_TIMEOUT_S)
            try:
                uid = peer_uid(connection)
                if uid != os.getuid():
                    # its request is read first (and dropped): a peer still sending when the
                    # refusal closes the connection would see a broken pipe, not the refusal
                    try:
                        receive_message(connection)
                    except (ProtocolError, ConnectionError, TimeoutError, OSError):
                        pass
                    send_message(connection, error_response(
                        f"refused: this measurement service belongs to uid {os.getuid()}, not {uid}"))
                    return
                try:
                    request = check_request(receive_message(connection))
                except ProtocolError as error:
                    send_message(connection, error_response(f"refused: {error}"))
                    return
                connection.settimeout(None)  # a cell may take as long as its own timeout allows
                answer = self._answer(request, connection)
                if request.get("reply") == "text":
                    send_frame(connection, text_reply(answer))
                else:
                    send_message(connection, answer)
            except (ConnectionError, TimeoutError, OSError):
                return  # the client went away; a cell it asked for still wrote its row

    def _converse_at_door(self, connection: socket.socket) -> None:
        """A cell from a job's shell (convlab.service.door): its secret, then its request, each a
        line; the answer is two lines. A request not taken is refused in a line, and the job sends
        it by its Python client, which says what is wrong with it."""
        with connection:
            connection.settimeout(REQUEST_READ_TIMEOUT_S)
            try:
                try:
                    message = json.loads(read_door_request(connection, self._door_secret))
                    if not isinstance(message, dict) or message.get("op") != "cell":
                        raise ProtocolError("the door takes cells only")
                    request = check_request(message)
                except (DoorRefused, ProtocolError, ValueError) as refused:
                    connection.sendall(door_refusal(str(refused)))
                    return
                connection.settimeout(None)  # a cell may take as long as its own timeout allows
                connection.sendall(door_reply(self._measure(request, connection)))
            except (ConnectionError, TimeoutError, OSError):
                return  # the job went away; a cell it asked for still wrote its row

    def _answer(self, request: dict[str, Any], connection: socket.socket) -> dict[str, Any]:
        op = request["op"]
        if op == "ping":
            return {"ok": True, "pid": os.getpid(), "identity": self.identity.describe(),
                    "workers": [w for pool in self.pools.values() for w in pool.describe()]}
        if op == "start":
            pool = self.pools[request["pool"]]
            print(f"{now_utc()} a run begins: its {request['pool']} workers start", file=sys.stderr, flush=True)
            threading.Thread(target=pool.start_for_run, name=f"start-{request['pool']}", daemon=True).start()
            return {"ok": True, "pid": os.getpid()}
        if op == "rest":
            rested = sum(self.pools[name].rest() for name in ("cuda", "cpu"))
            return {"ok": True, "pid": os.getpid(), "rested": rested}
        if op == "stop":
            self.request_stop()
            return {"ok": True, "pid": os.getpid()}
        if op == "run":
            return self._run_command(request)
        return self._measure(request, connection)

    def _run_command(self, request: dict[str, Any]) -> dict[str, Any]:
        """Any other command a rule runs, in a warm worker: its exit code and output come back."""
        pool = self.pools[request["pool"]]
        pool.ensure_started()
        worker = pool.acquire()
        if worker is None:
            return error_response(pool.error or f"no {request['pool']} worker could be started; see {self.paths.log}")
        try:
            return worker.run({"run": {"argv": request["argv"], "cwd": request["cwd"]}},
                              float(request.get("timeout_s") or COMMAND_TIMEOUT_S))
        except (WorkerGone, WorkerTimeout) as failure:
            return {"ok": True, "exit_code": 1, "stdout": "",
                    "stderr": f"error: python -m convlab {' '.join(request['argv'])}: {failure}; log: {self.paths.log}\n"}
        finally:
            pool.release(worker)

    def _measure(self, request: dict[str, Any], connection: socket.socket) -> dict[str, Any]:
        """Measure the cell in a free worker. The row is written beside its place and moved there
        only while the job that asked is still connected: a job killed meanwhile (Ctrl-C, a
        cluster's time limit) leaves no row, and Snakemake re-runs it."""
        try:
            spec = json.loads(request["spec"])
            backend = spec["backend"]
            pool = self.pools[backend]
        except (json.JSONDecodeError, TypeError, KeyError):
            return error_response("refused: spec is not a cell's JSON with a backend of cuda or cpu")
        pool.ensure_started()
        out = Path(request["out"])
        pending = out.parent / f".{out.name}.{os.getpid()}.{threading.get_ident()}.pending"
        # the run's commit, else read per cell: a long-lived service outlives commits and kernel edits
        commit = request.get("git_commit") or read_git_commit()
        job = {"request": request, "git_commit": commit, "pending": str(pending)}
        # A worker that dies mid-cell is replaced (pool.release); the cell goes once more to a worker,
        # so a worker killed from outside loses no cell, while one the cell kills twice is its error row.
        problem = problem_of(spec)
        for attempt in (1, 2):
            worker = pool.acquire(problem)
            if worker is None:
                self.faults += 1
                return error_response(pool.error or f"no {backend} worker could be started; see {self.paths.log}")
            handed, started_at = time.time(), now_utc()
            try:
                reply = worker.run(job, float(request.get("timeout_s") or 300))
                if reply.get("exit"):
                    worker.await_exit()  # it leaves after a sticky device error: never hand it another cell
            except WorkerGone as failure:
                if attempt == 1:
                    self.note_fault(f"{failure} during a cell; sending it to a fresh worker")
                    continue
                reply = self._failure_row(request, spec, job, worker, f"{failure}, twice", handed, started_at)
            except WorkerTimeout as failure:
                reply = self._failure_row(request, spec, job, worker, str(failure), handed, started_at)
            finally:
                pool.release(worker)
            break
        if pending.exists():
            if client_connected(connection):
                os.replace(pending, out)
                keep_unrecorded(out, request.get("run_id"))
            else:
                pending.unlink()
                self.note_fault(f"{out}: the job that asked for it is gone; its row is discarded")
        return reply

    def _failure_row(self, request: dict[str, Any], spec: dict[str, Any], job: dict[str, Any], worker,
                     reason: str, handed: float, started_at: str) -> dict[str, Any]:
        """The row of a cell whose worker died or hung: written here, since the worker cannot."""
        client = request["client"]
        finished = time.time()
        row = failure_row(spec, "error", reason, git_commit=job["git_commit"], device=worker.hello.get("device"),
                          gpu_index=worker.index if worker.backend == "cuda" else None,
                          gpu_uuid=worker.hello.get("uuid") or None, host=self.identity.host,
                          started_at=started_at, finished_at=now_utc(), service_ms=(finished - handed) * 1e3,
                          job_ms=(finished - client.get("started_at", finished)) * 1e3)
        write_row_atomically(row, job["pending"])
        line = f"{Cell.from_json(request['spec']).path}: error {reason}"
        self.note_fault(line)
        return {"ok": True, "line": line, "status": "error", "exit": True}


def serve(paths: ServicePaths, identity: Identity, idle_timeout_s: float, worker_command: Sequence[str],
          release: IO | None = None) -> int:
    """Bind, then serve until idle or stopped. ``worker_command``: what starts a worker (its
    --backend and --index appended). ``release``: the start lock held while binding, let go once
    the socket answers."""
    service = MeasurementService(paths, identity, idle_timeout_s, worker_command)
    service.bind()
    if release is not None:
        fcntl.flock(release, fcntl.LOCK_UN)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: service.request_stop())
    service.serve_forever()
    # its log stays where something went wrong (a worker lost, a cell's error row): what to read then
    others = [paths.info] if service.faults else [paths.info, paths.log]
    remove_service_files(paths.socket, paths.start_lock, others)
    return 0
