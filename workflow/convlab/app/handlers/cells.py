"""Cells by hand: `run` measures the cells its arguments name and prints their rows; `shared-memory`
counts the grid's cells that need more than the default shared memory per block (no GPU needed)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from convlab.backends import get_backend, resolve_backend
from convlab.backends.devicelock import exclusive_device
from convlab.backends.sharedcount import shared_memory_report
from convlab.console import Console
from convlab.measure.row import write_row_atomically
from convlab.paths import REPO_ROOT
from convlab.plan.cell import Cell
from convlab.plan.config import load_config
from convlab.plan.families import FAMILIES
from convlab.plan.grid import build_cells
from convlab.plan.runargs import FAMILY, check_run_args
from convlab.run.runner import run_cell


def matching_cells(args: argparse.Namespace, config: dict[str, Any], backend: str) -> list[Cell]:
    """The cells `run` asks for, of its family: its kernel, size, stride and filter, and the block or
    plan if given."""
    for name in FAMILIES:
        if name != FAMILY:
            config[name]["enabled"] = False
    section = config[FAMILY]
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


def run_heading(cell: Cell) -> str:
    """The heading of a hand-run cell's row: the cell as the grid and `history --cell` name it
    (kernel~direct/size~80/stride~2/filter~3/block~16) and its backend, not a results path."""
    return f"{cell.experiment} cell kernel~{cell.kernel}/{cell.problem}/{cell.variant} on {cell.backend}"


def run(args: argparse.Namespace, console: Console) -> int:
    """Run cells by hand and print their rows (every variant unless one is given)."""
    config = load_config(args.config)
    backend_name = resolve_backend(args.backend or config["backend"])
    # before the image is looked for: a bad size must not be answered with how to make its image
    check_run_args(args.kernel, args.size, args.stride, args.filter_size,
                   {"block": args.block, "plan": args.plan}, backend_name)
    image = Path(args.image or REPO_ROOT / f"data/input_{args.size}.png")
    if not image.is_file():
        console.warn(f"error: {image} does not exist; make it with: snakemake --cores 1 data/input_{args.size}.png")
        return 2
    cells = matching_cells(args, config, backend_name)
    if not cells:
        console.warn(f"error: kernel {args.kernel!r} has nothing to run on this backend")
        return 2
    backend = get_backend(cells[0].backend)
    for cell in cells:
        with exclusive_device(backend.device_key()):
            row = run_cell(cell, image, backend=backend)
        shown = {key: value for key, value in row.items() if value not in (None, "")}
        width = max(len(k) for k in shown)
        console.say(f"== {run_heading(cell)}")
        for key, value in shown.items():
            console.say(f"  {key:<{width}}  {value}")
        if args.out:
            target = Path(args.out) if len(cells) == 1 else Path(args.out) / (cell.variant + ".csv")
            write_row_atomically(row, target)
            # the only path `run` names is one it wrote: a hand run keeps no row under results/
            console.say(f"wrote {target}")
    return 0


def shared_memory(args: argparse.Namespace, console: Console) -> int:
    """The config's cuda cells that need more than 48 KiB of shared memory per block (no GPU needed)."""
    console.say(shared_memory_report(build_cells(load_config(args.config), "cuda")))
    return 0
