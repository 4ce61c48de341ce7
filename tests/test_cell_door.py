"""A cell job that starts no Python: its shell reads the cell client (convlab/service/cellclient.sh)
and sends the cell to the door of the service the run named (convlab.service.door). It sends what
the Python client would, hands every other case to the Python client, and the door lets in only
those who know its secret."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from service_helpers import REPO, ServiceSandbox, read_row

from convlab.service import cellrequest, jobenv
from convlab.service.door import CELL_CLIENT, door_path
from convlab.service.protocol import check_request
from convlab.service.runsocket import HOLDS_FOR_ENV, RUN_CODE_ENV, SOCKET_ENV
from convlab.snakefile.jobenvironment import JOB_START_SCRIPT
from convlab.snakefile.runplan import job_commands

# a job's shell as Snakemake starts it
SHELL_PREFIX = "set -euo pipefail; "
PYTHON_SHIM = """#!/bin/sh
echo started >> "$(dirname "$0")/started"
exec {python} "$@"
"""


class FakeDoor:
    """A door file and a loopback port that keeps what it is sent and answers ``answer`` (None:
    it closes without a word, as a service that dies mid-cell does)."""

    def __init__(self, socket_path: Path, answer: bytes | None, secret: str = "the-secret") -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.answer, self.received = answer, []
        Path(door_path(str(socket_path))).write_text(f"{self.listener.getsockname()[1]} {secret}\n")
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            with connection:
                data = b""
                while data.count(b"\n") < 2:
                    chunk = connection.recv(1 << 16)
                    if not chunk:
                        break
                    data += chunk
                self.received.append(data)
                if self.answer is not None:
                    connection.sendall(self.answer)

    def requests(self) -> list[dict]:
        return [json.loads(data.split(b"\n")[1]) for data in self.received]

    def close(self) -> None:
        self.listener.close()


class JobShell:
    """Cell jobs' shells with the environment a run hands them, a `python` on their PATH that
    notes each start, and the run's service named for them."""

    def __init__(self, sandbox: ServiceSandbox, root: Path) -> None:
        self.sandbox = sandbox
        shims = root / "shims"
        shims.mkdir()
        self.python = shims / "python"
        self.python.write_text(PYTHON_SHIM.format(python=sys.executable))
        self.python.chmod(0o755)
        self.started = shims / "started"
        self.env = {**sandbox.env, "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}", RUN_CODE_ENV: "the-runs-hash",
                    "BASH_ENV": str(JOB_START_SCRIPT), "CONVLAB_RUN_ID": "run-1", "CONVLAB_RUN_COMMIT": "c0ffee"}
        self.env.pop("CONVLAB_USER_BASH_ENV", None)
        found = self.python_here("from convlab.service.client import service_paths; print(service_paths().socket)")
        self.socket = Path(found.strip())
        # the run names the `python` its jobs' PATH finds: here the shim, which starts the real one
        facts = self.python_here("import sys; from convlab.service.runsocket import facts; "
                                 f"sys.stdout.write(facts({str(self.python)!r}))")
        self.env.update({SOCKET_ENV: str(self.socket), HOLDS_FOR_ENV: facts})

    def python_here(self, code: str) -> str:
        """What ``code`` prints in the jobs' `python`, with their environment (the shim's start not noted)."""
        result = subprocess.run([str(self.python), "-S", "-c", code], env=self.env, capture_output=True,
                                text=True, timeout=60, check=True)
        self.started.unlink(missing_ok=True)
        return result.stdout

    def run(self, words: list[str], **env: str) -> subprocess.CompletedProcess:
        """The cell rule's command with ``words`` after the client, as a job's shell runs it."""
        client = job_commands(REPO, REPO)[1]
        line = f"{client} {' '.join(map(quote, words))}"
        return subprocess.run(["bash", "-c", SHELL_PREFIX + line], env={**self.env, **env}, cwd=REPO,
                              capture_output=True, text=True, timeout=120)

    def pythons_started(self) -> int:
        return len(self.started.read_text().splitlines()) if self.started.exists() else 0


def quote(word: str) -> str:
    return "'" + word.replace("'", "'\\''") + "'"


@pytest.fixture
def shell(sandbox, tmp_path) -> JobShell:
    return JobShell(sandbox, tmp_path)


def cell_line(sandbox: ServiceSandbox, out: Path) -> list[str]:
    """A cell line as the cell rule writes it (its paths relative to the job's directory; the
    sandbox's are not below it)."""
    return ["cell", "--spec", sandbox.cell("direct").to_json(), "--image", str(sandbox.image),
            "--bandwidth", "results/device/cpu_copy_bandwidth.json", "--out", str(out)]


def built_by_python(shell: JobShell, words: list[str]) -> dict:
    """The request the Python client builds for the same line in the same environment."""
    options = dict(zip((flag[2:] for flag in words[1::2]), words[2::2]))
    code = ("import json, os, sys; from convlab.service import cellrequest; "
            f"os.chdir({str(REPO)!r}); print(json.dumps(cellrequest.build(json.loads(sys.argv[1]))))")
    result = subprocess.run([sys.executable, "-S", "-c", code, json.dumps(options)], env=shell.env,
                            capture_output=True, text=True, timeout=60, check=True)
    return json.loads(result.stdout)


def test_the_rule_reads_the_client_where_the_package_is():
    client = job_commands(REPO, REPO)[1]
    assert client == f". workflow/{CELL_CLIENT}"
    assert (REPO / "workflow" / CELL_CLIENT).is_file()


def test_the_shell_sends_the_request_the_python_client_builds_and_says_the_doors_line(shell, sandbox, tmp_path):
    door = FakeDoor(shell.socket, b"ok\nrow.csv: ok 1.0 ms\n")
    odd = tmp_path / "a row 'quoted\" back\\slash \u00e9.csv"
    for out in (tmp_path / "row.csv", odd):
        words = cell_line(sandbox, out)
        result = shell.run(words)
        assert (result.returncode, result.stdout, result.stderr) == (0, "row.csv: ok 1.0 ms\n", "")
        sent = check_request(door.requests()[-1])
        assert door.received[-1].split(b"\n")[0] == b"the-secret"
        by_python = built_by_python(shell, words)
        assert {k: v for k, v in sent.items() if k != "client"} == {k: v for k, v in by_python.items() if k != "client"}
        assert set(sent["client"]) == set(cellrequest.CLIENT_FIELDS)
        assert 0 < sent["client"]["startup_ms"] < 5000
        assert sent["client"]["started_at"] <= sent["client"]["sent_at"]
    door.close()
    assert shell.pythons_started() == 0


def test_the_doors_error_is_the_jobs_one_error_line(shell, sandbox, tmp_path):
    door = FakeDoor(shell.socket, b"error\nrefused: no such kernel\n")
    result = shell.run(cell_line(sandbox, tmp_path / "row.csv"))
    door.close()
    assert (result.returncode, result.stdout, result.stderr) == (2, "", "error: refused: no such kernel\n")
    assert shell.pythons_started() == 0


def test_a_cell_through_the_door_of_the_real_service_is_measured_and_its_row_written(shell, sandbox, tmp_path):
    first = shell.run(cell_line(sandbox, tmp_path / "first.csv"))  # no door yet: Python starts the service
    assert first.returncode == 0, first.stderr
    assert shell.pythons_started() == 1
    assert stat.S_IMODE(os.stat(door_path(str(shell.socket))).st_mode) == 0o600
    result = shell.run(cell_line(sandbox, tmp_path / "second.csv"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"{sandbox.cell('direct').path}: ok ")
    assert shell.pythons_started() == 1
    row = read_row(tmp_path / "second.csv")
    assert (row["status"], row["git_commit"]) == ("ok", "c0ffee")
    phases = dict(part.split("=") for part in row["phase_ms"].split(";"))
    assert 0 < float(phases["startup"]) < 1000


@pytest.mark.parametrize("change", ["another job's facts", "service off", "no stamp", "unusual line"])
def test_every_other_case_goes_to_the_python_client(shell, sandbox, tmp_path, change):
    door = FakeDoor(shell.socket, b"ok\nfrom the door\n")
    words, env = cell_line(sandbox, tmp_path / "row.csv"), {}
    if change == "another job's facts":
        env["CUDA_VISIBLE_DEVICES"] = "7"
    elif change == "service off":
        env["CONVLAB_SERVICE"] = "off"
    elif change == "no stamp":
        env["BASH_ENV"] = ""
    else:
        words[2] = "[1]"  # a spec that is no cell's: the Python client's one error line
    result = shell.run(words, **env)
    door.close()
    assert door.received == []
    assert shell.pythons_started() >= 1
    if change == "unusual line":
        assert (result.returncode, result.stdout) == (2, "")
        assert result.stderr.startswith("error: refused: spec is not a cell's JSON")
    else:
        assert result.returncode == 0, result.stderr
        assert read_row(tmp_path / "row.csv")["status"] == "ok"


def test_a_door_that_refuses_leaves_the_cell_to_the_python_client(shell, sandbox, tmp_path):
    door = FakeDoor(shell.socket, b"refused\nnot this service's secret\n")
    result = shell.run(cell_line(sandbox, tmp_path / "row.csv"))
    door.close()
    assert len(door.received) == 1
    assert result.returncode == 0, result.stderr
    assert shell.pythons_started() == 1
    assert read_row(tmp_path / "row.csv")["status"] == "ok"


def test_a_door_that_closes_without_an_answer_is_a_service_gone_mid_cell(shell, sandbox, tmp_path):
    door = FakeDoor(shell.socket, None)
    result = shell.run(cell_line(sandbox, tmp_path / "row.csv"))
    door.close()
    assert len(door.received) == 1
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("the measurement service went away during this cell (the service closed "
                                    "the connection at its door without an answer); sending it to a fresh one")
    assert read_row(tmp_path / "row.csv")["status"] == "ok"


def test_what_the_shell_met_at_the_door_is_the_error_a_socket_would_have_met(monkeypatch):
    for met, kind in (("timeout", TimeoutError), ("lost", ConnectionError)):
        monkeypatch.setenv(jobenv.DOOR_MET_ENV, met)
        assert isinstance(jobenv.door_failure(), kind)
        assert jobenv.DOOR_MET_ENV not in os.environ  # a service the client starts does not inherit it
    monkeypatch.setenv(jobenv.DOOR_MET_ENV, "")
    assert jobenv.door_failure() is None


def door_exchange(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=20) as connection:
        connection.sendall(data)
        answer = b""
        while chunk := connection.recv(1 << 16):
            answer += chunk
    return answer


def test_the_door_lets_in_only_its_secret_and_cells_and_the_service_serves_on(shell, sandbox, tmp_path):
    assert shell.run(cell_line(sandbox, tmp_path / "first.csv")).returncode == 0
    port, secret = Path(door_path(str(shell.socket))).read_text().split()
    request = json.dumps({"op": "ping"})
    for data, said in ((f"wrong\n{request}\n".encode(), b"refused\nnot this service's secret\n"),
                       (f"{secret}\n{request}\n".encode(), b"refused\nthe door takes cells only\n"),
                       (f"{secret}\nnot json\n".encode(), b"refused\n"),
                       (f"{secret}\n{{\"op\": \"cell\"}}\n".encode(), b"refused\nmissing field(s) for cell")):
        assert door_exchange(int(port), data).startswith(said)
    assert shell.run(cell_line(sandbox, tmp_path / "second.csv")).returncode == 0
    assert shell.pythons_started() == 1


def test_a_service_that_stops_takes_its_door_file_and_the_next_makes_a_new_secret(shell, sandbox, tmp_path):
    assert shell.run(cell_line(sandbox, tmp_path / "first.csv")).returncode == 0
    door = Path(door_path(str(shell.socket)))
    before = door.read_text()
    sandbox.convlab("serve", "--stop", "--quiet")
    assert not door.exists()
    assert shell.run(cell_line(sandbox, tmp_path / "second.csv")).returncode == 0
    assert door.read_text().split()[1] != before.split()[1]
