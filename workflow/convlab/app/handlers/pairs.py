"""`pair`: a run's re-measured cells whose kernel files changed, each measured side by side with
its previous kernel version on the device (in the device's worker, under its lock;
convlab.pairs.pairmeasure), into verdicts/paired.csv for the record step."""

from __future__ import annotations

import argparse
import time
from collections import Counter

from convlab.console import Console
from convlab.history.pairfile import write_pairs
from convlab.pairs.pairmeasure import refusal_kind, run_pairs
from convlab.plan.gridfile import read_grid


def pair(args: argparse.Namespace, console: Console) -> int:
    started = time.perf_counter()
    grid = read_grid(args.grid)
    rows, own_s = run_pairs(grid.config, grid.cells, args.backend, args.results, args.run_id)
    write_pairs(args.out, rows)
    measured = sum(row.measured for row in rows)
    if rows:
        console.say(f"paired: {measured} of {len(rows)} cells whose kernel files changed measured side by side with "
                    f"their previous version in {time.perf_counter() - started:.2f} s (their own measurements this "
                    f"run: {own_s:.2f} s)")
    else:
        console.say("paired: no re-measured cell's kernel files changed")
    for note, count in sorted(Counter(refusal_kind(row.note) for row in rows if row.note).items()):
        console.say(f"  not paired: {count} {'cell' if count == 1 else 'cells'}: {note} (each cell's reason: {args.out})")
    return 0
