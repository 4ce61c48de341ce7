"""The command table: every command's handler is found by its name, the command line is built from
the table alone, one function turns a handler's failure into its exit status wherever it ran, and
a worker runs a command for a job in another directory without leaving its own."""

from __future__ import annotations

import argparse
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

from convlab.app import CELL, DEVICE, JOB, PLACES, TOOLS
from convlab.app.cli import main
from convlab.app.command import Command, arg, call, handler_of, in_directory
from convlab.app.commandtable import COMMANDS, TABLE, build_parser, parse
from convlab.app.workerentry import run_command
from convlab.console import Console
from convlab.paths import REPO_ROOT
from convlab.status import UserError

REPO = Path(__file__).resolve().parents[1]


def test_every_command_names_a_handler_of_args_and_console():
    for command in TABLE:
        handler = handler_of(command)
        assert list(inspect.signature(handler).parameters) == ["args", "console"], command.name


def test_the_parser_is_the_table():
    subcommands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert list(subcommands.choices) == [command.name for command in TABLE] == list(COMMANDS)
    command, args = parse(["gallery", "--spec", '{"backend": "cuda"}', "--image", "a.png", "--out", "b.png"])
    assert (command.runs, command.worker_pool(args)) == (DEVICE, "cuda")
    command, args = parse(["bandwidth", "--backend", "cpu", "--out", "b.json"])
    assert command.worker_pool(args) == "cpu"
    assert parse(["figures", "--summary", "s.csv", "--outdir", "f"])[0].worker_pool(args) == TOOLS


@pytest.mark.parametrize("argv", [
    ["figures", "--summary", "s.csv", "--outdir", "f", "--figure", "status"],
    ["seed-figure", "--seed", "001", "--figure", "methods", "--comparison", "c.csv", "--summary", "s.csv", "--out", "o.png"],
    ["history", "--limit", "3"],
    ["figures", "--summary", "s.csv"],  # a required option missing
    ["figures", "--summary", "s.csv", "--outdir", "f", "--bogus"],  # an unknown one
    ["nope"],
    [],
])
def test_a_line_parses_and_fails_as_with_the_whole_table(argv, capsys):
    """parse() builds only the named command's parser: the same arguments, and the same usage error."""
    def outcome(parser_parse):
        try:
            return vars(parser_parse(argv)), ""
        except SystemExit as stop:
            return stop.code, capsys.readouterr().err

    assert outcome(lambda line: parse(line)[1]) == outcome(build_parser().parse_args)


def test_where_each_command_runs():
    by_place = {place: sorted(c.name for c in TABLE if c.runs == place) for place in (JOB, CELL, DEVICE, TOOLS)}
    assert by_place[JOB] == ["bench", "bench-history", "bench-pipeline", "check-verdicts", "compare", "counters-replay",
                             "history", "run", "serve", "shared-memory", "watch", "why-replay"]
    assert by_place[CELL] == ["cell"]
    assert by_place[DEVICE] == ["bandwidth", "ceiling", "compile-kernels", "counters", "gallery", "pair", "preview"]
    assert by_place[TOOLS] == ["aggregate", "counters-report", "downscale", "figures", "findings", "gpus",
                               "history-page", "record", "roofline", "seed-compare", "seed-figure", "seed-table",
                               "source"]
    assert set(PLACES) - set(COMMANDS) == set()  # every place is a command's


def test_a_worker_runs_what_the_job_would_and_takes_its_paths_from_the_jobs_directory(tmp_path, monkeypatch):
    here = os.getcwd()
    reply = run_command(["aggregate", "--out", "summary.csv"], str(tmp_path))
    assert os.getcwd() == here  # the worker never changes its directory
    assert (tmp_path / "summary.csv").is_file() and not Path("summary.csv").exists()
    assert reply == {"ok": True, "exit_code": 0, "stdout": f"{tmp_path / 'summary.csv'}: 0 rows; by status: {{}}\n",
                     "stderr": ""}
    # from the worker's own directory the paths are left as the job gave them: what it prints is the job's own
    monkeypatch.chdir(tmp_path)
    reply = run_command(["aggregate", "--out", "again.csv"], str(tmp_path))
    assert reply["stdout"] == "again.csv: 0 rows; by status: {}\n"


def test_path_arguments_and_their_defaults_are_taken_from_the_jobs_directory(tmp_path):
    command, args = parse(["aggregate", "--out", "s.csv", "a.csv", "/abs/b.csv"])
    moved = in_directory(command, args, str(tmp_path))
    assert moved.out == str(tmp_path / "s.csv") and moved.cells == [str(tmp_path / "a.csv"), "/abs/b.csv"]
    command, args = parse(["gpus", "--out", "gpus.html"])
    assert in_directory(command, args, str(tmp_path)).results == str(tmp_path / "results")
    command, args = parse(["record", "--results", "r", "--backend", "cpu", "--device", "d", "--grid", "g.json"])
    moved = in_directory(command, args, str(tmp_path))
    assert (moved.grid, moved.device, moved.results) == (str(tmp_path / "g.json"), "d", str(tmp_path / "r"))
    assert in_directory(command, args, os.getcwd()) is args


def fails_for_the_user(args: argparse.Namespace, console: Console) -> int:
    console.say("started")
    raise UserError("the picture is missing")


def fails_with_a_bug(args: argparse.Namespace, console: Console) -> int:
    return {}["missing"]


def fails_on_a_full_disk(args: argparse.Namespace, console: Console) -> int:
    console.say("started")
    raise OSError(28, "No space left on device", "results/h100/summary.csv")


@pytest.mark.parametrize("handler, code, last", [
    ("fails_for_the_user", 2, "error: the picture is missing"),
    ("fails_with_a_bug", 1, "error: probe failed: KeyError: 'missing'"),
    # the machine's fault: its path and the fix, no traceback
    ("fails_on_a_full_disk", 2, "error: results/h100/summary.csv could not be written: the disk is full: free space "
                                "on that disk and run again (data/ and the drawings under results/<device>/ can be made "
                                "again; its history.sqlite and cells/ hold the measurements: keep them)"),
])
def test_one_function_turns_a_failure_into_its_exit_status(handler, code, last):
    console = Console.collecting()
    assert call(Command("probe", "", f"{__name__}:{handler}"), argparse.Namespace(), console) == code
    out, err = console.said()
    if code == 2:  # a mistake the user can fix: one line, no traceback
        assert (out, err) == ("started\n", last + "\n")
    else:  # a bug: its traceback, then the one line a rule's log ends with
        assert err.startswith("Traceback (most recent call last):") and err.endswith(f"KeyError: 'missing'\n{last}\n")


def test_a_device_command_names_its_pool_and_no_other_does():
    with pytest.raises(ValueError, match="pool"):
        Command("probe", "", "m:f", runs=DEVICE)
    with pytest.raises(ValueError, match="runs="):
        Command("probe", "", "m:f", runs="elsewhere")
    assert arg("--user-image", path=True).dest == "user_image" and arg("cells", nargs="*").dest == "cells"


def test_the_command_line_and_a_worker_say_the_same(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["aggregate", "--out", "here.csv"], forward=False) == 0
    printed = capsys.readouterr()
    reply = run_command(["aggregate", "--out", "here.csv"], str(tmp_path))
    assert (reply["stdout"], reply["stderr"]) == (printed.out, printed.err)


def test_the_thin_client_reads_the_table_without_site_packages():
    probe = ("import sys; from convlab.app.commandtable import parse; from convlab.app.cli import main; "
             "parse(['cell', '--spec', '{}', '--out', 'x']); "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'yaml', 'pandas', 'cupy')))")
    result = subprocess.run([sys.executable, "-S", "-c", probe], env={**os.environ, "PYTHONPATH": str(REPO / "workflow")},
                            capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "[]", result.stderr


def test_listing_the_history_imports_neither_pandas_nor_matplotlib():
    probe = ("import sys; import convlab.app.handlers.history; "
             "print(sorted({m.split('.')[0] for m in sys.modules} & {'pandas', 'matplotlib'}))")
    result = subprocess.run([sys.executable, "-c", probe], env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "workflow")},
                            capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "[]", result.stderr
