"""The report: the summary of the cells' rows, the figures, the seeds' comparison, figures and
tables, the roofline, the findings page and the page comparing devices."""

from __future__ import annotations

import argparse

from convlab.atomicfile import write_text_atomically
from convlab.console import Console
from convlab.history.summary import read_summary
from convlab.report.aggregate import aggregate as aggregate_rows
from convlab.report.aggregate import write_slice
from convlab.report.counterfindings import render_counters
from convlab.report.figures import render_files
from convlab.report.findings import write_findings
from convlab.report.gpus import write_gpus_page
from convlab.report.roofline import render_roofline
from convlab.report.seedcompare import comparison_from_files, join_comparisons, read_comparison
from convlab.report.seedfigures import render_seed_figure
from convlab.report.seedtable import seed_table_html
from convlab.status import UserError


def aggregate(args: argparse.Namespace, console: Console) -> int:
    if args.slice:
        by_status = write_slice(args.cells, args.out)
        console.say(f"{args.out}: {sum(by_status.values())} rows; by status: {by_status}")
        return 0
    summary, warnings = aggregate_rows(args.cells, args.out, slices=args.slices)
    for warning in warnings:
        console.warn(warning)
    console.say(f"{args.out}: {len(summary)} rows; by status: {summary['status'].value_counts().to_dict()}")
    return 0


def figures(args: argparse.Namespace, console: Console) -> int:
    render_files(args.summary, args.outdir, args.figure)
    return 0


def seed_compare(args: argparse.Namespace, console: Console) -> int:
    if args.parts:
        write_text_atomically(args.out, join_comparisons(args.parts))
        table = read_comparison(args.out)
    else:
        missing = [f"--{name}" for name in ("seeds", "map", "summary") if getattr(args, name) is None]
        if missing:
            raise UserError(f"seed-compare needs {', '.join(missing)} (or --parts to join families' comparisons)")
        table = comparison_from_files(args.seeds, args.map, args.summary, args.family, args.bandwidth)
        write_text_atomically(args.out, table.to_csv(index=False))
    console.say(f"{args.out}: {len(table)} seed numbers; this run's status: "
                f"{table['this_status'].value_counts().to_dict()}")
    return 0


def seed_figure(args: argparse.Namespace, console: Console) -> int:
    console.say(str(render_seed_figure(read_comparison(args.comparison), read_summary(args.summary), args.seed,
                                       args.figure, args.out)))
    return 0


def seed_table(args: argparse.Namespace, console: Console) -> int:
    console.say(str(seed_table_html(read_comparison(args.comparison), args.seed, args.out)))
    return 0


def roofline(args: argparse.Namespace, console: Console) -> int:
    console.say(str(render_roofline(args.summary, args.bandwidth, args.ceiling, args.out)))
    return 0


def counters_report(args: argparse.Namespace, console: Console) -> int:
    lines, seeds = render_counters(args.summary, args.counters, args.bandwidth, args.ceiling, args.figure, args.out)
    console.say(f"{args.out}: {len(lines)} findings from hardware counters")
    console.say("\n".join(lines))
    for argument, found in seeds:
        console.say("\n".join([argument, *found]))
    return 0


def findings(args: argparse.Namespace, console: Console) -> int:
    console.say(str(write_findings(args.summary, args.comparison, args.bandwidth, args.ceiling, args.out)))
    return 0


def gpus(args: argparse.Namespace, console: Console) -> int:
    console.say(str(write_gpus_page(args.results, args.out)))
    return 0
