"""Wall-clock phases of a cell job, so per-cell overhead can be read off every row."""

from __future__ import annotations

import os
import time


def process_age_s() -> float | None:
    """Seconds since this process started (Linux /proc), or None where unknown."""
    try:
        with open("/proc/self/stat") as handle:
            start_ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as handle:
            uptime = float(handle.read().split()[0])
        return uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


class PhaseClock:
    """Laps of wall-clock time: lap('place') records the time since the previous lap."""

    def __init__(self) -> None:
        self._last = time.perf_counter()
        self.laps: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = self.laps.get(name, 0.0) + (now - self._last) * 1e3
        self._last = now

    def text(self) -> str:
        """e.g. 'place=1.2;setup=40.1;timing=310' (ms)."""
        return ";".join(f"{name}={ms:.4g}" for name, ms in self.laps.items())
