"""`compare`: two result sets cell by cell (a summary, a folder or a state of the results
database), as a report and a CI gate."""

from __future__ import annotations

import argparse
from dataclasses import replace

from convlab.atomicfile import write_text_atomically
from convlab.console import Console
from convlab.history import store
from convlab.history.compare import CompareError, Comparison, cell_names, compare_result_sets
from convlab.history.sides import LATEST, NothingBefore, is_database_side, load_side
from convlab.history.verdictpolicy import DRIFT_FLOOR
from convlab.pairs.comparewhy import configured_grid, explain_comparison, with_why_columns
from convlab.pairs.whyprofile import WhyProfiler
from convlab.report.comparepage import write_comparison_page


def compare(args: argparse.Namespace, console: Console) -> int:
    """Two result sets cell by cell. A report: exit 0 whatever the verdicts, unless --fail-on
    slower, which exits 1 when any cell is SLOWER (a CI gate)."""
    if args.retired_threshold is not None:
        raise CompareError(f"--threshold is now --floor (the drift floor, {DRIFT_FLOOR:g} unless given); the "
                           "threshold is config verdicts.threshold, the change a run's pairs are judged by")
    if args.why and not all(is_database_side(side) for side in (args.a, args.b)):
        raise CompareError("--why compares two states of the results database (@previous, @latest, a run id or a "
                           "commit): a summary file does not keep the kernel files its cells ran")
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
    if args.why:
        comparison = explained(comparison, args)
    page = write_comparison_page(comparison, args.html)
    console.say(f"{comparison.text}\nwrote {comparison.out} and {page}")
    if comparison.neighboured:
        console.warn(f"warning: {comparison.neighboured} cells were timed while other processes used the GPU: "
                     "their FASTER/SLOWER are UNCLEAR, and --fail-on slower does not fail on them")
    if args.fail_on == "slower" and comparison.slower:
        console.warn(f"error: {comparison.slower} cells are SLOWER (--fail-on slower)")
        return 1
    return 0


def explained(comparison: Comparison, args: argparse.Namespace) -> Comparison:
    """The comparison with each FASTER or SLOWER cell's why (both versions restored from the
    database and profiled on this machine's GPU), in its CSV, its page and a line under its table."""
    try:
        folder = store.device_folder(args.results, args.device)
        connection = store.open_for_reading(store.database_path(folder))
    except store.HistoryUnavailable as error:
        raise CompareError(str(error)) from None
    try:
        grid, backend = configured_grid(args.configfile, folder)
        found = explain_comparison(comparison.table, connection, grid, WhyProfiler(backend))
    finally:
        connection.close()
    table = with_why_columns(comparison.table, found)
    write_text_atomically(comparison.out, table.to_csv(index=False))
    names = cell_names(table)
    if not found.by_row:
        lines = ["why: no cell is FASTER or SLOWER: nothing to explain"]
    else:
        lines = [f"why, from both versions' hardware counts on this machine's GPU ({found.explained} of "
                 f"{len(found.by_row)} FASTER/SLOWER cells explained, {found.seconds:.1f} s):"]
        lines += [f"  {names[index]}: {table.loc[index, 'why']}" for index in sorted(found.by_row)]
    return replace(comparison, table=table, cells=[*comparison.cells, "", *lines])
