"""A run's counts and what the display says about them: cells and jobs done, time elapsed and an
estimate of the time left. Times are passed in (no clock, no output here)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

# The rule whose jobs are the measurements the display counts.
CELL_RULE = "cell"
# Below this many finished jobs the time left says "estimating": the first jobs (the source
# picture, the device probes) are too few to say how long the rest takes.
JOBS_BEFORE_ESTIMATE = 5
# Where output that is not a terminal reports the cells (100 % is the final line).
QUARTILES = (25, 50, 75)


def format_duration(seconds: float) -> str:
    """``0:42``, ``12:05``, ``1:02:03``."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


@dataclass
class RunProgress:
    """What the run planned and how far it got, fed from Snakemake's events."""

    started: float
    jobs_total: int = 0
    cells_total: int = 0
    jobs_done: int = 0
    cells_done: int = 0
    jobs_failed: int = 0
    rule_of_job: dict[int, str] = field(default_factory=dict)
    cells_started: set[int] = field(default_factory=set)
    quartile_reported: int = 0

    @classmethod
    def planned(cls, stats: Mapping[str, int], now: float) -> RunProgress:
        """From the RUN_INFO event's job counts: one entry per rule, and "total"."""
        return cls(started=now, jobs_total=int(stats.get("total", 0)), cells_total=int(stats.get(CELL_RULE, 0)))

    def job_started(self, jobid: int, rule: str) -> None:
        self.rule_of_job[jobid] = rule
        if rule == CELL_RULE:
            # a job the plan did not count (a checkpoint adds some) still counts
            self.cells_started.add(jobid)
            self.cells_total = max(self.cells_total, len(self.cells_started))

    def job_finished(self, jobid: int) -> None:
        if self.rule_of_job.get(jobid) == CELL_RULE:
            self.cells_done += 1

    def jobs_progress(self, done: int, total: int) -> None:
        """Snakemake's own count of finished jobs, and the DAG's size (which checkpoints grow)."""
        self.jobs_done = done
        self.jobs_total = max(self.jobs_total, total)

    def job_failed(self) -> None:
        self.jobs_failed += 1

    @property
    def complete(self) -> bool:
        return self.jobs_total > 0 and self.jobs_done >= self.jobs_total

    def elapsed(self, now: float) -> float:
        return max(0.0, now - self.started)

    def seconds_left(self, now: float) -> float | None:
        """The mean time per finished job so far (its wall time, so parallel jobs count as the
        throughput they give) times the jobs still to run; None until enough jobs finished."""
        if self.jobs_done < JOBS_BEFORE_ESTIMATE:
            return None
        return self.elapsed(now) / self.jobs_done * max(0, self.jobs_total - self.jobs_done)

    def status(self, now: float) -> str:
        """``cells 37/254 · jobs 45/330 · 0:42 elapsed · about 1:10 left``"""
        parts = [f"cells {self.cells_done}/{self.cells_total}"] if self.cells_total else []
        parts.append(f"jobs {self.jobs_done}/{self.jobs_total}")
        if self.jobs_failed:
            parts.append(f"{self.jobs_failed} failed")
        parts.append(f"{format_duration(self.elapsed(now))} elapsed")
        left = self.seconds_left(now)
        # rounded up: "0:00 left" while jobs still run would read as done
        parts.append("estimating" if left is None else f"about {format_duration(math.ceil(left))} left")
        return " · ".join(parts)

    def plan_line(self) -> str:
        return f"plan: {self.jobs_total} jobs, {self.cells_total} cells"

    def final_line(self, now: float) -> str:
        """The run's last line: how many cells it measured and how long it took, or where it stopped."""
        took = format_duration(self.elapsed(now))
        if self.complete and not self.jobs_failed:
            if self.cells_total:
                return f"cells {self.cells_done}/{self.cells_total} measured in {took}"
            return f"jobs {self.jobs_done}/{self.jobs_total} done in {took} (no cells to measure)"
        failed = f", {self.jobs_failed} failed" if self.jobs_failed else ""
        return (f"stopped after {took}: cells {self.cells_done}/{self.cells_total} measured, "
                f"jobs {self.jobs_done}/{self.jobs_total} done{failed}")

    def quartile_due(self) -> int | None:
        """The highest quartile of the cells passed since the last one reported (once each), or
        None. The last cell is not a quartile: the final line reports it."""
        if not self.cells_total or self.cells_done >= self.cells_total:
            return None
        percent = 100 * self.cells_done / self.cells_total
        reached = max((q for q in QUARTILES if percent >= q), default=0)
        if reached <= self.quartile_reported:
            return None
        self.quartile_reported = reached
        return reached
