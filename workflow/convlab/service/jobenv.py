"""What a cell job reads from its own process and environment (standard library only: every cell job
imports this module before it sends its cell)."""

from __future__ import annotations

import os
import time

# set by the run (convlab.snakefile.jobenvironment) for its jobs: the commit it read once, for the rows
RUN_COMMIT_ENV = "CONVLAB_RUN_COMMIT"
# The run's id, set once by the run the user started (its jobs inherit it): the service keeps each
# row it places under it until a record step adds the row (convlab.measure.rowjournal).
RUN_ID_ENV = "CONVLAB_RUN_ID"
DEFAULT_CELL_TIMEOUT_S = 300.0
# past the cell's own timeout: the service needs a moment to kill a hung worker and write its row
ANSWER_GRACE_S = 30.0


def service_on() -> bool:
    """Whether jobs hand their commands to the measurement service (CONVLAB_SERVICE=off: each runs in its own
    process)."""
    return os.environ.get("CONVLAB_SERVICE", "on").strip().lower() != "off"


# The epoch second at which the job's shell started (bash's $EPOCHREALTIME, in microseconds),
# stamped by the script the run names in BASH_ENV (convlab.snakefile.jobenvironment): the kernel's
# start time of a process counts in clock ticks (10 ms), as coarse as the start-up it would measure.
JOB_STARTED_ENV = "CONVLAB_JOB_STARTED"
# The process starts after its shell's stamp, and a few ms later: a stamp older than the process by
# more than this is not its shell's but one it inherited from further up
STAMP_SLACK_S = 0.25
# where the process's own start is unknown, a stamp older than this is not taken
STAMP_LIFETIME_S = 60.0


def stamped_age_s(now: float | None = None, process_age: float | None = None) -> float | None:
    """Seconds since the job's shell stamped its start, or None where it did not, or where the stamp
    cannot be this process's shell's (unreadable, in the future, or older than the process by more
    than STAMP_SLACK_S; with its age unknown, older than STAMP_LIFETIME_S)."""
    stamp = os.environ.get(JOB_STARTED_ENV, "")
    try:
        # the shell writes its locale's decimal separator
        started = float(stamp.replace(",", "."))
    except ValueError:
        return None
    age = (time.time() if now is None else now) - started
    oldest = STAMP_LIFETIME_S if process_age is None else process_age + STAMP_SLACK_S
    return age if 0.0 <= age <= oldest else None


def process_age_s() -> float | None:
    """Seconds since this process started (Linux /proc, in clock ticks), or None where unknown."""
    try:
        with open("/proc/self/stat") as handle:
            start_ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as handle:
            uptime = float(handle.read().split()[0])
        return uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def job_start() -> tuple[float, float]:
    """(milliseconds since this process started, the epoch second it started): a cell job's `startup` phase, and
    the start its ``job_ms`` counts from."""
    now = time.time()
    process_age = process_age_s()
    stamped = stamped_age_s(now, process_age)
    startup_ms = (stamped if stamped is not None else process_age or 0.0) * 1e3
    return startup_ms, now - startup_ms / 1e3


# What a cell job's shell met at the service's door after sending its cell there
# (convlab/service/cellclient.sh), for the Python client it then hands the cell to: "timeout" (no
# answer in time) or "lost" (the connection closed without one).
DOOR_MET_ENV = "CONVLAB_CELL_DOOR"


def door_failure() -> OSError | None:
    """What the job's shell met at the door, as the error a socket's exchange would have met; None
    where it met nothing (or sent nothing). The variable is this process's alone: a service it starts
    does not inherit it."""
    met = os.environ.pop(DOOR_MET_ENV, "")
    if met == "timeout":
        return TimeoutError("no answer at the service's door in time")
    if met == "lost":
        return ConnectionError("the service closed the connection at its door without an answer")
    return None


def env_seconds(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


def cell_timeout_s() -> float:
    """The cell's timeout, as the run set it for its jobs."""
    return env_seconds("CONVLAB_CELL_TIMEOUT_S", DEFAULT_CELL_TIMEOUT_S)


def run_fields() -> dict[str, str]:
    """What the run says of itself in each cell's request: the commit it read once at its start
    (RUN_COMMIT_ENV), for the cell's row (the service would otherwise ask git for it, twice, per
    cell), and its id (RUN_ID_ENV), under which the service keeps the row until it is recorded."""
    fields = {"git_commit": os.environ.get(RUN_COMMIT_ENV), "run_id": os.environ.get(RUN_ID_ENV)}
    return {name: value for name, value in fields.items() if value}
