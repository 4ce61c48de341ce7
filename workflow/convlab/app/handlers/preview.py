"""`preview`: kernels' cells measured side by side with the version the results database recorded
last, recording nothing (convlab.pairs.previewverdicts): what `convlab watch` runs on a save, in
the device's worker (in its own process with CONVLAB_SERVICE=off).

It stops between cells once a previewed kernel's files change, or the watch that asked for it has
gone (exit status SUPERSEDED): the watch starts again from the new files. With --why-after, the
verdicts' why is profiled after they are said, and `preview --collect-why` says it
(convlab.pairs.previewwhy).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from convlab.console import Console
from convlab.pairs.previewplan import narrowed
from convlab.pairs.previewverdicts import PreviewRequest, Superseded, preview_kernels
from convlab.pairs.previewwhy import collect_why, warm_up
from convlab.plan.grid import build_cells
from convlab.plan.registry import RegistryError, load_registry

SUPERSEDED = 3  # exit status: stopped for newer files (or a watch that left); the watch starts again


def preview(args: argparse.Namespace, console: Console) -> int:
    if args.collect_why:
        collect_why(console.say)
        return 0
    config = json.loads(args.config)
    if not args.kernels:
        # a watch's first request: its worker starts, this module is loaded and the why's standby
        # waits, before any save
        warm_up(config, args.backend)
        return 0
    started = time.perf_counter()
    try:
        registry = load_registry()
    except RegistryError as error:
        console.say(f"description error: {error}")
        return 1 if args.fail_on else 0
    cells = narrowed(build_cells(config, args.backend, args.device), args.kernels, args.sizes, args.strides)
    request = PreviewRequest(config, args.backend, args.device, Path(args.results), args.kernels, args.differing,
                             args.watcher, Path(args.details) if args.details else None, args.why_after)
    try:
        failed = preview_kernels(request, registry, cells, console.say, started)
    except Superseded:
        console.say("preview: stopped: its files changed meanwhile (or the watch left)")
        return SUPERSEDED
    return 1 if args.fail_on == "slower" and failed else 0
