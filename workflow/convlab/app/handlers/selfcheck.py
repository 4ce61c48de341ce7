"""`check-verdicts`: an A/A self-check a CI job runs before it bets on `compare --fail-on slower`.

A sample of the last run's ok cells, each measured side by side with itself (a source kernel as a
second module of its own files, as a pair's previous version is; any other kernel as itself),
by the pair step's rounds, intervals and threshold, on this machine now. Every FASTER or SLOWER
is a false call; the intervals' half-widths say the smallest change a pair here would call. The
exit status says whether the host is quiet enough for the gate: 0 when no cell was falsely called
and no other process used the GPU, 1 otherwise, 2 for input that cannot be checked.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import tempfile
from collections import Counter
from pathlib import Path

from convlab.app.handlers.pairs import pair_settings
from convlab.backends import get_backend
from convlab.backends.choice import choose_backend
from convlab.backends.devicelock import exclusive_device
from convlab.codeversion import file_contents
from convlab.console import Console
from convlab.history import store
from convlab.history.compare import CompareError
from convlab.history.kernelversions import copy_kernel_version
from convlab.history.record import RUN_CONFIG
from convlab.history.sides import device_folder
from convlab.history.verdictrule import verdict_of_interval
from convlab.paths import REPO_ROOT
from convlab.plan.config import read_config_file, validate_config
from convlab.plan.grid import build_cells
from convlab.plan.registry import KernelSpec, get_kernel, read_kernel_folder
from convlab.run.paired import PairRefused, measure_pair
from convlab.status import UserError


def _config(files: list[str], folder: Path) -> dict:
    """With --configfile, the config as `snakemake` reads it (config/config.yaml, each file on
    top); without, the config of the run that recorded last in ``folder``, else config/config.yaml."""
    recorded = folder / RUN_CONFIG
    if not files and recorded.is_file():
        try:
            return validate_config(json.loads(recorded.read_text()), source=str(recorded))
        except ValueError:
            pass  # damaged: the config on disk is the next best guess
    raw: dict = {}
    for path in ["config/config.yaml", *files]:
        raw.update(read_config_file(path))
    return validate_config(raw, source=", ".join(["config/config.yaml", *files]))


def sample(cells: list, count: int, seed: int = 0) -> list:
    """Up to ``count`` cells, spread over the kernels (round robin), the same ones for the same input."""
    by_kernel: dict[str, list] = {}
    for cell in sorted(cells, key=lambda c: c.path):
        by_kernel.setdefault(cell.kernel, []).append(cell)
    rng = random.Random(seed)
    for group in by_kernel.values():
        rng.shuffle(group)
    chosen: list = []
    while len(chosen) < count and any(by_kernel.values()):
        for kernel in sorted(by_kernel):
            if by_kernel[kernel] and len(chosen) < count:
                chosen.append(by_kernel[kernel].pop())
    return chosen


def itself(spec: KernelSpec, backend: str, scratch: Path) -> KernelSpec:
    """The kernel's second self: a source kernel's files as a kernel of their own (a module of its
    own, as a previous version is); any other kernel, itself."""
    if backend != "cuda" or spec.source is None or spec.library:
        return spec
    folder = scratch / spec.name
    name = copy_kernel_version(spec.name, "self", file_contents(spec.files(backend), root=REPO_ROOT), folder)
    return read_kernel_folder(folder)[name]


def check_verdicts(args: argparse.Namespace, console: Console) -> int:
    try:
        folder = device_folder(args.results, args.device)
        config = _config(args.configfile, folder)
        connection = store.open_for_reading(store.database_path(folder))
    except (UserError, CompareError, store.HistoryUnavailable) as error:
        console.warn(f"error: {error}")
        return 2
    try:
        finished = store.runs(connection)
        if not finished:
            console.warn(f"error: {folder}: no run recorded yet: run snakemake first")
            return 2
        run_id = finished[-1][0]
        measured = {m.cell for m in store.measurements(connection, run_ids=[run_id]) if m.status == "ok"}
    finally:
        connection.close()
    backend_name = choose_backend(config["backend"]).backend
    cells = [c for c in build_cells(config, backend_name, folder.name) if c.path in measured]
    if not cells:
        console.warn(f"error: no ok cell of run {run_id} is in this config's grid: give the --configfile of that run")
        return 2
    _, threshold, precision, budget_s = pair_settings(config)
    backend = get_backend(backend_name)
    calls: Counter = Counter()
    halves: list[float] = []
    refused: list[str] = []
    neighbours: set[str] = set()
    chosen = sample(cells, args.cells)
    with tempfile.TemporaryDirectory(prefix="convlab-self-") as scratch, exclusive_device(backend.device_key()):
        copies: dict[str, KernelSpec] = {}
        for cell in chosen:
            if cell.kernel not in copies:
                copies[cell.kernel] = itself(get_kernel(cell.kernel), backend_name, Path(scratch))
            try:
                result = measure_pair(cell, cell.image or None, copies[cell.kernel], precision, budget_s, backend)
            except PairRefused as why:
                refused.append(f"{cell.kernel}: {why}")
                continue
            calls[verdict_of_interval(result.low, result.high, threshold)] += 1
            halves.append((math.log(result.high) - math.log(result.low)) / 2)
            if result.neighbours:
                neighbours.update(result.neighbour_names.split(";"))
    timed = sum(calls.values())
    false_calls = calls["FASTER"] + calls["SLOWER"]
    device = backend.device_info()
    console.say(f"self-check: {timed} cells of {folder.name} (run {run_id}) measured side by side with themselves on "
                f"{device.get('gpu_uuid') or device['device']}: " + ", ".join(f"{n} {w}" for w, n in calls.most_common())
                + f"; false calls {false_calls} of {timed} ({false_calls / max(timed, 1):.0%})")
    if halves:
        half = statistics.median(halves)
        smallest = (1 + threshold) * math.exp(half) - 1
        console.say(f"  the interval's half-width: median ±{math.expm1(half):.2%}, widest ±{math.expm1(max(halves)):.2%}: "
                    f"a change of {smallest:.1%} or more is called (threshold {threshold:.0%})")
    for why in refused[:5]:
        console.say(f"  not measured: {why}")
    too_noisy = []
    if false_calls:
        too_noisy.append(f"{false_calls} unchanged cells were called FASTER or SLOWER")
    if neighbours:
        too_noisy.append(f"other processes used the GPU ({', '.join(sorted(neighbours))})")
    if not timed:
        too_noisy.append("no cell could be measured side by side with itself")
    if too_noisy:
        console.warn("error: too noisy for `convlab compare --fail-on slower`: " + "; ".join(too_noisy))
        return 1
    console.say("  quiet enough for `convlab compare --fail-on slower`")
    return 0
