"""`python -m convlab serve`: run the service in the foreground, or ask the running one for its
status or to stop."""

from __future__ import annotations

import fcntl
import json
import time
from collections.abc import Sequence
from contextlib import nullcontext

from convlab.console import Console
from convlab.service.client import ask, process_alive, service_paths
from convlab.service.identity import RuntimeDirError, ServicePaths, current_identity, runtime_dir
from convlab.service.protocol import ProtocolError
from convlab.service.server import serve

STOP_WAIT_S = 60.0  # cells in flight finish first


def run(console: Console, idle_timeout_s: float, worker_command: Sequence[str], spawned: str | None = None) -> int:
    """Serve until idle or stopped. A cell job that starts the service already holds the start
    lock and names the socket (``spawned``); by hand the lock is taken here, so that a cell job
    cannot start a second service meanwhile."""
    identity = current_identity()
    try:
        paths = ServicePaths.for_key(runtime_dir(), spawned) if spawned else service_paths(identity)
    except RuntimeDirError as error:
        console.warn(f"error: {error}")
        return 2
    with nullcontext() if spawned else open(paths.start_lock, "a") as lock:
        if lock is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            running = ask(paths, {"op": "ping"}, timeout_s=10, start=False)
            console.warn(f"error: a measurement service for this checkout is already running (pid {running.get('pid')}); "
                         "stop it with: python -m convlab serve --stop")
            return 1
        except (ConnectionError, OSError, ProtocolError):
            pass
        service = serve(paths, identity, idle_timeout_s, worker_command, release=lock)
    return service


def status(console: Console) -> int:
    try:
        answer = ask(service_paths(), {"op": "ping"}, timeout_s=10, start=False)
    except (ConnectionError, OSError, ProtocolError, RuntimeDirError) as error:
        console.say(f"no measurement service is running for this checkout and environment ({error})")
        return 1
    console.say(json.dumps(answer, indent=2))
    return 0


def stop(console: Console, quiet: bool = False) -> int:
    """Ask the running service to stop; quietly (a clean-up) says nothing when none runs."""
    try:
        answer = ask(service_paths(), {"op": "stop"}, timeout_s=10, start=False)
    except RuntimeDirError as error:
        if not quiet:
            console.say(f"error: {error}")
        return 0 if quiet else 1
    except (ConnectionError, OSError, ProtocolError):
        if not quiet:
            console.say("no measurement service is running for this checkout and environment")
        return 0
    pid = int(answer.get("pid", 0))
    deadline = time.monotonic() + STOP_WAIT_S
    while pid and process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    state = "still finishing its cells" if pid and process_alive(pid) else "stopped"
    console.say(f"measurement service {pid} {state}")
    return 0

