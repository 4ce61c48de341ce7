"""`pair`: a run's re-measured cells whose kernel files changed, each measured side by side with
its previous kernel version on the device (in the device's worker, under its lock;
convlab.pairs.pairmeasure), into verdicts/paired.csv for the record step."""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter

from convlab.console import Console
from convlab.history.pairfile import write_pairs
from convlab.pairs.pairmeasure import refusal_kind, run_pairs


def pair(args: argparse.Namespace, console: Console) -> int:
    config = json.loads(args.config)
    started = time.perf_counter()
    rows, own_s = run_pairs(config, args.backend, args.device, args.results, args.run_id)
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
