"""`bench-pipeline`: the pipeline benchmark (convlab.bench.pipeline), run in the job's own process:
a full Snakemake run of a checkout's copy against a bare Snakemake of as many jobs, as a table.
`bench-history`: what a grown results database costs the runs after it (convlab.bench.history)."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from convlab.atomicfile import write_text_atomically
from convlab.bench.history import benchmark_history
from convlab.bench.history import format_table as history_table
from convlab.bench.pipeline import benchmark_pipeline, scratch_folder
from convlab.bench.pipelinefigures import format_table, pipeline_figures, targets
from convlab.console import Console
from convlab.paths import REPO_ROOT
from convlab.status import UserError


def snakemake_options(extra: list[str]) -> list[str]:
    """The options after ``--``, for both Snakemake runs."""
    if extra and extra[0] == "--":
        return extra[1:]
    if extra:
        raise UserError(f"unexpected {' '.join(extra)}: Snakemake's options go after --")
    return []


def bench_pipeline(args: argparse.Namespace, console: Console) -> int:
    """The table on standard output, progress on standard error; the figures as JSON with --out."""
    extra = snakemake_options(args.extra)
    checkout = Path(args.checkout or REPO_ROOT).resolve()
    if not (checkout / "Snakefile").is_file():
        raise UserError(f"--checkout {checkout}: no Snakefile there")
    scratch = scratch_folder(args.keep)
    # the scratch folder stays where a run failed: its log is what the error line names
    result = benchmark_pipeline(checkout, args.configfile, args.cores, extra, scratch, say=console.warn)
    if not result.cells:
        raise UserError(f"the run wrote no cell rows with times under {scratch / 'checkout' / 'results'}")
    figures = pipeline_figures(result.cells, result.runs)
    options = " ".join(["--configfile", args.configfile, "--cores", str(args.cores), *extra])
    heading = "\n".join(filter(None, [f"pipeline benchmark: {checkout}, {options}", result.backend_line]))
    console.say(format_table(figures, heading))
    for path in result.skipped:
        console.warn(f"warning: no times in {path}: left out")
    if args.out:
        record = {"checkout": str(checkout), "configfile": args.configfile, "cores": args.cores, "extra": extra,
                  "backend": result.backend_line,
                  **figures, "targets": [{"target": t.text, "value": t.value, "limit": t.limit, "met": t.met}
                                         for t in targets(figures)]}
        write_text_atomically(args.out, json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    if args.keep is None:
        shutil.rmtree(scratch, ignore_errors=True)
    else:
        console.warn(f"kept: {scratch}")
    return 0


def bench_history(args: argparse.Namespace, console: Console) -> int:
    """The table on standard output, progress on standard error."""
    checkout = Path(args.checkout or REPO_ROOT).resolve()
    if not (checkout / "Snakefile").is_file():
        raise UserError(f"--checkout {checkout}: no Snakefile there")
    if args.rows < 1 or args.rounds < 1:
        raise UserError("--rows and --rounds must be at least 1")
    scratch = scratch_folder(args.keep)
    timings, grown = benchmark_history(checkout, args.configfile, args.kernel, args.rows, args.rounds, args.cores,
                                       scratch, say=console.warn)
    heading = (f"history benchmark: {checkout}, --configfile {args.configfile} --cores {args.cores}, "
               f"an edit of kernels/{args.kernel}.yaml each round")
    console.say(history_table(timings, grown, heading))
    if args.keep is None:
        shutil.rmtree(scratch, ignore_errors=True)
    else:
        console.warn(f"kept: {scratch}")
    return 0
