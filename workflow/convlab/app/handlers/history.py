"""The results database: `record` adds a run's new rows and writes its verdicts, `history` lists a
device's runs or a kernel's or cell's measurements, `compare` sets two result sets side by side,
and `history-page` draws the report's history figure and page."""

from __future__ import annotations

import argparse

from convlab.console import Console
from convlab.history.compare import CompareError, compare_result_sets
from convlab.history.listing import history_lines
from convlab.history.pairfile import read_pairs
from convlab.history.record import record as record_rows
from convlab.history.sides import LATEST, NothingBefore, device_folder, load_side
from convlab.history.verdictpolicy import DRIFT_FLOOR, VerdictPolicy
from convlab.plan.gridfile import read_grid
from convlab.report.comparepage import write_comparison_page
from convlab.report.historypage import write_history_page


def compare(args: argparse.Namespace, console: Console) -> int:
    """Two result sets cell by cell. A report: exit 0 whatever the verdicts, unless --fail-on
    slower, which exits 1 when any cell is SLOWER (a CI gate)."""
    if args.retired_threshold is not None:
        raise CompareError(f"--threshold is now --floor (the drift floor, {DRIFT_FLOOR:g} unless given); the "
                           "threshold is config verdicts.threshold, the change a run's pairs are judged by")
    try:
        a = load_side(args.a, args.results, args.device)
    except NothingBefore as first:
        if args.b != LATEST:
            raise
        # the gate after a first run: nothing to compare yet is no failure
        console.say(f"compare: {first}: nothing to compare yet; the run that measures cells again makes a "
                    "previous one to compare with")
        return 0
    b = load_side(args.b, args.results, args.device)
    comparison = compare_result_sets(a, b, args.out, args.floor)
    page = write_comparison_page(comparison, args.html)
    console.say(f"{comparison.text}\nwrote {comparison.out} and {page}")
    if comparison.neighboured:
        console.warn(f"warning: {comparison.neighboured} cells were timed while other processes used the GPU: "
                     "their FASTER/SLOWER are UNCLEAR, and --fail-on slower does not fail on them")
    if args.fail_on == "slower" and comparison.slower:
        console.warn(f"error: {comparison.slower} cells are SLOWER (--fail-on slower)")
        return 1
    return 0


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


def history_page(args: argparse.Namespace, console: Console) -> int:
    console.say(write_history_page(args.results, args.verdicts, args.figure, args.out))
    return 0
