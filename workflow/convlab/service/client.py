"""The cell job as a thin client of the measurement service (standard library only: no NumPy, no CuPy).

Connect to this identity's service, starting it (detached, under a lock) if none answers; send
the cell; wait; print the status line the service returns. The service writes the row.

If the service dies during the cell, the cell is sent once more to a fresh service; if that one
dies too, or the service stops answering past the cell's timeout, this process writes the
``error`` row itself, so a run never hangs and never loses a row.

A cell job imports this module where the run's socket did not take its cell (convlab.app.cellentry's
send_cell picks the route): what only a rare path needs (starting the service, writing a failure row) is
imported on that path, and typing by type checkers only.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time

from convlab.console import Console
from convlab.service import cellrequest
from convlab.service.identity import (
    Identity,
    RuntimeDirError,
    ServicePaths,
    code_fingerprint,
    current_identity,
    runtime_dir,
)
from convlab.service.jobenv import RUN_ID_ENV, env_seconds
from convlab.service.protocol import ProtocolError, receive_message, send_message
from convlab.service.runsocket import RUN_CODE_ENV, SOCKET_ENV, hand_to_jobs
from convlab.service.startlock import start_lock

TYPE_CHECKING = False  # typing's flag, without importing typing
if TYPE_CHECKING:
    import subprocess
    from typing import Any

DEFAULT_IDLE_TIMEOUT_S = 60.0
START_TIMEOUT_S = 60.0
# workflow/, so that the service it starts runs this checkout's package (convlab/service/client.py)
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


class ServiceUnavailable(RuntimeError):
    """No service could be started or reached; the text says why and where its log is."""


def export_service_settings(cell_timeout_s: float, idle_timeout_s: float) -> None:
    """Hand the config's timeouts, the code's hash and the service's socket to the jobs this process
    starts (Snakemake's jobs inherit its environment, on a cluster node too, where the workflow is
    read again and names the node's own)."""
    os.environ["CONVLAB_CELL_TIMEOUT_S"] = f"{cell_timeout_s:g}"
    os.environ["CONVLAB_SERVICE_IDLE_S"] = f"{idle_timeout_s:g}"
    os.environ[RUN_CODE_ENV] = code_fingerprint()
    # here, not at the top: only the run calls this, and every cell job that falls back to this
    # module would pay for shutil's imports
    import shutil

    # the interpreter a job's `python` is: the identity names it
    python = shutil.which("python") or sys.executable
    try:
        hand_to_jobs(ServicePaths.for_key(runtime_dir(), current_identity(python).key).socket, python)
    except RuntimeDirError:
        pass  # each job says so itself, with its one error line


def start_service(pool: str, *more: str) -> None:
    """As a run that will measure begins: the service its jobs will ask, started now with the
    workers of ``pool`` (then of each pool of ``more``), which warm up beside Snakemake's first jobs
    (data, compile-ahead) instead of in the first cell's time. On a thread: the run does not wait;
    a failure here is met again, and said, by the jobs."""
    path = os.environ.get(SOCKET_ENV)
    if not path:
        return
    paths = ServicePaths.for_key(os.path.dirname(path), os.path.basename(path)[: -len(".sock")])

    def ask_to_start() -> None:
        for name in (pool, *more):
            try:
                ask(paths, {"op": "start", "pool": name}, timeout_s=START_TIMEOUT_S)
            except (OSError, ProtocolError, ServiceUnavailable):
                return

    # here, not at the top: only the run calls this, never a cell job
    import threading

    threading.Thread(target=ask_to_start, name="start-service", daemon=True).start()


def end_of_run(failed: bool) -> None:
    """At the end of a run, the service it named for its jobs rests: it lets go of what it keeps for
    the next cell and stays warm for the next run until it idles out. After a failed run it stops
    instead (its cells in flight finish first; nothing waits for it here)."""
    path = os.environ.get(SOCKET_ENV)
    if not path:
        return
    paths = ServicePaths.for_key(os.path.dirname(path), os.path.basename(path)[: -len(".sock")])
    try:
        ask(paths, {"op": "stop" if failed else "rest"}, timeout_s=60, start=False)
    except (OSError, ProtocolError):
        pass  # none runs there (the run measured nothing), or it is gone already


def service_paths(identity: Identity | None = None) -> ServicePaths:
    identity = identity or current_identity()
    return ServicePaths.for_key(runtime_dir(), identity.key)


def _connect(paths: ServicePaths) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(paths.socket)
        return sock
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        return None


def read_text(path: str) -> str:
    with open(path, errors="replace") as handle:
        return handle.read()


def _log_tail(path: str, lines: int = 3) -> str:
    try:
        return " | ".join(read_text(path).strip().splitlines()[-lines:])
    except OSError:
        return ""


def _spawn_service(paths: ServicePaths) -> subprocess.Popen:
    """`python -m convlab serve` in its own session, detached from this job's terminal and pipes."""
    # here, not at the top: only the job that finds no service starts one
    import subprocess

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT, env.get("PYTHONPATH")]))
    idle = env_seconds("CONVLAB_SERVICE_IDLE_S", DEFAULT_IDLE_TIMEOUT_S)
    with open(paths.log, "ab") as log:
        # the socket's name travels with it: the service must answer where this client looks
        return subprocess.Popen([sys.executable, "-m", "convlab", "serve", "--spawned", paths.key,
                                 "--idle-timeout", f"{idle:g}"],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                                start_new_session=True, close_fds=True)


def connect_or_start(paths: ServicePaths) -> socket.socket:
    """A connection to the service, starting one if none answers. The start lock makes
    concurrent first clients start exactly one service."""
    sock = _connect(paths)
    if sock is not None:
        return sock
    with start_lock(paths.start_lock):
        sock = _connect(paths)  # another client may have started it while this one waited
        if sock is not None:
            return sock
        process = _spawn_service(paths)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            sock = _connect(paths) if os.path.exists(paths.socket) else None
            if sock is not None:
                return sock
            if process.poll() is not None:
                raise ServiceUnavailable(f"the measurement service exited at start ({_log_tail(paths.log)}); "
                                         f"log: {paths.log}")
            time.sleep(0.01)
        process.kill()
        raise ServiceUnavailable(f"the measurement service did not start within {START_TIMEOUT_S:g} s; "
                                 f"log: {paths.log}")


def ask(paths: ServicePaths, request: dict[str, Any], timeout_s: float | None, start: bool = True) -> dict[str, Any]:
    """One request and its response. ConnectionError if the service goes away before answering,
    TimeoutError if it does not answer in time."""
    sock = connect_or_start(paths) if start else _connect(paths)
    if sock is None:
        raise ConnectionError("no measurement service is running")
    with sock:
        sock.settimeout(timeout_s)
        send_message(sock, request)
        return receive_message(sock)


def _kill_unanswering_service(paths: ServicePaths) -> None:
    try:
        pid = int(json.loads(read_text(paths.info))["pid"])
        os.kill(pid, 9)
    except (OSError, ValueError, KeyError, json.JSONDecodeError):
        pass


def process_alive(pid: int) -> bool:
    """True while any thread of ``pid`` runs. A zombie whose threads are all gone has closed its
    sockets; a zombie leader whose other threads are still exiting may not have."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X") or len(os.listdir(f"/proc/{pid}/task")) > 1
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
            return True
        except OSError:
            return False


def _await_service_exit(paths: ServicePaths, seconds: float = 10.0) -> None:
    """After a service broke off mid-cell: wait until its process is gone, so that the retry
    starts a fresh one instead of reaching the dying one's socket."""
    try:
        pid = int(json.loads(read_text(paths.info))["pid"])
    except (OSError, ValueError, KeyError, json.JSONDecodeError):
        return
    deadline = time.monotonic() + seconds
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)


def _write_own_row(request: dict[str, Any], reason: str) -> str:
    # here, not at the top: a failure path (the service died twice, or did not answer), kept out of the
    # start of every cell job
    from convlab.measure.row import failure_row, write_row_atomically
    from convlab.measure.rowjournal import keep_unrecorded

    out, started_at = request[cellrequest.OUT], cellrequest.job_start_of(request)[1]
    row = failure_row(json.loads(request[cellrequest.SPEC]), "error", reason, job_ms=(time.time() - started_at) * 1e3)
    write_row_atomically(row, out)
    keep_unrecorded(out, os.environ.get(RUN_ID_ENV))
    return f"{out}: error {reason}"


def measure_through_service(request: dict[str, Any], console: Console, failed: OSError | None = None) -> int:
    """The retrying client's route for a cell ``request`` (convlab.app.cellentry.send_cell): one
    status line on stdout and exit 0 once the row is written; one error line on stderr and exit 2
    when the cell could not be asked for (bad spec, no runtime folder). ``failed``: what its first
    sending met, where the run's socket took it first."""
    try:
        json.loads(request[cellrequest.SPEC])
        paths = service_paths()
    except json.JSONDecodeError as error:
        console.warn(f"error: --spec is not JSON: {error}")
        return 2
    except RuntimeDirError as error:
        console.warn(f"error: {error}")
        return 2
    for attempt in (1, 2):
        try:
            if attempt == 1 and failed is not None:
                raise failed
            response = ask(paths, cellrequest.message(request), cellrequest.answer_timeout_s(request))
        except ServiceUnavailable as error:
            console.warn(f"error: {error}")
            return 2
        except TimeoutError:
            _kill_unanswering_service(paths)
            console.say(_write_own_row(request, f"timeout after {request[cellrequest.TIMEOUT_S]:g} s (the "
                                       "measurement service did not answer and was killed)"))
            return 0
        except (ConnectionError, ProtocolError) as error:
            if attempt == 1:
                console.warn(f"the measurement service went away during this cell ({error}); sending it to a fresh one")
                _await_service_exit(paths)
                continue
            console.say(_write_own_row(request, f"the measurement service died during this cell twice ({error}); "
                                       f"log: {paths.log}"))
            return 0
        if not response.get("ok"):
            console.warn(f"error: {response.get('error')}")
            return 2
        console.say(response["line"])
        return 0
    return 2  # not reached: the second attempt returns


def run_through_service(argv: list[str], pool: str, console: Console) -> int:
    """`python -m convlab <argv>` run by a warm worker of ``pool``, for this directory: its output
    relayed here, its exit code returned. If the service cannot be reached, one error line and exit 2."""
    try:
        paths = service_paths()
    except RuntimeDirError as error:
        console.warn(f"error: {error}")
        return 2
    request = {"op": "run", "argv": argv, "cwd": os.getcwd(), "pool": pool}
    for attempt in (1, 2):
        try:
            response = ask(paths, request, timeout_s=None)
            break
        except ServiceUnavailable as error:
            console.warn(f"error: {error}")
            return 2
        except (ConnectionError, ProtocolError) as error:
            if attempt == 2:
                console.warn(f"error: the measurement service died twice during this command ({error}); "
                             f"log: {paths.log}")
                return 2
            _await_service_exit(paths)
    if not response.get("ok"):
        console.warn(f"error: {response.get('error')}")
        return 2
    console.relay(response.get("stdout", ""), response.get("stderr", ""))
    return int(response.get("exit_code", 1))
