"""Which measurements the lab can vouch for: one rule, for a run's verdicts, `compare` and the pairs.

A row's time is vouched for only where nothing but the kernel shaped it. It is not where:
- other processes used the GPU while its repeats ran (the row's ``gpu_neighbours``);
- the GPU throttled meanwhile (its ``throttled``: a clock or a slowdown reason in its telemetry);
- another process held the GPU's lock while the cell waited for it (``lock_wait`` in ``phase_ms``);
- it was measured by the cpu backend, whose host runs whatever else the machine does.

Such a row is shown with its reason and is never one side of a FASTER or SLOWER by the history's
rule: neither as the new measurement nor as the baseline it is judged against (the change it shows
may be the disturbance's). Only a pair, both versions measured side by side now, can then call the
change; where there is none, the verdict is UNCLEAR and says which side could not be vouched for.
"""

from __future__ import annotations

from collections.abc import Mapping

from convlab.measure.row import finite_number

NEIGHBOURED = "other processes used the GPU"
SHARED_HOST = "the cpu backend shares its host"
THROTTLED = "the GPU throttled (its clock or a slowdown reason, in the row's telemetry)"
WAITED = "another process measured on this GPU"
# a cell that waited this long for its device's lock was measured beside another process
BUSY_LOCK_WAIT_MS = 1.0


def why_unvouched(row: Mapping[str, object]) -> str | None:
    """Why the lab cannot vouch for a row's time (see this module's docstring), or None."""
    if (finite_number(str(row.get("gpu_neighbours") or "")) or 0) > 0:
        return NEIGHBOURED
    if row.get("backend") == "cpu":
        return SHARED_HOST
    if row.get("throttled") == "yes":
        return THROTTLED
    waited = lock_wait_ms(str(row.get("phase_ms") or ""))
    if waited is not None and waited > BUSY_LOCK_WAIT_MS:
        return WAITED
    return None


def lock_wait_ms(phase_ms: str) -> float | None:
    """The lock_wait phase of a row's ``phase_ms`` ("name=ms;..."), or None where it has none."""
    for part in phase_ms.split(";"):
        name, _, value = part.partition("=")
        if name == "lock_wait":
            return finite_number(value)
    return None


def doubt(new_row: Mapping[str, object], baseline_row: Mapping[str, object], baseline_run: str | None) -> str | None:
    """Why a FASTER or SLOWER between two rows cannot be confirmed, as it reads after "called
    UNCLEAR, ": the new row first, then its baseline; None where both are vouched for."""
    reason = why_unvouched(new_row)
    if reason:
        return f"measured while {reason}"
    reason = why_unvouched(baseline_row)
    if reason:
        run = f" (run {baseline_run})" if baseline_run else ""
        return f"its baseline{run} was measured while {reason}"
    return None
