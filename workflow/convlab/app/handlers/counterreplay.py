"""`counters-replay`: inside Nsight Compute, each planned cell's profiled launch, under the
device's lock (the `counters` step starts it; convlab.run.counterreplay)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from convlab.app.console import Console
from convlab.backends import get_backend
from convlab.backends.devicelock import exclusive_device
from convlab.plan import pictures
from convlab.plan.cell import Cell
from convlab.run.counterreplay import as_timed, replay_cells

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
