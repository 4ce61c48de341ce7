"""Command line: the entry points Snakemake calls, and running one cell by hand.

  python -m convlab run --kernel direct --size 1024 --stride 2 --block 16
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from convlab import DEFAULT_CONFIG, REPO_ROOT
from convlab.config import ConfigError, load_config
from convlab.data import DataError
from convlab.measure.problem import ImageError
from convlab.status import BackendUnavailable


def _cmd_cell(args: argparse.Namespace) -> int:
    """One Snakemake job: run the cell under the device lock and write its row atomically.

    Host work (imports, loading, the CUDA context) happens before the lock is taken, so that
    parallel jobs overlap it with another cell's measurement."""
    from convlab.measure.phases import PhaseClock, process_age_s

    phases = PhaseClock()
    startup_ms = (process_age_s() or 0.0) * 1e3
    from convlab.backends import get_backend
    from convlab.devicelock import exclusive_device
    from convlab.grid import Cell
    from convlab.row import write_row_atomically
    from convlab.runner import load_inputs, measure_cell

    cell = Cell.from_json(args.spec)
    backend = get_backend(cell.backend)
    phases.lap("imports")
    inputs = load_inputs(cell, args.image)
    phases.lap("load")
    backend.open_context()
    phases.lap("context")
    with exclusive_device(cell.backend):
        phases.lap("lock_wait")
        row = measure_cell(inputs, args.bandwidth, backend)
    phases.lap("measure")
    job = {"startup": startup_ms, **phases.laps}
    job.pop("measure")
    row["phase_ms"] = ";".join(f"{k}={v:.4g}" for k, v in job.items()) + (
        ";" + row["phase_ms"] if row.get("phase_ms") else "")
    row["job_ms"] = startup_ms + sum(phases.laps.values())
    write_row_atomically(row, args.out)
    print(f"{cell.path}: {row['status']} {row.get('kernel_ms') or ''} {row.get('reason') or ''}".rstrip())
    return 0


def _matching_cells(args: argparse.Namespace) -> list:
    from convlab.backends import resolve_backend
    from convlab.families import FAMILIES, build_cells

    config = load_config(args.config)
    backend = resolve_backend(args.backend or config["backend"])
    for family in FAMILIES:
        if family != "conv2d":
            config[family]["enabled"] = False
    section = config["conv2d"]
    section.update(sizes=[args.size], strides=[args.stride], kernels=[args.kernel])
    if args.filter_size:
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
    from convlab.devicelock import exclusive_device
    from convlab.row import write_row_atomically
    from convlab.runner import run_cell

    image = Path(args.image or REPO_ROOT / f"data/input_{args.size}.png")
    if not image.is_file():
        print(f"error: {image} does not exist; make it with: snakemake --cores 1 data/input_{args.size}.png",
              file=sys.stderr)
        return 2
    cells = _matching_cells(args)
    if not cells:
        print(f"error: kernel {args.kernel!r} has nothing to run on this backend", file=sys.stderr)
        return 2
    for cell in cells:
        with exclusive_device(cell.backend):
            row = run_cell(cell, image)
        width = max(len(k) for k in row)
        print(f"== {cell.path}")
        for key, value in row.items():
            if value not in (None, ""):
                print(f"  {key:<{width}}  {value}")
        if args.out:
            target = Path(args.out) if len(cells) == 1 else Path(args.out) / (cell.variant + ".csv")
            write_row_atomically(row, target)
    return 0


def _cmd_bandwidth(args: argparse.Namespace) -> int:
    from convlab.backends import get_backend

    backend = get_backend(args.backend)
    record = {"backend": backend.name, "device": backend.device_info()["device"],
              "copy_gbps": backend.copy_bandwidth_gbps()}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    print(f"{record['device']}: device-to-device copy {record['copy_gbps']:.1f} GB/s (read + write)")
    return 0


def _cmd_ceiling(args: argparse.Namespace) -> int:
    from convlab.backends import get_backend

    backend = get_backend(args.backend)
    record = {"backend": backend.name, "device": backend.device_info()["device"], **backend.sgemm_ceiling()}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    print(f"{record['device']}: SGEMM {record['sgemm_gflops']:.0f} GFLOPS at {record['size']} ({record['math']})")
    return 0


def _cmd_source(args: argparse.Namespace) -> int:
    from convlab import data

    if args.user_image:
        data.import_source(args.user_image, args.out, args.size)
    else:
        data.generate_source(args.out, args.size)
    return 0


def _cmd_downscale(args: argparse.Namespace) -> int:
    from convlab import data

    data.downscale(args.source, args.out, args.size)
    return 0


def _cmd_aggregate(args: argparse.Namespace) -> int:
    from convlab.aggregate import aggregate

    summary = aggregate(args.cells, args.out)
    print(f"{args.out}: {len(summary)} rows; by status: {summary['status'].value_counts().to_dict()}")
    return 0


def _cmd_figures(args: argparse.Namespace) -> int:
    from convlab.figures import render_figures, status_table_html

    render_figures(args.summary, args.outdir)
    status_table_html(args.summary, Path(args.outdir) / "status_table.html")
    return 0


def _cmd_gallery(args: argparse.Namespace) -> int:
    from convlab.gallery import render_edge_map
    from convlab.grid import Cell

    render_edge_map(Cell.from_json(args.spec), args.image, args.out)
    return 0


def build_parser() -> argparse.ArgumentParser:
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

    bandwidth = commands.add_parser("bandwidth", help="measure device-to-device copy bandwidth")
    bandwidth.add_argument("--backend", required=True, choices=["cuda", "cpu"])
    bandwidth.add_argument("--out", required=True)
    bandwidth.set_defaults(handler=_cmd_bandwidth)

    ceiling = commands.add_parser("ceiling", help="measure the FP32 compute ceiling (library SGEMM, no TF32)")
    ceiling.add_argument("--backend", required=True, choices=["cuda", "cpu"])
    ceiling.add_argument("--out", required=True)
    ceiling.set_defaults(handler=_cmd_ceiling)

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
    figures.set_defaults(handler=_cmd_figures)

    gallery = commands.add_parser("gallery", help="save one kernel's edge map as an image")
    gallery.add_argument("--spec", required=True)
    gallery.add_argument("--image", required=True)
    gallery.add_argument("--out", required=True)
    gallery.set_defaults(handler=_cmd_gallery)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except (ConfigError, BackendUnavailable, DataError, ImageError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
