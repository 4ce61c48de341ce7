"""`watch`: each save of a kernel's files previewed at once, against the version the results
database recorded last, without a run: its files polled by content (SavedFiles, every POLL_S),
and on a save the `preview` command (convlab.app.handlers.preview) run in the measurement
service's worker of the backend, as a run's device commands are (in this process with
CONVLAB_SERVICE=off). A preview writes nothing under results/: the next `snakemake` run measures
the edited cells and records them as it always does.

The service a watch asks is named by the package's code apart from the cpu twins, which a preview
loads from its own copies of their files: a twin's save then finds the worker warm, where a run's
service (named by all of the code) would start anew.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from pathlib import Path

from convlab.app.command import call
from convlab.app.commandtable import parse
from convlab.app.forward import forward
from convlab.app.handlers.preview import SUPERSEDED
from convlab.backends.choice import choose_backend
from convlab.codeversion import PACKAGE_DIR, fingerprint
from convlab.console import Console
from convlab.history.previewplan import narrowed
from convlab.plan.cell import Cell
from convlab.plan.devicelabel import choose_devices
from convlab.plan.grid import build_cells
from convlab.plan.registry import CPU_TWINS_DIR, KernelSpec, load_registry, shown
from convlab.plan.runconfig import run_config
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


def watchable(spec: KernelSpec, backend: str) -> bool:
    """Whether a preview can run this kernel's recorded version beside its saved one: a .cu
    kernel's on a GPU, a cpu twin's on the cpu (a library's wrapper is the package's, loaded once)."""
    if backend == "cpu":
        return spec.twin_path is not None
    return spec.source is not None and not spec.library


def preview_code() -> str:
    """The hash that names a watch's service: the package's code apart from the cpu twins."""
    return "watch-" + fingerprint([path for path in PACKAGE_DIR.rglob("*.py") if not path.is_relative_to(CPU_TWINS_DIR)])


class Watch:
    """What a watch previews, and how it asks for a preview."""

    def __init__(self, args: argparse.Namespace, console: Console) -> None:
        self.console = console
        config, self.source = run_config(args.configfile)
        choice = choose_backend(config["backend"])
        self.backend = choice.backend
        placements, _ = choose_devices(config, self.backend, list(choice.gpus))
        if len(placements) != 1:
            raise UserError(f"config devices names {len(placements)} device labels; a watch measures this machine's "
                            "one: give a --configfile that sets `device`")
        self.device = placements[0].label
        self.cells: list[Cell] = narrowed(build_cells(config, self.backend, self.device), args.kernels, args.sizes,
                                          args.strides)
        registry = load_registry()
        kernels = sorted({cell.kernel for cell in self.cells})
        self.specs = {name: registry[name] for name in kernels if watchable(registry[name], self.backend)}
        self.unwatched = [name for name in kernels if name not in self.specs]
        if not self.specs:
            raise UserError(f"no kernel of this grid ({', '.join(kernels)}) has files a preview can run again on the "
                            f"{self.backend} backend (a .cu on a GPU, a cpu twin on the cpu)")
        narrowing = [option for flag, values in (("--sizes", args.sizes), ("--strides", args.strides)) if values
                     for option in (flag, *map(str, values))]
        self.argv = ["preview", "--config", json.dumps(config), "--backend", self.backend, "--device", self.device,
                     "--results", str(Path(args.results) / self.device), *narrowing, "--watcher", str(os.getpid())]
        self.fail_on = args.fail_on
        if args.fail_on:
            self.argv += ["--fail-on", args.fail_on]
        # this process's environment is what the service it starts inherits (a watch runs in its own process)
        idle_s = config["service"]["idle_timeout_s"]
        os.environ.setdefault("CONVLAB_SERVICE_IDLE_S", f"{idle_s:g}")
        self.asked_at = 0.0

    def files(self) -> dict[Path, list[str]]:
        """Each watched file, with the kernels it belongs to (a twin may serve several)."""
        owners: dict[Path, list[str]] = {}
        for name, spec in self.specs.items():
            for path in spec.files(self.backend):
                owners.setdefault(path, []).append(name)
        return owners

    def preview(self, kernels: list[str], *extra: str) -> int:
        """One preview of ``kernels``: its exit status (SUPERSEDED where newer files stopped it)."""
        argv = [*self.argv, *extra, "--kernels", *kernels]
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
        files = "kernels/<name>.yaml and its cpu twin" if self.backend == "cpu" else "kernels/<name>.cu and .yaml"
        cells = sum(cell.kernel in self.specs for cell in self.cells)
        self.console.say(f"watch: {', '.join(self.specs)} ({cells} cells of {self.device}; {self.source}): each save "
                         f"of their files ({files}) is compiled, verified and paired with its last recorded version; "
                         "Ctrl-C stops")
        if self.unwatched:
            self.console.say(f"watch: not watched: {', '.join(self.unwatched)} (a library's kernels: no recorded "
                             "version of theirs runs beside the current one)")
        self.console.say(WRITES_NOTHING)


def watch(args: argparse.Namespace, console: Console) -> int:
    try:
        watcher = Watch(args, console)
        if args.once:
            return once(watcher)
        watcher.announce()
        owners = watcher.files()
        files = SavedFiles(owners)  # read before the worker starts: a save meanwhile is seen
        # the worker started (and the handler's modules loaded) before the first save, not after it
        watcher.preview([])
        return watch_saves(watcher, owners, files)
    except KeyboardInterrupt:
        console.say("watch: stopped; nothing was written under results/")
        # a watch ends with Ctrl-C; a script's --once that did not finish must not read as passed
        return INTERRUPTED if args.once else 0


def once(watcher: Watch) -> int:
    """One preview of the kernels whose files differ from their last recorded version; again from
    the new files where a save stopped it."""
    while True:
        code = watcher.preview(list(watcher.specs), "--differing")
        if code != SUPERSEDED:
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
        watcher.console.say(f"watch: {time.monotonic() - saved_at:.1f} s from the save; waiting for the next "
                            "(Ctrl-C stops)")
        pending.clear()
        saved_at = 0.0

