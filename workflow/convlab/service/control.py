"""`python -m convlab serve`: run the service in the foreground, or ask the running one for its
status or to stop."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from contextlib import nullcontext

from convlab.console import Console
from convlab.service.client import ask, process_alive, service_paths
from convlab.service.identity import RuntimeDirError, ServicePaths, current_identity, runtime_dir
from convlab.service.protocol import ProtocolError
from convlab.service.server import serve
from convlab.service.startlock import start_lock

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
    with nullcontext() if spawned else start_lock(paths.start_lock) as lock:
        try:
            running = ask(paths, {"op": "ping"}, timeout_s=10, start=False)
            console.warn(f"error: a measurement service for this checkout is already running (pid {running.get('pid')}); "
                         "stop it with: python -m convlab serve --stop")
            return 1
        except (ConnectionError, OSError, ProtocolError):
            pass
        service = serve(paths, identity, idle_timeout_s, worker_command, release=lock)
    return service


def checkout_services() -> list[tuple[ServicePaths, dict]]:
    """The live services of this checkout, whatever environment started them (a run's jobs carry
    variables and an interpreter the user's shell may not: another identity, so another socket),
    this environment's own first: each found by the identity its info file names, and asked."""
    own = current_identity()
    directory = runtime_dir()
    keys = [own.key] + sorted(name[: -len(".json")] for name in os.listdir(directory)
                             if name.endswith(".json") and name[: -len(".json")] != own.key)
    found = []
    for key in keys:
        paths = ServicePaths.for_key(directory, key)
        try:
            with open(paths.info) as handle:
                repo = json.load(handle).get("identity", {}).get("repo")
        except (OSError, ValueError, AttributeError):
            continue
        if repo != own.repo:
            continue
        try:
            found.append((paths, ask(paths, {"op": "ping"}, timeout_s=10, start=False)))
        except (ConnectionError, OSError, ProtocolError):
            continue
    return found


def status(console: Console) -> int:
    """Each live service of this checkout, as it answers a ping."""
    try:
        found = checkout_services()
    except RuntimeDirError as error:
        console.say(f"no measurement service is running for this checkout ({error})")
        return 1
    if not found:
        console.say("no measurement service is running for this checkout")
        return 1
    for _, answer in found:
        console.say(json.dumps(answer, indent=2))
    return 0


def stop(console: Console, quiet: bool = False) -> int:
    """Ask every live service of this checkout to stop (a run's too); quietly (a clean-up) says
    nothing when none runs."""
    try:
        found = checkout_services()
    except RuntimeDirError as error:
        if not quiet:
            console.say(f"error: {error}")
        return 0 if quiet else 1
    if not found and not quiet:
        console.say("no measurement service is running for this checkout")
    for paths, _ in found:
        try:
            answer = ask(paths, {"op": "stop"}, timeout_s=10, start=False)
        except (ConnectionError, OSError, ProtocolError):
            continue  # it ended meanwhile
        pid = int(answer.get("pid", 0))
        deadline = time.monotonic() + STOP_WAIT_S
        while pid and process_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        state = "still finishing its cells" if pid and process_alive(pid) else "stopped"
        console.say(f"measurement service {pid} {state}")
    return 0

