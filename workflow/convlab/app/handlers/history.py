"""The results database: `record` adds a run's new rows and writes its verdicts, `history` lists a
device's runs or a kernel's or cell's measurements. Neither imports pandas or matplotlib: `compare`
and `history-page`, which do, have modules of their own."""

from __future__ import annotations

import argparse

from convlab.console import Console
from convlab.history.listing import history_lines
from convlab.history.pairfile import read_pairs
from convlab.history.record import record as record_rows
from convlab.history.store import device_folder
from convlab.history.verdictpolicy import VerdictPolicy
from convlab.plan.gridfile import read_grid


def record(args: argparse.Namespace, console: Console) -> int:
    """Add the run's new rows to the device's results database and write its verdicts."""
    grid = read_grid(args.grid)
    policy = VerdictPolicy.from_config(grid.config)
    recorded = record_rows(args.results, grid.cells, args.device, policy.threshold, run_id=args.run_id or None,
                           pairs=read_pairs(args.pairs), config=grid.config)
    for warning in recorded.warnings:
        console.warn(f"warning: {warning}")
    console.say(f"run {recorded.run_id}: {len(recorded.verdicts)} new rows, {recorded.added} added to the database")
    console.say("\n".join(recorded.lines))
    return 0


def history(args: argparse.Namespace, console: Console) -> int:
    """A device's runs, or a kernel's or cell's measurements over time."""
    console.say("\n".join(history_lines(device_folder(args.results, args.device), args.kernel, args.cell, args.limit)))
    return 0
