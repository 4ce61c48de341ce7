"""Command line: the entry points Snakemake calls, and running one cell by hand.

  python -m convlab run --kernel direct --size 1024 --stride 2 --block 16
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from convlab import DEFAULT_CONFIG, REPO_ROOT
from convlab.atomicfile import write_text_atomically

if TYPE_CHECKING:
    from convlab.plan.cell import Cell


def _cmd_cell(args: argparse.Namespace) -> int:
    """One Snakemake job: a thin client of the measurement service, which measures the cell and
    writes its row. CONVLAB_SERVICE=off measures in this process instead (for debugging)."""
    from convlab.app.service.client import measure_through_service
    from convlab.measure.phases import process_age_s

    startup_ms = (process_age_s() or 0.0) * 1e3
    started_at = time.time() - startup_ms / 1e3
    if not _service_on():
        from convlab.run.inprocess import measure_in_process

        return measure_in_process(args.spec, args.out, args.image, args.bandwidth, started_at, startup_ms)
    return measure_through_service(args.spec, args.out, args.image, args.bandwidth, started_at, startup_ms)


def _cmd_serve(args: argparse.Namespace) -> int:
    """The measurement service in the foreground (cell jobs start it by themselves), or --status / --stop."""
    from convlab.app.service import control

    if args.stop:
        return control.stop(quiet=args.quiet)
    if args.status:
        return control.status()
    return control.run(args.idle_timeout, spawned=args.spawned)


def matching_cells(args: argparse.Namespace, config: dict, backend: str) -> list:
    """The conv2d cells `run` asks for: its kernel, size, stride and filter, and the block or plan if given."""
    from convlab.plan.families import FAMILIES
    from convlab.plan.grid import build_cells

    for family in FAMILIES:
        if family != "conv2d":
            config[family]["enabled"] = False
    section = config["conv2d"]
    section.update(sizes=[args.size], strides=[args.stride], kernels=[args.kernel])
    if args.filter_size is not None:
        section["filter_sizes"] = [args.filter_size]
    config["cpu"]["sizes"] = [args.size]
    overrides = config["kernels"].setdefault(args.kernel, {})
    for name in ("block", "plan"):
        value = getattr(args, name)
        if value is not None:
            overrides[name] = [value]
    return build_cells(config, backend)


def _cmd_run(args: argparse.Namespace) -> int:
    """Run cells by hand and print their rows (every variant unless one is given)."""
    from convlab.app.runargs import check_run_args
    from convlab.backends import get_backend, resolve_backend
    from convlab.backends.devicelock import exclusive_device
    from convlab.measure.row import write_row_atomically
    from convlab.plan.config import load_config
    from convlab.run.runner import run_cell

    config = load_config(args.config)
    backend_name = resolve_backend(args.backend or config["backend"])
    # before the image is looked for: a bad size must not be answered with how to make its image
    check_run_args(args.kernel, args.size, args.stride, args.filter_size,
                   {"block": args.block, "plan": args.plan}, backend_name)
    image = Path(args.image or REPO_ROOT / f"data/input_{args.size}.png")
    if not image.is_file():
        print(f"error: {image} does not exist; make it with: snakemake --cores 1 data/input_{args.size}.png",
              file=sys.stderr)
        return 2
    cells = matching_cells(args, config, backend_name)
    if not cells:
        print(f"error: kernel {args.kernel!r} has nothing to run on this backend", file=sys.stderr)
        return 2
    backend = get_backend(cells[0].backend)
    for cell in cells:
        with exclusive_device(backend.device_key()):
            row = run_cell(cell, image, backend=backend)
        shown = {key: value for key, value in row.items() if value not in (None, "")}
        width = max(len(k) for k in shown)
        print(f"== {run_heading(cell)}")
        for key, value in shown.items():
            print(f"  {key:<{width}}  {value}")
        if args.out:
            target = Path(args.out) if len(cells) == 1 else Path(args.out) / (cell.variant + ".csv")
            write_row_atomically(row, target)
            # the only path `run` names is one it wrote: a hand run keeps no row under results/
            print(f"wrote {target}")
    return 0


def run_heading(cell: Cell) -> str:
    """The heading of a hand-run cell's row: the cell as the grid and `history --cell` name it
    (kernel~direct/size~80/stride~2/filter~3/block~16) and its backend, not a results path."""
    return f"{cell.experiment} cell kernel~{cell.kernel}/{cell.problem}/{cell.variant} on {cell.backend}"


def _measure_device_record(backend_name: str, out: str, measure) -> dict:
    """A device-wide measurement (bandwidth, ceiling) under the device lock, like any cell's,
    written as JSON with the backend and device it ran on."""
    from convlab.backends import get_backend
    from convlab.backends.devicelock import exclusive_device

    backend = get_backend(backend_name)
    with exclusive_device(backend.device_key()):
        record = {"backend": backend.name, "device": backend.device_info()["device"], **measure(backend),
                  # said once here, not in every row: why the rows' telemetry columns are empty
                  "telemetry": backend.telemetry().unavailable or "NVML"}
    write_text_atomically(out, json.dumps(record, indent=2) + "\n")
    return record


def _cmd_bandwidth(args: argparse.Namespace) -> int:
    record = _measure_device_record(args.backend, args.out,
                                    lambda backend: {"copy_gbps": backend.copy_bandwidth_gbps()})
    print(f"{record['device']}: device-to-device copy {record['copy_gbps']:.1f} GB/s (read + write)")
    return 0


def _cmd_ceiling(args: argparse.Namespace) -> int:
    record = _measure_device_record(args.backend, args.out, lambda backend: backend.sgemm_ceiling())
    print(f"{record['device']}: SGEMM {record['sgemm_gflops']:.0f} GFLOPS at {record['size']} ({record['math']})")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    """The floor benchmark: our kernel, cuDNN best, the naive kernel and a copy, in one process."""
    from convlab.backends import get_backend

    backend = get_backend("cuda")  # one clear line where there is no GPU, before any work
    from convlab.backends.devicelock import exclusive_device
    from convlab.bench.floor import format_table, run_benchmark, write_results
    from convlab.bench.sgemm import format_gemm_table, run_gemm_benchmark

    with exclusive_device(backend.device_key()):
        results = run_benchmark(args.sizes, args.strides, args.data) if args.sizes else []
        gemm = run_gemm_benchmark(backend, args.gemm_sizes) if args.gemm_sizes else []
    if results:
        write_results(results, args.out, format_table(results))
        print(format_table(results))
    if gemm:
        write_results(gemm, args.gemm_out, format_gemm_table(gemm))
        print(format_gemm_table(gemm))
    return 0


def _cmd_shared_memory(args: argparse.Namespace) -> int:
    """The config's cuda cells that need more than 48 KiB of shared memory per block (no GPU needed)."""
    from convlab.app.sharedcount import shared_memory_report
    from convlab.plan.config import load_config
    from convlab.plan.grid import build_cells

    print(shared_memory_report(build_cells(load_config(args.config), "cuda")))
    return 0


def _cmd_source(args: argparse.Namespace) -> int:
    from convlab.app import data

    if args.user_image:
        data.import_source(args.user_image, args.out, args.size)
    else:
        data.generate_source(args.out, args.size)
    return 0


def _cmd_downscale(args: argparse.Namespace) -> int:
    from convlab.app import data

    data.downscale(args.source, args.out, args.size)
    return 0


def _cmd_aggregate(args: argparse.Namespace) -> int:
    from convlab.report.aggregate import aggregate

    summary = aggregate(args.cells, args.out)
    print(f"{args.out}: {len(summary)} rows; by status: {summary['status'].value_counts().to_dict()}")
    return 0


def _cmd_figures(args: argparse.Namespace) -> int:
    from convlab.report.figures import render_files

    render_files(args.summary, args.outdir, args.figure)
    return 0


def _cmd_gallery(args: argparse.Namespace) -> int:
    from convlab.plan.cell import Cell
    from convlab.report.gallery import render_edge_map

    render_edge_map(Cell.from_json(args.spec), args.image, args.out)
    return 0


def _cmd_seed_compare(args: argparse.Namespace) -> int:
    from convlab.report.seedcompare import comparison_from_files

    table = comparison_from_files(args.seeds, args.map, args.summary)
    write_text_atomically(args.out, table.to_csv(index=False))
    print(f"{args.out}: {len(table)} seed numbers; this run's status: {table['this_status'].value_counts().to_dict()}")
    return 0


def _cmd_seed_figure(args: argparse.Namespace) -> int:
    from convlab.report.seedcompare import load_summary, read_comparison
    from convlab.report.seedfigures import render_seed_figure

    print(render_seed_figure(read_comparison(args.comparison), load_summary(args.summary), args.seed, args.figure,
                             args.out))
    return 0


def _cmd_seed_table(args: argparse.Namespace) -> int:
    from convlab.report.seedcompare import read_comparison
    from convlab.report.seedtable import seed_table_html

    print(seed_table_html(read_comparison(args.comparison), args.seed, args.out))
    return 0


def _cmd_roofline(args: argparse.Namespace) -> int:
    from convlab.report.roofline import render_roofline

    print(render_roofline(args.summary, args.bandwidth, args.ceiling, args.out))
    return 0


def _cmd_findings(args: argparse.Namespace) -> int:
    from convlab.report.findings import write_findings

    print(write_findings(args.summary, args.comparison, args.bandwidth, args.ceiling, args.out))
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    """Two result sets cell by cell. A report: exit 0 whatever the verdicts, unless --fail-on
    slower, which exits 1 when any cell is SLOWER (a CI gate)."""
    from convlab.history.compare import compare_result_sets
    from convlab.history.sides import load_side

    a = load_side(args.a, args.results, args.device)
    b = load_side(args.b, args.results, args.device)
    comparison = compare_result_sets(a, b, args.out, args.html, args.threshold)
    print(comparison.text)
    if args.fail_on == "slower" and comparison.slower:
        print(f"error: {comparison.slower} cells are SLOWER (--fail-on slower)", file=sys.stderr)
        return 1
    return 0


def _cmd_record(args: argparse.Namespace) -> int:
    """Add the run's new rows to the device's results database and write its verdicts."""
    from convlab.history.record import record
    from convlab.plan.grid import build_cells

    cells = build_cells(json.loads(args.config), args.backend, args.device)
    recorded = record(args.results, cells, args.device)
    for warning in recorded.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    write_text_atomically(args.out, "\n".join(recorded.lines) + "\n")
    print(f"run {recorded.run_id}: {len(recorded.verdicts)} new rows, {recorded.added} added to the database")
    print("\n".join(recorded.lines))
    return 0


def _cmd_history(args: argparse.Namespace) -> int:
    """A device's runs, or a kernel's or cell's measurements over time."""
    from convlab.history.listing import history_lines
    from convlab.history.sides import device_folder

    print("\n".join(history_lines(device_folder(args.results, args.device), args.kernel, args.cell, args.limit)))
    return 0


def _cmd_history_page(args: argparse.Namespace) -> int:
    from convlab.report.history import write_history_page

    print(write_history_page(args.results, args.verdicts, args.figure, args.out))
    return 0


def _cmd_gpus(args: argparse.Namespace) -> int:
    from convlab.report.gpus import write_gpus_page

    print(write_gpus_page(args.results, args.out))
    return 0


def build_parser() -> argparse.ArgumentParser:
    from convlab.report.figurenames import NAMES as FIGURE_NAMES
    from convlab.report.seeds import SEEDS, figure_names

    parser = argparse.ArgumentParser(prog="python -m convlab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run cells by hand and print their rows")
    run.add_argument("--kernel", required=True)
    run.add_argument("--size", type=int, required=True)
    run.add_argument("--stride", type=int, default=1)
    run.add_argument("--filter-size", type=int)
    run.add_argument("--block", type=int, help="2-D block edge for kernels that take one (e.g. 64 to see a refused launch)")
    run.add_argument("--plan", choices=["heuristic", "best"], help="cuDNN plan choice")
    run.add_argument("--backend", choices=["auto", "cuda", "cpu"])
    run.add_argument("--config", default=str(DEFAULT_CONFIG))
    run.add_argument("--image", help="default: data/input_<size>.png")
    run.add_argument("--out", help="write the row(s) as CSV here")
    run.set_defaults(handler=_cmd_run)

    cell = commands.add_parser("cell", help="run one cell of the grid (called by Snakemake)")
    cell.add_argument("--spec", required=True, help="the cell as JSON")
    cell.add_argument("--image", help="the picture the cell reads (families on random data have none)")
    cell.add_argument("--bandwidth")
    cell.add_argument("--out", required=True)
    cell.set_defaults(handler=_cmd_cell)

    serve = commands.add_parser("serve", help="the measurement service (cell jobs start it themselves)")
    serve.add_argument("--idle-timeout", type=float, default=60.0, help="seconds without a cell before it exits")
    serve.add_argument("--status", action="store_true", help="print the running service's identity and workers")
    serve.add_argument("--stop", action="store_true", help="ask the running service to finish its cells and exit")
    serve.add_argument("--quiet", action="store_true", help="with --stop: say nothing when no service runs")
    # started by a cell job, which holds the start lock and names the socket
    serve.add_argument("--spawned", metavar="KEY", help=argparse.SUPPRESS)
    serve.set_defaults(handler=_cmd_serve)

    bandwidth = commands.add_parser("bandwidth", help="measure device-to-device copy bandwidth")
    bandwidth.add_argument("--backend", required=True, choices=["cuda", "cpu"])
    bandwidth.add_argument("--out", required=True)
    bandwidth.set_defaults(handler=_cmd_bandwidth)

    ceiling = commands.add_parser("ceiling", help="measure the FP32 compute ceiling (library SGEMM, no TF32)")
    ceiling.add_argument("--backend", required=True, choices=["cuda", "cpu"])
    ceiling.add_argument("--out", required=True)
    ceiling.set_defaults(handler=_cmd_ceiling)

    bench = commands.add_parser("bench", help="floor benchmark: ours vs cuDNN vs naive vs a copy, printed ratios")
    bench.add_argument("--sizes", type=int, nargs="*", default=[128, 256, 512, 1024, 2048, 4096],
                       help="image sizes of the floor benchmark (none: skip it)")
    bench.add_argument("--strides", type=int, nargs="+", default=[1, 2, 3])
    bench.add_argument("--gemm-sizes", type=int, nargs="*", default=[4096, 8192],
                       help="SGEMM sizes timed against cuBLAS (none: skip)")
    bench.add_argument("--data", default="data", help="folder with input_<size>.png")
    bench.add_argument("--out", default="results/benchmark/floor_cuda.csv", help="CSV; a .txt table beside it")
    bench.add_argument("--gemm-out", default="results/benchmark/sgemm_cuda.csv", help="the SGEMM rows' CSV")
    bench.set_defaults(handler=_cmd_bench)

    shared = commands.add_parser("shared-memory", help="count the cuda grid's cells that need more than 48 KiB of "
                                                       "shared memory per block (no GPU needed)")
    shared.add_argument("--config", default=str(DEFAULT_CONFIG))
    shared.set_defaults(handler=_cmd_shared_memory)

    source = commands.add_parser("source", help="make the square source image")
    source.add_argument("--size", type=int, required=True)
    source.add_argument("--user-image")
    source.add_argument("--out", required=True)
    source.set_defaults(handler=_cmd_source)

    downscale = commands.add_parser("downscale", help="scale the source to one size")
    downscale.add_argument("--source", required=True)
    downscale.add_argument("--size", type=int, required=True)
    downscale.add_argument("--out", required=True)
    downscale.set_defaults(handler=_cmd_downscale)

    agg = commands.add_parser("aggregate", help="collect cell rows into the summary CSV")
    agg.add_argument("--out", required=True)
    agg.add_argument("cells", nargs="*")
    agg.set_defaults(handler=_cmd_aggregate)

    figures = commands.add_parser("figures", help="render the report figures from the summary")
    figures.add_argument("--summary", required=True)
    figures.add_argument("--outdir", required=True)
    figures.add_argument("--figure", choices=FIGURE_NAMES,
                         help="render this one only, as <name>.png (status_table: the page of failed cells, "
                              "status_table.html); default: all of them (the report runs one job per figure)")
    figures.set_defaults(handler=_cmd_figures)

    gallery = commands.add_parser("gallery", help="save one kernel's edge map as an image")
    gallery.add_argument("--spec", required=True)
    gallery.add_argument("--image", required=True)
    gallery.add_argument("--out", required=True)
    gallery.set_defaults(handler=_cmd_gallery)

    compare = commands.add_parser("seed-compare", help="join the seeds' numbers with this run's (report stage)")
    compare.add_argument("--seeds", required=True, help="config/seeds/seed_tables.csv")
    compare.add_argument("--map", required=True, help="config/seeds/method_map.yaml")
    compare.add_argument("--summary", required=True)
    compare.add_argument("--out", required=True)
    compare.set_defaults(handler=_cmd_seed_compare)

    seed_figure = commands.add_parser("seed-figure", help="one figure of a seed (report stage)")
    seed_figure.add_argument("--seed", required=True, choices=list(SEEDS))
    seed_figure.add_argument("--figure", required=True, choices=figure_names(),
                             help="one of the seed's figures (convlab/report/seeds.py)")
    seed_figure.add_argument("--comparison", required=True)
    seed_figure.add_argument("--summary", required=True)
    seed_figure.add_argument("--out", required=True)
    seed_figure.set_defaults(handler=_cmd_seed_figure)

    seed_table = commands.add_parser("seed-table", help="one seed's table page (report stage)")
    seed_table.add_argument("--seed", required=True, choices=list(SEEDS))
    seed_table.add_argument("--comparison", required=True)
    seed_table.add_argument("--out", required=True)
    seed_table.set_defaults(handler=_cmd_seed_table)

    roofline = commands.add_parser("roofline", help="roofline of every ok cell (report stage)")
    roofline.add_argument("--summary", required=True)
    roofline.add_argument("--bandwidth", required=True)
    roofline.add_argument("--ceiling", required=True)
    roofline.add_argument("--out", required=True)
    roofline.set_defaults(handler=_cmd_roofline)

    findings = commands.add_parser("findings", help="findings page computed from the data (report stage)")
    findings.add_argument("--summary", required=True)
    findings.add_argument("--comparison", required=True)
    findings.add_argument("--bandwidth", required=True)
    findings.add_argument("--ceiling", required=True)
    findings.add_argument("--out", required=True)
    findings.set_defaults(handler=_cmd_findings)

    gpus = commands.add_parser("gpus", help="the page comparing every device under results/ (report stage)")
    gpus.add_argument("--results", default="results", help="the folder holding one folder per device")
    gpus.add_argument("--out", required=True)
    gpus.set_defaults(handler=_cmd_gpus)

    compare_sets = commands.add_parser(
        "compare", help="compare two result sets cell by cell (B/A and a verdict)",
        description="Exit status: 0 when compared (whatever the verdicts), 1 with --fail-on slower when a cell is "
                    "SLOWER, 2 for input that cannot be compared (one error: line).")
    side = ("a summary CSV, a folder holding summary.csv, or a state of the results database: a run id, a commit, "
            "@latest or @previous")
    compare_sets.add_argument("a", metavar="A", help=side)
    compare_sets.add_argument("b", metavar="B", help="the same, for the set compared with A")
    compare_sets.add_argument("--out", help="the per-cell CSV (default: compare_<A>_vs_<B>.csv beside A's summary)")
    compare_sets.add_argument("--html", help="the report page (default: the CSV's path with .html)")
    compare_sets.add_argument("--threshold", type=float, default=None,
                              help="the relative change below which a cell is SAME whatever its spread "
                                   "(a fraction; default 0.08)")
    compare_sets.add_argument("--fail-on", choices=["slower"], help="exit 1 when any cell is SLOWER")
    compare_sets.add_argument("--results", default="results", help="the folder of device folders (default: results)")
    compare_sets.add_argument("--device", help="the device label whose database a run, commit or @name reads "
                                               "(default: the only one with a database)")
    compare_sets.set_defaults(handler=_cmd_compare)

    record = commands.add_parser("record", help="add the run's new rows to the results database (report stage)")
    record.add_argument("--results", required=True, help="results/<device>")
    record.add_argument("--backend", required=True, choices=["cuda", "cpu"])
    record.add_argument("--device", required=True)
    record.add_argument("--config", required=True, help="the run's validated config as JSON")
    record.add_argument("--out", required=True, help="the verdict lines (verdicts/latest.txt)")
    record.set_defaults(handler=_cmd_record)

    history = commands.add_parser("history", help="a device's runs, or a kernel's or cell's measurements over time")
    history.add_argument("--kernel", help="one kernel's measurements")
    history.add_argument("--cell", help="the measurements of cells whose path contains this text")
    history.add_argument("--limit", type=int, default=50, help="the most recent measurements shown (default 50)")
    history.add_argument("--results", default="results")
    history.add_argument("--device", help="default: the only device with a results database")
    history.set_defaults(handler=_cmd_history)

    history_page = commands.add_parser("history-page", help="the report's history figure and page (report stage)")
    history_page.add_argument("--results", required=True, help="results/<device>")
    history_page.add_argument("--verdicts", required=True, help="verdicts/latest.csv")
    history_page.add_argument("--figure", required=True)
    history_page.add_argument("--out", required=True)
    history_page.set_defaults(handler=_cmd_history_page)
    return parser


def _is_user_error(error: Exception) -> bool:
    """Mistakes a user can fix get one line, not a traceback. convlab.status is standard library
    only, so a cell job (a thin client) can ask."""
    from convlab.status import UserError

    return isinstance(error, UserError)


# Commands a rule runs that a warm service worker can run instead of a fresh process: the data
# and report commands in a tools worker, the device-wide ones on a device's worker.
FORWARDED = {"source", "downscale", "aggregate", "figures", "seed-compare", "seed-figure", "seed-table", "roofline",
             "findings", "gpus", "bandwidth", "ceiling", "gallery", "record", "history-page"}


def _pool(args: argparse.Namespace) -> str:
    if args.command in ("bandwidth", "ceiling"):
        return args.backend
    if args.command == "gallery":
        return json.loads(args.spec).get("backend", "cpu")
    return "tools"


def _service_on() -> bool:
    return os.environ.get("CONVLAB_SERVICE", "on").strip().lower() != "off"


def main(argv: list[str] | None = None, forward: bool = True) -> int:
    """``forward``: hand the commands in FORWARDED to the service (unless CONVLAB_SERVICE=off);
    a service worker runs them with forward=False.

    Rules start ``python -S``: a thin client needs only the standard library, and skipping
    site-packages saves most of the interpreter's start on environments with many packages.
    A command that runs here instead starts again with them."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    thin = args.command == "serve" or (_service_on() and (args.command == "cell" or (forward and args.command in FORWARDED)))
    if sys.flags.no_site and not thin:
        os.execv(sys.executable, [sys.executable, "-m", "convlab", *argv])
    if forward and args.command in FORWARDED and _service_on():
        from convlab.app.service.client import run_through_service

        return run_through_service(argv, _pool(args))
    try:
        return args.handler(args)
    except Exception as error:
        # A rule shows its log's last line on the terminal when it fails: that line is always
        # one `error:` line, after the traceback where there is one.
        if _is_user_error(error):
            print(f"error: {error}", file=sys.stderr)
            return 2
        import traceback

        traceback.print_exc()
        print(f"error: {args.command} failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
