"""`watch`: each save of a kernel's files previewed at once, against the version the results
database recorded last, without a run: its files (convlab.pairs.previewplan.watched) polled by
content (SavedFiles, every POLL_S), and on a save the `preview` command
(convlab.app.handlers.preview) run in the measurement service's worker of the backend, as a run's
device commands are (in this process with CONVLAB_SERVICE=off). A preview writes nothing under
results/: the next `snakemake` run measures the edited cells and records them as it always does.

The service a watch asks is named by the package's code apart from the cpu twins, which a preview
loads from its own copies of their files: a twin's save then finds the worker warm, where a run's
service (named by all of the code) would start anew.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import threading
import time
from pathlib import Path

from convlab.app.command import call
from convlab.app.commandtable import parse
from convlab.app.forward import forward
from convlab.app.handlers.preview import SUPERSEDED
from convlab.codeversion import PACKAGE_DIR, fingerprint
from convlab.console import Console
from convlab.pairs.previewplan import watched
from convlab.plan.registry import CPU_TWINS_DIR, shown
from convlab.savedfiles import SavedFiles
from convlab.service.client import ask, service_paths
from convlab.service.jobenv import service_on
from convlab.service.runsocket import RUN_CODE_ENV
from convlab.status import UserError

POLL_S = 0.2
INTERRUPTED = 130  # the shell's status of a command ended by SIGINT
KEEP_WARM_S = 30.0  # a watch asks its service this often, so that it does not idle out while it waits
WRITES_NOTHING = ("watch: a preview writes nothing under results/ and nothing snakemake reads: the next "
                  "`snakemake --cores 1` re-measures the edited cells and records them")
WORKER_DIED = re.compile(r"the measurement worker died \(((?:[^()]|\([^()]*\))*)\)")


def preview_code() -> str:
    """The hash that names a watch's service: the package's code apart from the cpu twins."""
    return "watch-" + fingerprint([path for path in PACKAGE_DIR.rglob("*.py") if not path.is_relative_to(CPU_TWINS_DIR)])


def details_file(given: str, results: str) -> Path:
    """Where --details writes, as an absolute path (the preview runs in the service's worker): a file
    in a folder that exists, outside the results a watch leaves as they are."""
    path = Path(given).resolve()
    if path.is_relative_to(Path(results).resolve()):
        raise UserError(f"--details {given}: under {results}/, which a watch leaves as it is; name a file elsewhere")
    if not path.parent.is_dir():
        raise UserError(f"--details {given}: no folder {shown(path.parent)}")
    return path


class Watch:
    """What a watch previews, and how it asks for a preview."""

    def __init__(self, args: argparse.Namespace, console: Console) -> None:
        self.console = console
        self.plan = plan = watched(args.configfile, args.kernels, args.sizes, args.strides)
        narrowing = [option for flag, values in (("--sizes", args.sizes), ("--strides", args.strides)) if values
                     for option in (flag, *map(str, values))]
        config = plan.config
        # a why on a GPU unless --no-why: it is said after the verdict, which it never delays
        self.why = args.why if args.why is not None else bool(config["verdicts"]["why"] or plan.backend == "cuda")
        config = {**config, "verdicts": {**config["verdicts"], "why": self.why}}
        self.argv = ["preview", "--config", json.dumps(config), "--backend", plan.backend, "--device", plan.device,
                     "--results", str(Path(args.results) / plan.device), *narrowing, "--watcher", str(os.getpid())]
        if self.why:
            self.argv.append("--why-after")
        if args.details:
            self.argv += ["--details", str(details_file(args.details, args.results))]
        self.fail_on = args.fail_on
        if args.fail_on:
            self.argv += ["--fail-on", args.fail_on]
        # this process's environment is what the service it starts inherits (a watch runs in its own process)
        idle_s = plan.config["service"]["idle_timeout_s"]
        os.environ.setdefault("CONVLAB_SERVICE_IDLE_S", f"{idle_s:g}")
        self.asked_at = 0.0

    def preview(self, kernels: list[str], *extra: str) -> int:
        """One preview of ``kernels``: its exit status (SUPERSEDED where newer files stopped it)."""
        return self.ask([*self.argv, *extra, "--kernels", *kernels], kernels)

    def collect_why(self) -> None:
        """The last preview's why, said once Nsight Compute has profiled it (nothing where none)."""
        if self.why:
            self.ask([*self.argv, "--collect-why"], [])

    def ask(self, argv: list[str], kernels: list[str]) -> int:
        """The preview command ``argv`` run by the service's worker (here with CONVLAB_SERVICE=off)."""
        command, parsed = parse(argv)
        self.asked_at = time.monotonic()
        if not service_on():
            return call(command, parsed, self.console)
        os.environ[RUN_CODE_ENV] = preview_code()
        collected = Console.collecting()
        code = forward(command, parsed, argv, collected)
        out, err = collected.said()
        died = WORKER_DIED.search(err)
        if code != 0 and died:
            self.console.relay(out, "")
            self.console.say(f"watch: the measurement worker died during the preview of {', '.join(kernels)} "
                             f"({died.group(1)}); the service starts a fresh one")
            return 1 if self.fail_on else 0  # the kernel's failure, as one that does not compile
        self.console.relay(out, err)
        return code

    def keep_warm(self) -> None:
        """Ask the service something now and then, so that it stays warm for the next save."""
        if not service_on() or time.monotonic() - self.asked_at < KEEP_WARM_S:
            return
        self.asked_at = time.monotonic()
        try:
            ask(service_paths(), {"op": "ping"}, timeout_s=5, start=False)
        except (OSError, ValueError):  # ValueError: the protocol's refusals
            pass  # gone: the next preview starts one

    def announce(self) -> None:
        plan = self.plan
        files = "kernels/<name>.yaml and its cpu twin" if plan.backend == "cpu" else "kernels/<name>.cu and .yaml"
        cells = sum(cell.kernel in plan.specs for cell in plan.cells)
        self.console.say(f"watch: {', '.join(plan.specs)} ({cells} cells of {plan.device}; {plan.source}): each save "
                         f"of their files ({files}) is compiled, verified and paired with its last recorded version; "
                         "Ctrl-C stops")
        if plan.unwatched:
            self.console.say(f"watch: not watched: {', '.join(plan.unwatched)} (a library's kernels: no recorded "
                             "version of theirs runs beside the current one)")
        self.console.say(WRITES_NOTHING)


def watch(args: argparse.Namespace, console: Console) -> int:
    try:
        watcher = Watch(args, console)
        if args.once:
            return once(watcher)
        watcher.announce()
        owners = watcher.plan.files()
        files = SavedFiles(owners)  # read before the worker starts: a save meanwhile is seen
        warm_up(watcher)
        return watch_saves(watcher, owners, files)
    except KeyboardInterrupt:
        console.say("watch: stopped; nothing was written under results/")
        # a watch ends with Ctrl-C; a script's --once that did not finish must not read as passed
        return INTERRUPTED if args.once else 0


def warm_up(watcher: Watch) -> threading.Thread:
    """Start the worker (and load the handler's modules) before the first save, on a thread of its
    own: the saves are polled meanwhile, and a save's preview waits for the worker, not for the poll.
    One line says when the watch is ready."""
    def start() -> None:
        started = time.monotonic()
        try:
            watcher.preview([])
        except (OSError, UserError, ValueError) as error:
            watcher.console.say(f"watch: the measurement worker did not start ({error}); a save's preview starts "
                                "it again")
            return
        watcher.console.say(f"watch: ready ({time.monotonic() - started:.1f} s to start the measurement worker); "
                            "each save is previewed as it comes (Ctrl-C stops)")

    thread = threading.Thread(target=start, name="watch-warm-up", daemon=True)
    thread.start()
    return thread


def once(watcher: Watch) -> int:
    """One preview of the kernels whose files differ from their last recorded version (and its
    why); again from the new files where a save stopped it."""
    while True:
        code = watcher.preview(list(watcher.plan.specs), "--differing")
        if code != SUPERSEDED:
            watcher.collect_why()
            return code


def watch_saves(watcher: Watch, owners: dict[Path, list[str]], files: SavedFiles) -> int:
    """Poll until Ctrl-C; preview the kernels of each save once it is written (one poll without a
    change), and again from the new files where a save comes during a preview."""
    pending: set[str] = set()
    saved_at = 0.0
    while True:
        time.sleep(POLL_S)
        changed = files.saved()
        if changed:
            names = ", ".join(shown(path) for path in changed)
            watcher.console.say(f"watch: saved {names}")
            pending.update(kernel for path in changed for kernel in owners[path])
            saved_at = saved_at or time.monotonic()
            continue
        if not pending:
            watcher.keep_warm()
            continue
        code = watcher.preview(sorted(pending))
        if code == SUPERSEDED:
            continue  # the next poll sees the newer files
        verdict_s = time.monotonic() - saved_at
        if watcher.why:
            watcher.collect_why()
            took = f"{verdict_s:.1f} s from the save to the verdict, {time.monotonic() - saved_at:.1f} s to its why"
        else:
            took = f"{verdict_s:.1f} s from the save"
        watcher.console.say(f"watch: {took}; waiting for the next (Ctrl-C stops)")
        pending.clear()
        saved_at = 0.0

