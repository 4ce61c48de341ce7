"""What an entry of the command table is (convlab.app.commandtable), and what every command shares:
its parser, its handler found by name, one way of turning its failures into an exit status, and
its path arguments taken relative to the directory of the job that asked for it.

Standard library only: a cell job (``python -S``, no site-packages) parses its command line here.
"""

from __future__ import annotations

import argparse
import importlib
import os
import textwrap
import traceback
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from convlab.app import DEVICE, TOOLS, WHERE, place_of
from convlab.console import Console
from convlab.machinefaults import machine_fault
from convlab.status import UserError

Handler = Callable[[argparse.Namespace, Console], int]


@dataclass(frozen=True)
class Argument:
    """One argument: its flags (or positional name) and argparse's keywords. ``path``: a file or
    folder, relative to the working directory of the job that gave it."""

    flags: tuple[str, ...]
    options: Mapping[str, Any] = field(default_factory=dict)
    path: bool = False

    @property
    def dest(self) -> str:
        """The attribute argparse stores it under."""
        if "dest" in self.options:
            return self.options["dest"]
        name = next((flag for flag in self.flags if flag.startswith("--")), self.flags[0])
        return name.lstrip("-").replace("-", "_")


def arg(*flags: str, path: bool = False, **options: Any) -> Argument:
    """An Argument written as add_argument's call is: ``arg("--out", path=True, required=True)``."""
    return Argument(flags, options, path)


def file_arg(*flags: str, **options: Any) -> Argument:
    """A file or folder the command cannot go without (most of the report stage's arguments)."""
    return Argument(flags, {"required": True, **options}, path=True)


def file_args(*flags: str) -> tuple[Argument, ...]:
    """Several such files, one flag each: ``*file_args("--summary", "--out")``."""
    return tuple(file_arg(flag) for flag in flags)


@dataclass(frozen=True)
class Command:
    """One command: its name, its help, its arguments, the handler that runs it and where it runs
    (``runs``: convlab.app.PLACES's place for its name, unless given).

    ``handler`` is "module:function", imported when the command runs, as a console script's entry
    point is: the table is read by every job, and a cell job, a thin client of the service, must
    not import what the other commands' handlers import (NumPy, pandas, CuPy).
    """

    name: str
    help: str
    handler: str
    arguments: tuple[Argument, ...] = ()
    runs: str | None = None
    # DEVICE: the backend whose worker runs it, from its arguments
    pool: Callable[[argparse.Namespace], str] | None = None
    # its handler imports the standard library only, so `python -S` runs it without restarting
    standard_library: bool = False
    description: str | None = None

    def __post_init__(self) -> None:
        if self.runs is None:
            object.__setattr__(self, "runs", place_of(self.name))  # frozen: set once, as it is made
        if self.runs not in WHERE:
            raise ValueError(f"command {self.name}: runs={self.runs!r}, not one of {WHERE}")
        if (self.runs == DEVICE) != (self.pool is not None):
            raise ValueError(f"command {self.name}: a pool is named exactly for the commands a device's worker runs")

    def worker_pool(self, args: argparse.Namespace) -> str:
        """The service's pool whose worker runs it: a backend's, or the tools workers'."""
        return self.pool(args) if self.pool is not None else TOOLS

    def path_arguments(self) -> list[str]:
        return [argument.dest for argument in self.arguments if argument.path]


def parser_of(commands: Iterable[Command], description: str,
              parser_class: type[argparse.ArgumentParser] = argparse.ArgumentParser,
              steps: Collection[str] = ()) -> argparse.ArgumentParser:
    """The command line of ``commands``: one subcommand each, its name in ``args.command``. The
    ``steps`` (what the workflow's rules and other commands run) are kept out of the list of the
    user's commands and named apart after it."""
    commands = list(commands)
    apart = [command.name for command in commands if command.name in steps]
    epilog = textwrap.fill(f"steps the workflow runs (each takes --help): {', '.join(apart)}", 100) if apart else None
    parser = parser_class(prog="convlab", description=description, epilog=epilog,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    subcommands = parser.add_subparsers(dest="command", required=True, metavar="<command>", title="commands")
    for command in commands:
        extra = {"description": command.description} if command.description else {}
        if command.name not in steps:
            extra["help"] = command.help
        sub = subcommands.add_parser(command.name, **extra)
        for argument in command.arguments:
            sub.add_argument(*argument.flags, **argument.options)
    return parser


def handler_of(command: Command) -> Handler:
    """The command's handler, its module imported now."""
    module, _, function = command.handler.partition(":")
    return getattr(importlib.import_module(module), function)


def call(command: Command, args: argparse.Namespace, console: Console) -> int:
    """Run the command's handler: its exit status. The command line and the service's workers
    both call it, so a failure reads the same wherever the command ran: a mistake the user can fix
    is one ``error:`` line (status 2), and so is a fault of the machine (a full disk, a read-only
    folder: the path and the fix); anything else is a bug, its traceback then one ``error:``
    line (status 1). A rule shows its log's last line when it fails: that line is the error."""
    try:
        return handler_of(command)(args, console)
    except UserError as error:
        console.warn(f"error: {error}")
        return 2
    except Exception as error:
        fault = machine_fault(error.errno or 0, str(error.filename or "")) if isinstance(error, OSError) else None
        if fault:  # the machine's, not the program's: what to do, without a traceback
            console.warn(fault)
            return 2
        console.warn(traceback.format_exc().rstrip("\n"))
        console.warn(f"error: {command.name} failed: {type(error).__name__}: {error}")
        return 1


def same_directory(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def in_directory(command: Command, args: argparse.Namespace, cwd: str) -> argparse.Namespace:
    """``args`` as a worker runs them for a job in ``cwd``. Where the worker's own directory is
    that one (a Snakemake run's jobs and the service they started), they are left as given, so that
    what the command prints and records (its summary line, a run's verdict lines, the source's
    sidecar) names each file as the job gave it; elsewhere, a relative path argument is made
    absolute under ``cwd``, defaults (``results``) included."""
    if same_directory(cwd, os.getcwd()):
        return args
    values = dict(vars(args))
    for name in command.path_arguments():
        value = values.get(name)
        if isinstance(value, list):
            values[name] = [os.path.join(cwd, item) for item in value]
        elif value is not None:
            values[name] = os.path.join(cwd, value)
    return argparse.Namespace(**values)
