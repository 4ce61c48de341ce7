"""`compare`: two result sets cell by cell (a summary, a folder or a state of the results
database), as a report and a CI gate."""

from __future__ import annotations

import argparse

from convlab.console import Console
from convlab.history.compare import CompareError, compare_result_sets
from convlab.history.sides import LATEST, NothingBefore, load_side
from convlab.history.verdictpolicy import DRIFT_FLOOR
from convlab.report.comparepage import write_comparison_page


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
