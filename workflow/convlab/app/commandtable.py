"""The command table: every ``python -m convlab`` command, its arguments, its handler and where it
runs. The command line (convlab.app.cli) and the service's workers (convlab.service.worker)
both parse with it. A new command is one entry here, its handler (convlab.app.handlers), its place
if it does not run in the job's own process and, if a rule runs it, its rule.

Where a command runs is convlab.app.PLACES's, by name, which a job reads without this table's
imports: JOB in the process that was started; CELL measured by a device's worker, the job its thin
client; DEVICE on the worker of the backend it names (its entry's ``pool``); TOOLS on a tools
worker. With CONVLAB_SERVICE=off every command runs in its own process. Arguments marked
``path=True`` are files or folders, taken relative to the job's directory wherever the command runs.

Standard library only: every job reads this table before it knows whether it needs site-packages.
"""

from __future__ import annotations

import argparse
import json
from typing import NoReturn

from convlab.app.command import Argument, Command, arg, file_arg, file_args, parser_of
from convlab.history.verdictpolicy import DRIFT_FLOOR, LAUNCH_BOUND_FLOOR, LAUNCH_BOUND_MS
from convlab.paths import DEFAULT_CONFIG
from convlab.report.figuretable import NAMES as FIGURE_NAMES
from convlab.report.seeds import SEEDS, figure_names
from convlab.service.cellrequest import OPTIONS as CELL_OPTIONS

DESCRIPTION = """convlab: the 2D-convolution lab's commands. The lab itself is a Snakemake workflow
(`snakemake --cores 1` in the checkout); these run a cell by hand, compare and watch results,
benchmark, and serve the measurements. For example:

  convlab run --kernel direct --size 1024 --stride 2 --block 16
  convlab compare @previous @latest
"""
# What the workflow's rules (and other commands: watch, compile-ahead, Nsight Compute) run: listed
# apart in --help, as the user seldom types them.
WORKFLOW_STEPS = frozenset({
    "cell", "compile-kernels", "source", "downscale", "aggregate", "figures", "gallery", "seed-compare",
    "seed-figure", "seed-table", "roofline", "counters-report", "findings", "gpus", "pair", "counters",
    "counters-replay", "why-replay", "record", "preview", "history-page"})

HANDLERS = "convlab.app.handlers"


def backend_option(args: argparse.Namespace) -> str:
    """The pool of a device-wide measurement: the backend it names."""
    return args.backend


def spec_backend(args: argparse.Namespace) -> str:
    """The pool of a command given one cell: the cell's backend."""
    return json.loads(args.spec).get("backend", "cpu")


def device_grid_args(results_help: str = "results/<device>", planned: bool = True) -> tuple[Argument, ...]:
    """The arguments of a step over one device's grid (pair, counters, record, preview): the device's
    results folder, the backend, the device label and the grid: a run's step reads the grid file the
    run planned (convlab.plan.gridfile); a preview builds it from the config and the kernels' files as
    they are now."""
    grid = (file_arg("--grid", help="the grid file the run wrote as it started (its config and this device's cells)")
            if planned else arg("--config", required=True, help="the validated config as JSON"))
    return (file_arg("--results", help=results_help),
            arg("--backend", required=True, choices=["cuda", "cpu"]),
            arg("--device", required=True),
            grid)


def cell_arguments() -> tuple[Argument, ...]:
    """The cell command's arguments: the options of a cell request (convlab.service.cellrequest), by
    which the job's thin entry parses the rule's line without this table."""
    return tuple(arg(f"--{name}", path=path, required=required, **({"help": text} if text else {}))
                 for name, (required, path, text) in CELL_OPTIONS.items())


def cell_options(args: argparse.Namespace) -> dict[str, str | None]:
    """A parsed cell line's options, by name, as the one way in for a cell request takes them
    (convlab.app.cellentry.send_cell)."""
    return {name: getattr(args, name) for name in CELL_OPTIONS}


SIDE = ("a summary CSV, a folder holding summary.csv, or a state of the results database: a run id, a commit, "
        "@latest or @previous")

# In the order `python -m convlab --help` lists them.
TABLE: tuple[Command, ...] = (
    Command("run", "run cells by hand and print their rows", f"{HANDLERS}.cells:run", (
        arg("--kernel", required=True),
        arg("--size", type=int, required=True),
        arg("--stride", type=int, default=1),
        arg("--filter-size", type=int),
        arg("--block", type=int, help="2-D block edge for kernels that take one (e.g. 64 to see a refused launch)"),
        arg("--plan", choices=["heuristic", "best"], help="cuDNN plan choice"),
        arg("--backend", choices=["auto", "cuda", "cpu"]),
        arg("--config", path=True, default=str(DEFAULT_CONFIG)),
        arg("--image", path=True, help="default: data/input_<size>.png"),
        arg("--out", path=True, help="write the row(s) as CSV here"),
    )),
    # A cell job starts at a thin entry of its own (convlab.app.cellentry): it parses the rule's line by the
    # same options without this table and sends the cell to the service.
    Command("cell", "run one cell of the grid (called by Snakemake)", f"{HANDLERS}.service:cell", cell_arguments()),
    Command("serve", "the measurement service (cell jobs start it themselves)", f"{HANDLERS}.service:serve", (
        arg("--idle-timeout", type=float, default=60.0, help="seconds without a cell before it exits"),
        arg("--status", action="store_true", help="print the running service's identity and workers"),
        arg("--stop", action="store_true", help="ask the running service to finish its cells and exit"),
        arg("--quiet", action="store_true", help="with --stop: say nothing when no service runs"),
        # started by a cell job, which holds the start lock and names the socket
        arg("--spawned", metavar="KEY", help=argparse.SUPPRESS),
    ), standard_library=True),
    Command("bandwidth", "measure device-to-device copy bandwidth", f"{HANDLERS}.device:bandwidth", (
        arg("--backend", required=True, choices=["cuda", "cpu"]),
        file_arg("--out"),
    ), pool=backend_option),
    Command("ceiling", "measure the FP32 compute ceiling (library SGEMM, no TF32)", f"{HANDLERS}.device:ceiling", (
        arg("--backend", required=True, choices=["cuda", "cpu"]),
        file_arg("--out"),
    ), pool=backend_option),
    Command("compile-kernels", "compile the grid's kernels ahead of its cells, in parallel, into a worker and CuPy's "
            "disk cache", f"{HANDLERS}.device:compile_kernels", (
        file_arg("--grid", help="the grid file the run wrote as it started (its config and one device's cells)"),
        arg("--backend", required=True, choices=["cuda", "cpu"]),
        file_arg("--out", help="a JSON record: modules compiled, already cached, failed, seconds, threads"),
    ), pool=backend_option),
    Command("bench", "floor benchmark: ours vs cuDNN vs naive vs a copy, printed ratios", f"{HANDLERS}.device:bench", (
        arg("--sizes", type=int, nargs="*", default=[128, 256, 512, 1024, 2048, 4096],
            help="image sizes of the floor benchmark (none: skip it)"),
        arg("--strides", type=int, nargs="+", default=[1, 2, 3]),
        arg("--gemm-sizes", type=int, nargs="*", default=[4096, 8192], help="SGEMM sizes timed against cuBLAS (none: skip)"),
        arg("--data", path=True, default="data", help="folder with input_<size>.png"),
        arg("--out", path=True, default="results/benchmark/floor_cuda.csv", help="CSV; a .txt table beside it"),
        arg("--gemm-out", path=True, default="results/benchmark/sgemm_cuda.csv", help="the SGEMM rows' CSV"),
    )),
    Command("bench-pipeline", "pipeline benchmark: a full Snakemake run of a checkout's copy against a bare "
            "Snakemake of as many jobs", f"{HANDLERS}.benchpipeline:bench_pipeline", (
        arg("--configfile", default="config/config.yaml", help="relative to the checkout (default: %(default)s)"),
        arg("--cores", type=int, default=1),
        arg("--checkout", path=True, help="the checkout to benchmark (default: this one)"),
        arg("--keep", path=True, help="keep the scratch folder here (default: a temporary one, removed)"),
        arg("--out", path=True, help="write the figures as JSON too"),
        arg("extra", nargs=argparse.REMAINDER, help="after --: options for both Snakemake runs"),
    )),
    Command("bench-history", "history benchmark: the run after an edit, `history` and `compare` with a results "
            "database grown to a year of rows, side by side with a fresh one", f"{HANDLERS}.benchpipeline:bench_history", (
        arg("--configfile", default="config/tiny-cpu.yaml", help="relative to the checkout (default: %(default)s)"),
        arg("--kernel", default="direct", help="the kernel whose description each round edits (default: %(default)s)"),
        arg("--rows", type=int, default=200_000, help="rows of the grown database (default: %(default)s)"),
        arg("--rounds", type=int, default=3, help="edits timed on each side (default: %(default)s)"),
        arg("--cores", type=int, default=1),
        arg("--checkout", path=True, help="the checkout to benchmark (default: this one)"),
        arg("--keep", path=True, help="keep the scratch folder here (default: a temporary one, removed)"),
    )),
    Command("shared-memory", "count the cuda grid's cells that need more than 48 KiB of shared memory per block "
            "(no GPU needed)", f"{HANDLERS}.cells:shared_memory", (
        arg("--config", path=True, default=str(DEFAULT_CONFIG)),
    )),
    Command("source", "make the square source image", f"{HANDLERS}.pictures:source", (
        arg("--size", type=int, required=True),
        arg("--user-image", path=True),
        file_arg("--out"),
    )),
    Command("downscale", "scale the source to one size", f"{HANDLERS}.pictures:downscale", (
        file_arg("--source"),
        arg("--size", type=int, required=True),
        file_arg("--out"),
    )),
    Command("aggregate", "collect cell rows into the summary CSV, or into one family's slice of it",
            f"{HANDLERS}.report:aggregate", (
        file_arg("--out"),
        arg("cells", path=True, nargs="*", help="cell rows (with --slices: families' slices)"),
        arg("--slice", action="store_true",
            help="write the rows as a family's slice of the summary (summary/<family>.csv): as the cells wrote them, "
                 "in the summary's order, without its warnings"),
        arg("--slices", action="store_true", help="the files are families' slices, joined into the whole summary"),
    )),
    Command("figures", "render the report figures from the summary", f"{HANDLERS}.report:figures", (
        *file_args("--summary", "--outdir"),
        arg("--figure", choices=FIGURE_NAMES,
            help="render this one only, into its file (convlab/report/figuretable.py); default: all of them (the "
                 "report runs one job per figure)"),
    )),
    Command("gallery", "save one kernel's edge map as an image", f"{HANDLERS}.device:gallery", (
        arg("--spec", required=True),
        *file_args("--image", "--out"),
    ), pool=spec_backend),
    Command("seed-compare", "join the seeds' numbers with this run's (report stage)",
            f"{HANDLERS}.report:seed_compare", (
        arg("--seeds", path=True, help="config/seeds/seed_tables.csv"),
        arg("--map", path=True, help="config/seeds/method_map.yaml"),
        arg("--summary", path=True, help="the summary, or with --family that family's slice of it"),
        arg("--family", help="compare only the seeds this experiment family reproduces"),
        arg("--bandwidth", path=True, help="the device's copy bandwidth JSON: names this run's device where the "
                                           "summary has no row"),
        arg("--parts", path=True, nargs="+", help="instead: join these families' comparisons into one"),
        file_arg("--out"),
    )),
    Command("seed-figure", "one figure of a seed (report stage)", f"{HANDLERS}.report:seed_figure", (
        arg("--seed", required=True, choices=list(SEEDS)),
        arg("--figure", required=True, choices=figure_names(), help="one of the seed's figures (convlab/report/seeds.py)"),
        *file_args("--comparison", "--summary", "--out"),
    )),
    Command("seed-table", "one seed's table page (report stage)", f"{HANDLERS}.report:seed_table", (
        arg("--seed", required=True, choices=list(SEEDS)),
        *file_args("--comparison", "--out"),
    )),
    Command("roofline", "roofline of every ok cell (report stage)", f"{HANDLERS}.report:roofline", (
        *file_args("--summary", "--bandwidth", "--ceiling", "--out"),
    )),
    Command("counters-report", "the measured roofline and the findings of the hardware counters (report stage)",
            f"{HANDLERS}.report:counters_report", (
        *file_args("--summary", "--counters", "--bandwidth", "--ceiling", "--figure", "--out"),
    )),
    Command("findings", "findings page computed from the data (report stage)", f"{HANDLERS}.report:findings", (
        *file_args("--summary", "--comparison", "--bandwidth", "--ceiling", "--out"),
    )),
    Command("gpus", "the page comparing every device under results/ (report stage)", f"{HANDLERS}.report:gpus", (
        arg("--results", path=True, default="results", help="the folder holding one folder per device"),
        file_arg("--out"),
    )),
    Command("compare", "compare two result sets cell by cell (B/A and a verdict)", f"{HANDLERS}.compare:compare", (
        # a side is a path or a name in the database: resolved by the handler, which runs here
        arg("a", metavar="A", help=SIDE),
        arg("b", metavar="B", help="the same, for the set compared with A"),
        arg("--out", path=True, help="the per-cell CSV (default: compare_<A>_vs_<B>.csv beside A's summary)"),
        arg("--html", path=True, help="the report page (default: the CSV's path with .html)"),
        arg("--floor", type=float, default=DRIFT_FLOOR,
            help=f"the drift floor: the relative change below which a cell is SAME whatever its spread (a "
                 f"fraction; default {DRIFT_FLOOR:g}, at least {LAUNCH_BOUND_FLOOR:g} where a side runs under "
                 f"{LAUNCH_BOUND_MS:g} ms)"),
        # the drift floor's old name, refused by the handler with the new one (hidden from --help)
        arg("--threshold", type=float, dest="retired_threshold", help=argparse.SUPPRESS),
        arg("--fail-on", choices=["slower"], help="exit 1 when any cell is SLOWER"),
        arg("--results", path=True, default="results", help="the folder of device folders (default: results)"),
        arg("--device", help="the device label whose database a run, commit or @name reads "
                             "(default: the only one with a database)"),
        arg("--why", action="store_true", help="explain each FASTER or SLOWER cell by both versions' hardware "
            "counts: the kernel files A and B ran, restored from the database and profiled on this machine's GPU "
            "(Nsight Compute)"),
        arg("--configfile", action="append", default=[], help="with --why: a config laid over config/config.yaml, "
            "as snakemake's --configfile (repeatable), that gives the cells' problems; default: the config of the "
            "run that recorded last"),
    ), description="Exit status: 0 when compared (whatever the verdicts), 1 with --fail-on slower when a cell is "
                   "SLOWER, 2 for input that cannot be compared (one error: line)."),
    Command("pair", "measure each re-measured cell whose kernel files changed side by side with its previous "
            "version (before record)", f"{HANDLERS}.pairs:pair", (
        *device_grid_args(),
        arg("--run-id", default="", help="the run whose re-measured cells are paired"),
        file_arg("--out", help="the pairs (verdicts/paired.csv)"),
    ), pool=backend_option),
    Command("counters", "read every ok cell's hardware counters with Nsight Compute, from a replayed launch of each",
            f"{HANDLERS}.counters:counters", (
        *device_grid_args(),
        file_arg("--out", help="the counters of each ok cell (results/<device>/counters.csv)"),
    ), pool=backend_option),
    Command("counters-replay", "inside Nsight Compute: each planned cell's profiled launch (the counters step "
            "starts it)", f"{HANDLERS}.counters:counters_replay", (
        file_arg("--plan", help="the cells, as JSON"),
        file_arg("--reasons", help="where to write why a cell could not be replayed (JSON)"),
    )),
    Command("why-replay", "inside Nsight Compute: both versions of each pair a verdict explains (the pair step "
            "and the preview start it)", f"{HANDLERS}.counters:why_replay", (
        file_arg("--plan", help="the pairs, as JSON"),
        file_arg("--reasons", help="where to write why a pair could not be replayed (JSON)"),
        arg("--wait-for-plan", action="store_true", help="started ahead (a standby): wait for the plan's file "
            "before touching the GPU"),
        arg("--parent", type=int, help="with --wait-for-plan: leave, replaying nothing, once this process has gone"),
    )),
    Command("record", "add the run's new rows to the results database (report stage)", f"{HANDLERS}.history:record", (
        *device_grid_args(),
        arg("--run-id", default="", help="the run whose jobs measured the cells the verdicts are about "
                                        "(default: a new run, which measured none)"),
        arg("--pairs", path=True, help="the run's side-by-side measurements (verdicts/paired.csv, from pair)"),
    )),
    Command("check-verdicts", "an A/A self-check: a sample of the last run's cells measured side by side with "
            "themselves here now; the false-call rate and the smallest change a pair here calls",
            f"{HANDLERS}.selfcheck:check_verdicts", (
        arg("--configfile", action="append", default=[], help="a config laid over config/config.yaml, as "
            "snakemake's --configfile (repeatable); default: the config of the run that recorded last"),
        arg("--cells", type=int, default=24, help="how many cells to check (default 24, spread over the kernels)"),
        arg("--details", path=True, help="also write each cell's verdict, ratio, interval and sampling to this CSV"),
        arg("--results", path=True, default="results"),
        arg("--device", help="default: the only device with a results database"),
    ), description="Exit status: 0 when no cell was called FASTER or SLOWER and no other process used the GPU, 1 "
                   "when the host is too noisy for `compare --fail-on slower`, 2 for input that cannot be checked."),
    Command("watch", "preview each save of a kernel's files: compiled, verified and paired with its last recorded "
            "version, without a run and writing nothing under results/ (Ctrl-C stops)", f"{HANDLERS}.watch:watch", (
        arg("--configfile", action="append", default=[], help="a config laid over config/config.yaml, as "
            "snakemake's --configfile (repeatable)"),
        arg("--kernels", nargs="+", help="only these kernels of the configured grid"),
        arg("--sizes", type=int, nargs="+", help="only these sizes of the configured grid"),
        arg("--strides", type=int, nargs="+", help="only these strides of the configured grid"),
        arg("--once", action="store_true", help="one preview of the kernels whose files differ from their last "
            "recorded version, then exit"),
        arg("--fail-on", choices=["slower"], help="with --once: exit 1 when a cell is SLOWER, or its kernel does not "
            "compile or verify"),
        arg("--results", path=True, default="results", help="the folder of device folders (default: results)"),
        arg("--details", path=True, metavar="FILE", help="also write each preview's verdict per cell to FILE (a "
            "CSV with the columns of a run's verdicts/<run>.csv; not under --results)"),
        arg("--why", action=argparse.BooleanOptionalAction, default=None, help="explain each FASTER or SLOWER cell "
            "by both versions' hardware counts (Nsight Compute), said after the verdict (default: on a GPU, or where "
            "the config's verdicts.why asks)"),
    ), description="Exit status of --once: 0 when previewed (whatever the verdicts), 1 with --fail-on slower when a "
                   "cell is SLOWER or its kernel does not compile or verify, 2 for input that cannot be previewed "
                   "(one error: line), 130 when Ctrl-C stopped it. Without --once it watches until Ctrl-C, and "
                   "exits 0."),
    Command("preview", "one preview of kernels' cells against their last recorded version, recording nothing "
            "(watch runs it)", f"{HANDLERS}.preview:preview", (
        *device_grid_args("results/<device>: its database is read from a copy", planned=False),
        arg("--kernels", nargs="*", default=[], help="the kernels to preview (none: nothing is measured)"),
        arg("--sizes", type=int, nargs="+"),
        arg("--strides", type=int, nargs="+"),
        arg("--differing", action="store_true", help="only those of the kernels whose files differ from their last "
            "recorded version"),
        arg("--details", path=True, metavar="FILE", help="where the verdicts per cell go (a CSV)"),
        arg("--fail-on", choices=["slower"]),
        # the watch that asked: the preview stops once it has gone
        arg("--watcher", type=int, help=argparse.SUPPRESS),
        arg("--why-after", action="store_true", help="where the config asks for whys: profile them after the "
            "verdicts are said, for --collect-why to say"),
        arg("--collect-why", action="store_true", help="say the last --why-after preview's whys once profiled"),
    ), pool=backend_option),
    Command("history", "a device's runs, or a kernel's or cell's measurements over time",
            f"{HANDLERS}.history:history", (
        arg("--kernel", help="one kernel's measurements"),
        arg("--cell", help="the measurements of cells whose path contains this text"),
        arg("--limit", type=int, default=50,
            help="the most recent runs, or measurements of --kernel or --cell, shown (default 50)"),
        arg("--results", path=True, default="results"),
        arg("--device", help="default: the only device with a results database"),
    )),
    Command("history-page", "the report's history figure and page (report stage)", f"{HANDLERS}.historypage:history_page", (
        file_arg("--results", help="results/<device>"),
        file_arg("--verdicts", help="verdicts/latest.csv"),
        *file_args("--figure", "--out"),
    )),
)

COMMANDS: dict[str, Command] = {command.name: command for command in TABLE}


def build_parser() -> argparse.ArgumentParser:
    """The whole command line, one subcommand per entry of the table."""
    return parser_of(TABLE, DESCRIPTION, steps=WORKFLOW_STEPS)


class _NotThisWay(Exception):
    """A line the one command's parser refuses: the whole table's says why."""


class _OneCommandParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _NotThisWay(message)


def parse(argv: list[str]) -> tuple[Command, argparse.Namespace]:
    """The command ``argv`` names and its arguments (argparse's usage error and exit 2 otherwise)."""
    named = COMMANDS.get(argv[0]) if argv else None
    # A line that names a command needs only that command's parser: about 1 ms, against 15 for the
    # whole table's, and a report job's line is parsed twice (by the job, then by the worker). A
    # line it refuses goes to the whole table's, whose usage error it always was.
    if named is not None:
        try:
            return named, parser_of([named], DESCRIPTION, _OneCommandParser).parse_args(argv)
        except _NotThisWay:
            pass
    args = build_parser().parse_args(argv)
    return COMMANDS[args.command], args
