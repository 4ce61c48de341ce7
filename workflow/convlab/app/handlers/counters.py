"""`counters`: the hardware counters of every ok cell of a device's grid, into
results/<device>/counters.csv (convlab.run.nsightprofile reads them); and `counters-replay`, the
process Nsight Compute profiles: each planned cell's launch, under the device's lock
(convlab.run.counterreplay); and `why-replay`, the process Nsight Compute profiles for a verdict's
why: both versions of each pair (convlab.run.whyreplay).

Run by the device's worker after the cells (no cell of that GPU is measured meanwhile). A cell
that gets none stays ok, with the reason in `counters_reason`, and the step prints one warning
line; it fails only on its own bugs.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

from convlab.backends import get_backend, import_backend
from convlab.backends.devicelock import exclusive_device
from convlab.console import Console
from convlab.history.record import read_rows
from convlab.pictures import loading as pictures
from convlab.plan.cell import Cell
from convlab.plan.gridfile import read_grid
from convlab.run.counterreplay import as_timed, replay_cells
from convlab.run.nsightprofile import read_counters
from convlab.run.whyreplay import PairToExplain, replay_pairs, wait_for_plan


def counters(args: argparse.Namespace, console: Console) -> int:
    started = time.perf_counter()
    grid = read_grid(args.grid)
    results = Path(args.results)
    ok = [(cell, row) for cell, row in read_rows(grid.cells) if row.get("status") == "ok"]
    every_stall = grid.config.get("counter_stalls") == "every"
    table, read_now, profiled = read_counters(ok, results, Path(args.out), args.backend, every_stall)
    if profiled.kernels:
        whose = "" if every_stall else " the findings speak for"
        console.say(f"Nsight Compute profiled {profiled.kernels} kernels, in {'/'.join(map(str, profiled.passes))} "
                    f"passes each: every cell read now in {profiled.seconds:.1f} s, the stall counters of "
                    f"{profiled.stall_cells} cells{whose} in {profiled.stall_seconds:.1f} s")
    if profiled.stall_reason:
        console.say(f"counters: no stall counters: {profiled.stall_reason}")
    missing = Counter(str(row.get("counters_reason")) for row in table if row.get("counters_reason"))
    with_counters = len(table) - sum(missing.values())
    console.say(f"counters: {with_counters} of {len(table)} ok cells have hardware counters "
                f"({read_now} read now, {len(table) - read_now} kept; {time.perf_counter() - started:.1f} s)")
    if missing:
        top, count = missing.most_common(1)[0]
        console.warn(f"warning: counters: {sum(missing.values())} of {len(table)} ok cells have none; {count} "
                     f"because {top}")
    return 0


PICTURES_KEPT = 2
PROBLEMS_KEPT = 4  # as many as a service worker keeps (at most KEPT_BYTES together)


def counters_replay(args: argparse.Namespace, console: Console) -> int:
    pictures.PICTURES.capacity = PICTURES_KEPT  # the cells are replayed in the order of their problems
    plan = [(as_timed(Cell.from_json(item["spec"]), item.get("engine", "")), item["image"] or None)
            for item in json.loads(Path(args.plan).read_text())]
    backend = get_backend("cuda")
    with exclusive_device(backend.device_key()):
        reasons = replay_cells(plan, backend, PROBLEMS_KEPT)
    Path(args.reasons).write_text(json.dumps(reasons))
    console.say(f"replayed {len(plan) - len(reasons)} of {len(plan)} cells")
    return 0


def why_replay(args: argparse.Namespace, console: Console) -> int:
    plan = Path(args.plan)
    if args.wait_for_plan:
        import_backend("cuda")  # while it waits; the device is touched once the plan has come
    if args.wait_for_plan and not wait_for_plan(plan, args.parent):
        console.say("why-replay: no plan came before the process that started it left: nothing replayed")
        return 0
    pairs = [PairToExplain.from_json(item) for item in json.loads(plan.read_text())]
    backend = get_backend("cuda")
    with exclusive_device(backend.device_key()):
        reasons = replay_pairs(pairs, backend)
    Path(args.reasons).write_text(json.dumps(reasons))
    console.say(f"replayed both versions of {len(pairs) - len(reasons)} of {len(pairs)} pairs")
    return 0
