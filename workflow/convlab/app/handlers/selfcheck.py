"""`check-verdicts`: an A/A self-check a CI job runs before it bets on `compare --fail-on slower`
(convlab.pairs.selfcheck: a sample of the last run's ok cells, each measured side by side with
itself here now).

The exit status says whether the host is quiet enough for the gate: 0 when no cell was falsely
called and no other process used the GPU, 1 otherwise, 2 for input that cannot be checked. On the
cpu backend, where `compare` calls no change at all, it says so instead of "quiet enough".
"""

from __future__ import annotations

import argparse

from convlab.atomicfile import write_text_atomically
from convlab.backends.choice import choose_backend
from convlab.console import Console
from convlab.history import store
from convlab.history.compare import CompareError
from convlab.history.store import device_folder
from convlab.pairs.selfcheck import check_itself, last_run_ok_cells, measured_config, sample
from convlab.plan.grid import build_cells
from convlab.status import UserError


def check_verdicts(args: argparse.Namespace, console: Console) -> int:
    try:
        folder = device_folder(args.results, args.device)
        config = measured_config(args.configfile, folder)
        connection = store.open_for_reading(store.database_path(folder))
    except (UserError, CompareError, store.HistoryUnavailable) as error:
        console.warn(f"error: {error}")
        return 2
    try:
        last = last_run_ok_cells(connection)
    finally:
        connection.close()
    if last is None:
        console.warn(f"error: {folder}: no run recorded yet: run snakemake first")
        return 2
    run_id, measured = last
    backend_name = choose_backend(config["backend"]).backend
    cells = [c for c in build_cells(config, backend_name, folder.name) if c.path in measured]
    if not cells:
        console.warn(f"error: no ok cell of run {run_id} is in this config's grid: give the --configfile of that run")
        return 2
    check = check_itself(sample(cells, args.cells), config, backend_name)
    for line in check.lines(folder.name, run_id):
        console.say(line)
    if args.details:
        try:
            write_text_atomically(args.details, check.details())
        except OSError as error:
            console.warn(f"error: --details {args.details}: {error.strerror or error}")
            return 2
        console.say(f"  details: {args.details}")
    too_noisy = check.too_noisy()
    if too_noisy:
        console.warn("error: too noisy for `convlab compare --fail-on slower`: " + "; ".join(too_noisy))
        return 1
    if backend_name == "cpu":
        console.say("  the cpu backend: `convlab compare` calls no change between cpu runs (their host is shared: "
                    "every FASTER or SLOWER there is UNCLEAR), so `--fail-on slower` never fails here; a pair, as "
                    "`convlab watch` measures one, is what tells a change on this machine")
        return 0
    console.say("  quiet enough for `convlab compare --fail-on slower`")
    return 0
