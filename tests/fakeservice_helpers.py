"""A fake measurement service on a job's socket, and the jobs that talk to it: what the thin
entry's tests (cell jobs, tools jobs) share."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path

from service_helpers import ServiceSandbox

from convlab.service.protocol import receive_message, send_frame, send_message, text_reply
from convlab.service.runsocket import HOLDS_FOR_ENV, SOCKET_ENV

REPO = Path(__file__).resolve().parents[1]


class FakeService:
    """A socket where the job looks for its service. It keeps the requests it gets and answers each
    with ``reply``; without one it hangs up, as a service that dies mid-cell does, or with
    ``silent`` keeps the job waiting, as a hung one does."""

    def __init__(self, path: Path, reply: dict | None = None, silent: bool = False) -> None:
        self.requests: list[dict] = []
        self.path = path
        self.reply, self.silent, self.held = reply, silent, []
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            request = receive_message(connection)
            self.requests.append(request)
            if self.silent:
                self.held.append(connection)
                continue
            self.answer(connection, request)

    def answer(self, connection: socket.socket, request: dict) -> None:
        if self.reply is not None and request.get("reply") == "text":
            send_frame(connection, text_reply(self.reply))
        elif self.reply is not None:
            send_message(connection, self.reply)
        connection.close()

    def close(self) -> None:
        for connection in [self.listener, *self.held]:
            connection.close()
        self.path.unlink(missing_ok=True)


def fake_service(sandbox: ServiceSandbox, reply: dict | None = None, silent: bool = False) -> FakeService:
    """A fake service where a job with the sandbox's environment looks for its own."""
    found = subprocess.run([sys.executable, "-S", "-c", "from convlab.service.client import service_paths; "
                            "print(service_paths().socket)"], env=sandbox.env, capture_output=True, text=True,
                           timeout=60, check=True)
    return FakeService(Path(found.stdout.strip()), reply, silent)


def named_by_the_run(sandbox: ServiceSandbox, service: FakeService) -> dict[str, str]:
    """The environment a run hands its jobs when it names their service (the fake one)."""
    facts = subprocess.run([sys.executable, "-S", "-c", "import sys; from convlab.service.runsocket import "
                            "facts; sys.stdout.write(facts(sys.executable))"], env=sandbox.env, capture_output=True,
                           text=True, timeout=60, check=True).stdout
    return {SOCKET_ENV: str(service.path), HOLDS_FOR_ENV: facts}


def job(sandbox: ServiceSandbox, argv: list[str], *python: str, **env: str) -> subprocess.CompletedProcess:
    """`python -S <python> ARGV` as the cell rule runs it (``python``: `-m convlab` by default)."""
    return subprocess.run([sys.executable, "-S", *(python or ("-m", "convlab")), *argv], env={**sandbox.env, **env},
                          cwd=REPO, capture_output=True, text=True, timeout=120)


def imported(stderr: str) -> set[str]:
    """The modules `-X importtime` says were imported."""
    return {line.split("|")[2].strip() for line in stderr.splitlines()
            if line.startswith("import time:") and "imported package" not in line}
