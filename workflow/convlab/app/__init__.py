"""What a user or Snakemake starts: the command line and its command table, the handlers, the
measurement service, and the data and run-time helpers the rules call.

Here too: where each command runs while the measurement service is on, the one statement of it.
The command table (convlab.app.commandtable) takes each entry's place from PLACES, and a job's
thin entry (convlab.app.cellentry) routes its line by it without the table's imports. It lives in
the package's own module, which every job imports anyway: a module of its own would be one more
file for each cell job to find and read. With CONVLAB_SERVICE=off, and for a worker itself, every
command runs in the process that parsed it.
"""

JOB = "job"  # the process that was started: hand runs, the benchmark, the service itself
CELL = "cell"  # a device's worker measures it; the job is the service's thin client
DEVICE = "device"  # a device's worker, the pool of the backend it names (Command.pool)
TOOLS = "tools"  # a tools worker, the pool of that name: the data and report commands
WHERE = (JOB, CELL, DEVICE, TOOLS)

# Every command that does not run in the job's own process, by name.
PLACES = {
    "cell": CELL,
    **dict.fromkeys(("bandwidth", "ceiling", "compile-kernels", "counters", "gallery", "pair", "preview"), DEVICE),
    **dict.fromkeys(("aggregate", "counters-report", "downscale", "figures", "findings", "gpus", "history-page",
                     "record", "roofline", "seed-compare", "seed-figure", "seed-table", "source"), TOOLS),
}


def place_of(command: str) -> str:
    """Where the command named ``command`` runs (JOB for a name no entry has)."""
    return PLACES.get(command, JOB)
