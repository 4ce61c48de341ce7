"""The cell job's thin entry (convlab.app.cellentry): it imports only what one request to the
measurement service needs, parses exactly the line the cell rule writes, and leaves every other
line to the whole command line, so that what a job sends, prints and exits with is the same either
way. A fake service on the job's socket stands in for the real one."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest
from fakeservice_helpers import REPO, fake_service, imported, job, named_by_the_run
from service_helpers import ServiceSandbox, read_row

from convlab.app import CELL, cellentry
from convlab.app.commandtable import COMMANDS, TABLE
from convlab.console import Console
from convlab.service import cellrequest, protocol
from convlab.service.protocol import check_request
from convlab.service.runsocket import RUN_CODE_ENV

# The modules a cell job imports on its lean path, where the run named its service: the
# interpreter's own start (without runpy: the rule starts it with -c), the socket's C module and
# these of convlab.
LEAN = {"_abc", "_codecs", "_collections_abc", "_frozen_importlib_external", "_io", "_signal", "_stat",
        "abc", "codecs", "encodings", "genericpath", "io", "marshal", "os", "posix", "posixpath", "stat", "time",
        "zipimport", "_socket", "__future__"}
LEAN_CONVLAB = {"convlab", "convlab.app", "convlab.app.cellentry", "convlab.service", "convlab.service.cellrequest",
                "convlab.service.jobenv", "convlab.service.runsocket"}
RULE_START = ("-c", "from convlab.app.cellentry import run; run()")
# Every module a cell job may import on its way to the service where it finds the service itself,
# by top-level name: the interpreter's own start and `-m` (runpy) ...
STARTUP = {"__future__", "_abc", "_codecs", "_collections", "_collections_abc", "_frozen_importlib_external",
           "_functools", "_io", "_operator", "_signal", "_sre", "_stat", "abc", "codecs", "collections", "contextlib",
           "copyreg", "encodings", "enum", "errno", "functools", "genericpath", "importlib", "io", "itertools",
           "keyword", "marshal", "operator", "os", "posix", "posixpath", "re", "reprlib", "runpy", "stat", "time",
           "types", "warnings", "zipimport"}
# ... the request, JSON framed over a Unix socket ...
PROTOCOL = {"_json", "json", "_socket", "socket", "select", "selectors", "array", "math", "_struct", "struct", "fcntl"}
# ... the service's identity, hashed; the code's own hash comes from the run that started the job ...
IDENTITY = {"_hashlib", "_blake2", "hashlib"}
# ... and these of convlab.
CONVLAB = LEAN_CONVLAB | {"convlab.console", "convlab.service.client", "convlab.service.identity",
                          "convlab.service.protocol", "convlab.service.startlock", "convlab.measure",
                          "convlab.measure.hostinfo"}


def rule_line(sandbox: ServiceSandbox, out: Path) -> list[str]:
    """A cell line as the cell rule writes it."""
    return ["cell", "--spec", sandbox.cell("direct").to_json(), "--image", str(sandbox.image),
            "--bandwidth", "results/device/cpu_copy_bandwidth.json", "--out", str(out)]


def test_the_cell_job_imports_only_what_its_request_needs(sandbox, tmp_path):
    sandbox.env[RUN_CODE_ENV] = "the-runs-hash"  # as a run hands it to its jobs
    service = fake_service(sandbox, {"ok": True, "line": "row.csv: ok 1.0 ms"})
    result = job(sandbox, rule_line(sandbox, tmp_path / "row.csv"), "-X", "importtime", "-m", "convlab")
    service.close()
    assert (result.returncode, result.stdout) == (0, "row.csv: ok 1.0 ms\n"), result.stderr
    modules = imported(result.stderr)
    assert not {m for m in modules if m.split(".")[0] in ("numpy", "pandas", "cupy", "argparse", "typing")}
    outside = sorted(m for m in modules if m not in CONVLAB and m.split(".")[0] not in STARTUP | PROTOCOL | IDENTITY)
    assert outside == []
    assert len(service.requests) == 1


def test_where_the_run_named_its_service_the_job_imports_no_json_and_no_socket_module(sandbox, tmp_path):
    sandbox.env[RUN_CODE_ENV] = "the-runs-hash"
    service = fake_service(sandbox, {"ok": True, "line": "row.csv: ok 1.0 ms"})
    result = job(sandbox, rule_line(sandbox, tmp_path / "row.csv"), "-X", "importtime", *RULE_START,
                 **named_by_the_run(sandbox, service))
    service.close()
    assert (result.returncode, result.stdout) == (0, "row.csv: ok 1.0 ms\n"), result.stderr
    modules = imported(result.stderr)
    assert sorted(m for m in modules if m not in LEAN_CONVLAB and m.split(".")[0] not in LEAN) == []
    (request,) = service.requests
    assert check_request(request)["reply"] == "text"


def test_the_lean_path_sends_what_the_full_client_sends_and_says_what_it_says(sandbox, tmp_path):
    sandbox.env[RUN_CODE_ENV] = "the-runs-hash"
    for reply, said in (({"ok": True, "line": "row.csv: ok 1.0 ms"}, (0, "row.csv: ok 1.0 ms\n", "")),
                        ({"ok": False, "error": "refused: no such kernel"}, (2, "", "error: refused: no such kernel\n"))):
        service = fake_service(sandbox, reply)
        line = rule_line(sandbox, tmp_path / "row 'quoted\"\t\u00e9.csv")
        lean = job(sandbox, line, *RULE_START, **named_by_the_run(sandbox, service), CONVLAB_RUN_ID="run-1")
        full = job(sandbox, line, *RULE_START, CONVLAB_RUN_ID="run-1")
        service.close()
        assert (lean.returncode, lean.stdout, lean.stderr) == (full.returncode, full.stdout, full.stderr) == said
        sent, by_full = ({k: v for k, v in check_request(r).items() if k not in ("client", "reply")}
                         for r in service.requests)
        assert sent == by_full
        assert [r.get("reply") for r in service.requests] == ["text", None]
        assert set(service.requests[0]["client"]) == set(service.requests[1]["client"])


def test_a_socket_named_for_another_process_is_not_used(sandbox, tmp_path):
    """A job with other facts than the run's (here another Slurm job) finds its service itself."""
    named = fake_service(sandbox, {"ok": True, "line": "the run's service"})
    env = named_by_the_run(sandbox, named)
    sandbox.env["SLURM_JOB_ID"] = "99"
    own = fake_service(sandbox, {"ok": True, "line": "row.csv: ok 1.0 ms"})
    result = job(sandbox, rule_line(sandbox, tmp_path / "row.csv"), *RULE_START, **env)
    named.close()
    own.close()
    assert (result.returncode, result.stdout) == (0, "row.csv: ok 1.0 ms\n"), result.stderr
    assert (len(named.requests), len(own.requests)) == (0, 1)


def test_a_service_that_dies_on_the_lean_path_gets_the_cell_once_more_from_the_full_client(sandbox, tmp_path):
    service = fake_service(sandbox)  # hangs up on every request
    result = job(sandbox, rule_line(sandbox, tmp_path / "row.csv"), *RULE_START, **named_by_the_run(sandbox, service))
    service.close()
    assert result.returncode == 0, result.stderr
    assert [r.get("reply") for r in service.requests] == ["text", None]
    assert result.stderr.startswith("the measurement service went away during this cell")
    assert read_row(tmp_path / "row.csv")["status"] == "error"


def test_the_lean_json_writer_writes_what_json_reads():
    import json

    for value in ({"a": "x\u0000\u001f\"\\/\u2028é😀", "n": None, "i": -3, "f": 1e-7, "g": 1.5e16,
                   "d": {"nested": "yes"}}, {}):
        assert json.loads(cellrequest.json_text(value)) == value
    for bad in (float("inf"), float("nan"), True, [1]):
        with pytest.raises(ValueError):
            cellrequest.json_text({"x": bad})


def test_the_thin_entry_sends_the_request_the_whole_command_line_sends(sandbox, tmp_path):
    service = fake_service(sandbox, {"ok": True, "line": "row.csv: ok 1.0 ms"})
    line = rule_line(sandbox, tmp_path / "row.csv")
    thin = job(sandbox, line)
    whole = job(sandbox, line, "-c", "import sys; from convlab.app.cli import main; sys.exit(main(sys.argv[1:]))")
    service.close()
    assert (thin.returncode, thin.stdout, thin.stderr) == (whole.returncode, whole.stdout, whole.stderr) == \
        (0, "row.csv: ok 1.0 ms\n", "")
    for request in service.requests:
        check_request(request)
        assert set(request["client"]) == {"pid", "started_at", "startup_ms", "sent_at"}
    sent, by_parser = ({k: v for k, v in r.items() if k != "client"} for r in service.requests)
    assert sent == by_parser == {"op": "cell", "spec": line[2], "image": str(sandbox.image),
                                 "bandwidth": str(REPO / "results/device/cpu_copy_bandwidth.json"),
                                 "out": str(tmp_path / "row.csv"), "timeout_s": 120.0}


def test_a_service_that_dies_twice_leaves_the_job_to_write_the_error_row(sandbox, tmp_path):
    """The row writer is imported on this path only, and still needs no site-packages."""
    service = fake_service(sandbox)
    result = job(sandbox, rule_line(sandbox, tmp_path / "row.csv"))
    service.close()
    assert result.returncode == 0, result.stderr
    assert len(service.requests) == 2
    reason = "the measurement service died during this cell twice (connection closed mid-message); log: "
    assert result.stdout.startswith(f"{tmp_path / 'row.csv'}: error {reason}")
    assert result.stderr.startswith("the measurement service went away during this cell")
    row = read_row(tmp_path / "row.csv")
    assert (row["status"], row["kernel"]) == ("error", "direct") and row["reason"].startswith(reason)


def test_a_service_that_does_not_answer_in_time_leaves_the_job_to_write_the_error_row(sandbox, tmp_path,
                                                                                     monkeypatch, capsys):
    for name, value in sandbox.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CONVLAB_CELL_TIMEOUT_S", "0.1")
    monkeypatch.setattr(cellrequest, "ANSWER_GRACE_S", 0.2)
    service = fake_service(sandbox, silent=True)
    out = tmp_path / "row.csv"
    assert cellentry.send_cell({"spec": sandbox.cell("direct").to_json(), "out": str(out)}, Console()) == 0
    service.close()
    reason = "timeout after 0.1 s (the measurement service did not answer and was killed)"
    assert capsys.readouterr().out == f"{out}: error {reason}\n"
    assert (read_row(out)["status"], read_row(out)["reason"]) == ("error", reason)


@pytest.mark.parametrize("argv", [
    ["cell", "--spec", "{}", "--out", "o.csv"],
    ["cell", "--spec", "{}", "--bandwidth", "b.json", "--out", "o.csv"],
    ["cell", "--out", "o.csv", "--image", "", "--bandwidth", "b.json", "--spec", "{}"],
])
def test_the_thin_entry_parses_the_rules_lines(argv):
    values = {flag.removeprefix("--"): value for flag, value in zip(argv[1::2], argv[2::2])}
    assert cellentry.parse(argv) == values


@pytest.mark.parametrize("argv", [
    [], ["serve", "--stop"], ["cell"], ["cell", "--help"], ["cell", "-h"],
    ["cell", "--spec", "{}"],  # no --out
    ["cell", "--out", "o.csv", "--image", "p.png"],  # no --spec
    ["cell", "--spec", "{}", "--out"],  # a flag without its value
    ["cell", "--spec", "{}", "--out", "o.csv", "--block", "16"],  # not the cell's
    ["cell", "--spec", "{}", "--out", "a.csv", "--out", "b.csv"],  # twice
    ["cell", "--spec={}", "--out", "o.csv"], ["cell", "--sp", "{}", "--out", "o.csv"],  # argparse's forms
    ["cell", "--spec", "{}", "--out", "-o.csv"],  # a value argparse takes for a flag
])
def test_any_other_line_is_left_to_the_whole_command_line(argv):
    assert cellentry.parse(argv) is None


def test_the_thin_entry_knows_the_cell_command_as_the_table_has_it():
    (cell,) = [command for command in TABLE if command.runs == CELL]
    assert cellentry.parse([cell.name, "--spec", "{}", "--out", "o.csv"]) == {"spec": "{}", "out": "o.csv"}
    assert [(argument.flags, bool(argument.options.get("required")), argument.path) for argument in cell.arguments] \
        == [((f"--{name}",), required, path) for name, (required, path, _) in cellrequest.OPTIONS.items()]


# The modules a cell request passes through on the job's side, from its command line to the socket.
WAYS_IN = ("__main__.py", "app/cellentry.py", "app/cli.py", "app/forward.py", "app/handlers/service.py",
           "service/client.py", "service/jobenv.py", "service/runsocket.py", "run/inprocess.py")


def spelled(path: Path, names: set[str]) -> set[str]:
    """Which of ``names`` the module at ``path`` spells as a string, or reads off a parsed command line
    (``args.<name>``)."""
    tree = ast.parse(path.read_text())
    strings = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    read = {node.attr for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "args"}
    return (strings | read) & names


def test_one_module_names_the_cell_requests_fields():
    package = Path(cellrequest.__file__).parent.parent
    options = set(cellrequest.OPTIONS)
    # the run's own two fields are jobenv.run_fields()'s, which every job asks for its run
    fields = set(protocol.REQUEST_FIELDS[cellrequest.OP]) - {"op", *cellrequest.RUN_FIELDS}
    flags = {f"--{name}" for name in options}
    assert {module: spelled(package / module, fields | flags) for module in WAYS_IN} == dict.fromkeys(WAYS_IN, set())
    assert spelled(Path(cellrequest.__file__), fields) == fields
    # the service checks a request by the same names, and a worker reads the cell's by them
    assert spelled(package / "service/protocol.py", options | flags | {cellrequest.CLIENT, cellrequest.REPLY}) == set()
    assert spelled(package / "service/worker.py", options | flags) == set()


def test_with_the_service_off_the_whole_command_line_measures_the_cell(monkeypatch):
    monkeypatch.setenv("CONVLAB_SERVICE", "off")
    assert cellentry.main(["cell", "--spec", "{}", "--out", "o.csv"]) is None


@pytest.mark.parametrize("argv", [
    ["cell", "--spec", "{}"],
    ["cell", "--spec", "{}", "--out", "o.csv", "--colour", "red"],
    ["cell", "--spec", "{}", "--out"],
])
def test_a_bad_cell_line_is_refused_with_one_error_line_as_the_command_table_words_it(sandbox, argv):
    thin = job(sandbox, argv)
    whole = job(sandbox, argv, "-c", "import sys; from convlab.app.cli import main; sys.exit(main(sys.argv[1:]))")
    assert (thin.returncode, thin.stdout, thin.stderr) == (whole.returncode, whole.stdout, whole.stderr)
    assert thin.returncode == 2 and "Traceback" not in thin.stderr
    errors = [line for line in thin.stderr.splitlines() if "error:" in line]
    assert errors == [thin.stderr.splitlines()[-1]] and errors[0].startswith("convlab")


def test_the_cell_commands_help_is_the_command_tables(sandbox):
    thin = job(sandbox, ["cell", "--help"])
    whole = job(sandbox, ["cell", "--help"], "-c", "import sys; from convlab.app.cli import main; sys.exit(main(sys.argv[1:]))")
    assert (thin.returncode, thin.stdout, thin.stderr) == (whole.returncode, whole.stdout, whole.stderr)
    assert thin.returncode == 0 and thin.stdout.startswith("usage: convlab cell [-h] --spec SPEC")
    assert COMMANDS["cell"].arguments[0].options["help"] in thin.stdout


def test_a_job_of_a_run_names_its_service_by_the_runs_code_hash(monkeypatch):
    """A run hashes the package once (export_service_settings) and its jobs take that hash rather
    than reading every module again; without it a process hashes the code itself."""
    from convlab.service.client import export_service_settings
    from convlab.service.identity import code_fingerprint, current_identity
    from convlab.service.runsocket import RUN_CODE_ENV

    monkeypatch.setattr(os, "environ", {k: v for k, v in os.environ.items() if k != RUN_CODE_ENV})
    assert current_identity().code == code_fingerprint()
    export_service_settings(300, 60)
    assert os.environ[RUN_CODE_ENV] == code_fingerprint()
    monkeypatch.setenv(RUN_CODE_ENV, "the-runs-hash")
    assert current_identity().code == "the-runs-hash"


def test_the_row_names_the_commit_the_run_read(sandbox, tmp_path):
    """The run reads its commit once and its jobs pass it on: the service asks git only for a job
    that brings none."""
    out = tmp_path / "row.csv"
    result = sandbox.run(sandbox.cell("direct"), out, CONVLAB_RUN_COMMIT="0123456789ab+the-run")
    assert result.returncode == 0, result.stderr
    assert read_row(out)["git_commit"] == "0123456789ab+the-run"
    result = sandbox.run(sandbox.cell("direct"), out)
    assert result.returncode == 0, result.stderr
    assert read_row(out)["git_commit"] not in ("", "0123456789ab+the-run")
