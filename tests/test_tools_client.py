"""A run's report and data jobs (the commands a tools worker runs) on the thin entry's lean path: where the
run named its service, the job sends its line itself, without the command table, argparse or the full
client, and says and exits with what the worker said, as the whole command line would. A fake service on
the job's socket stands in for the real one."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
from fakeservice_helpers import FakeService, fake_service, imported, job, named_by_the_run

from convlab.app import TOOLS, cellentry
from convlab.app.commandtable import TABLE
from convlab.service.protocol import check_request, send_message
from convlab.service.runsocket import RUN_CODE_ENV

LINE = ["seed-table", "--seed", "000", "--comparison", "results/x/seeds/comparison/conv2d.csv",
        "--out", "results/x/seeds/seed000 'quoted\"\t\u00e9.html"]
# what the whole command line imports and the lean path does not
FULL_CLIENT = {"argparse", "convlab.app.cli", "convlab.app.commandtable", "convlab.service.client", "hashlib"}


class HangsUpOnce(FakeService):
    """A service that goes away during the first request it gets (a killed one, replaced) and answers
    the next with ``reply``."""

    def answer(self, connection: socket.socket, request: dict) -> None:
        if len(self.requests) > 1:
            send_message(connection, self.reply)
        connection.shutdown(socket.SHUT_RDWR)
        connection.close()


def test_the_thin_entry_sends_every_tools_command_of_the_table_and_no_other(monkeypatch):
    """Which lines the thin entry sends as a tools worker's, by the table's own entries."""
    monkeypatch.delenv("CONVLAB_SERVICE", raising=False)
    sent = []
    monkeypatch.setattr(cellentry, "send_to_tools", lambda argv: sent.append(argv[0]) or 0)
    for command in TABLE:
        cellentry.main([command.name, "--flag", "value"])
    assert sent == [command.name for command in TABLE if command.runs == TOOLS]


@pytest.mark.parametrize("reply,said", [
    ({"ok": True, "exit_code": 0, "stdout": "results/x/seeds/seed000.html\n", "stderr": "warning: few rows\n"},
     (0, "results/x/seeds/seed000.html\n", "warning: few rows\n")),
    ({"ok": True, "exit_code": 2, "stdout": "", "stderr": "error: no such seed\n"}, (2, "", "error: no such seed\n")),
    ({"ok": False, "error": "refused: unknown pool"}, (2, "", "error: refused: unknown pool\n")),
])
def test_a_tools_job_sends_what_the_full_client_sends_and_says_what_it_says(sandbox, reply, said):  # noqa: F811
    sandbox.env[RUN_CODE_ENV] = "the-runs-hash"  # as a run hands it to its jobs
    service = fake_service(sandbox, reply)
    lean = job(sandbox, LINE, "-X", "importtime", "-m", "convlab", **named_by_the_run(sandbox, service))
    full = job(sandbox, LINE, "-X", "importtime", "-m", "convlab")
    service.close()
    assert (lean.returncode, lean.stdout) == (full.returncode, full.stdout) == said[:2], lean.stderr
    assert [line for line in lean.stderr.splitlines() if not line.startswith("import time:")] == \
        [line for line in full.stderr.splitlines() if not line.startswith("import time:")] == said[2].splitlines()
    sent, by_full = (check_request(request) for request in service.requests)
    assert sent == by_full and sent["argv"] == LINE and sent["pool"] == TOOLS
    assert not FULL_CLIENT & imported(lean.stderr) and FULL_CLIENT <= imported(full.stderr)


def test_a_service_that_goes_away_leaves_the_line_to_the_whole_command_line(sandbox, tmp_path):  # noqa: F811
    sandbox.env[RUN_CODE_ENV] = "the-runs-hash"
    found = fake_service(sandbox)
    found.close()  # where the full client looks: the same socket, served by one that hangs up once
    service = HangsUpOnce(Path(found.path), {"ok": True, "exit_code": 0, "stdout": "done\n", "stderr": ""})
    result = job(sandbox, LINE, **named_by_the_run(sandbox, service))
    service.close()
    assert (result.returncode, result.stdout) == (0, "done\n"), result.stderr
    assert len(service.requests) == 2 and service.requests[0] == service.requests[1]


@pytest.mark.parametrize("line", [[LINE[0], "--help"], ["compare", "--help"]])
def test_help_and_other_commands_are_the_whole_command_lines(sandbox, line):  # noqa: F811
    service = fake_service(sandbox, {"ok": True, "exit_code": 0, "stdout": "", "stderr": ""})
    result = job(sandbox, line, **named_by_the_run(sandbox, service))
    service.close()
    assert result.returncode == 0 and result.stdout.startswith("usage: convlab "), result.stderr
    assert service.requests == []


def test_without_a_service_named_by_the_run_the_whole_command_line_finds_it(sandbox):  # noqa: F811
    service = fake_service(sandbox, {"ok": True, "exit_code": 0, "stdout": "found\n", "stderr": ""})
    result = job(sandbox, LINE, "-X", "importtime", "-m", "convlab")
    service.close()
    assert (result.returncode, result.stdout) == (0, "found\n")
    assert FULL_CLIENT <= imported(result.stderr) and len(service.requests) == 1


def test_help_lists_the_users_commands_and_names_the_workflows_steps_apart():
    from convlab.app.commandtable import COMMANDS, WORKFLOW_STEPS, build_parser

    text = build_parser().format_help()
    listed, _, apart = text.partition("steps the workflow runs")
    assert text.startswith("usage: convlab [-h] <command> ...")
    for name in COMMANDS:
        mentioned_in_list = re.search(rf"^    {re.escape(name)}(\s|$)", listed, re.MULTILINE) is not None
        assert mentioned_in_list == (name not in WORKFLOW_STEPS), name
        named_apart = " ".join(apart.split()).partition(": ")[2].split(", ")
        assert (name in named_apart) == (name in WORKFLOW_STEPS), name
    assert {"compare", "watch", "run", "check-verdicts", "history"} <= set(COMMANDS) - WORKFLOW_STEPS
