"""``python -m convlab history``: a device's runs, or one kernel's or cell's measurements over
time, from its results database."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from convlab.history import store
from convlab.history.waiting import waiting_line


def short_cell(cell: str) -> str:
    """results/<device>/cells/<backend>/<rest>.csv -> <rest>"""
    parts = Path(cell).with_suffix("").parts
    return "/".join(parts[4:]) if len(parts) > 4 and parts[2] == "cells" else cell


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    return ["  ".join(v.ljust(w) for v, w in zip(r, widths)) + "  " + r[-1] for r in [header, *rows]]


def run_lines(connection, limit: int) -> list[str]:
    """One line per run (the last ``limit``): when, its id, commit, rows added and their verdicts."""
    kept = store.runs(connection)
    shown = kept[-limit:]
    verdicts: dict[str, Counter] = {}
    ids = [run_id for run_id, *_ in shown]
    for start in range(0, len(ids), 500):  # the runs shown only: a long history is not read through
        chunk = ids[start:start + 500]
        for run_id, verdict, n in connection.execute(
                f"SELECT run_id, verdict, count(*) FROM measurements WHERE run_id IN ({','.join('?' * len(chunk))}) "
                "GROUP BY run_id, verdict", chunk):
            verdicts.setdefault(run_id, Counter())[verdict or "?"] += n
    rows = [(recorded_at, run_id, (commit or "")[:10], str(added),
             ", ".join(f"{n} {w}" for w, n in verdicts.get(run_id, Counter()).most_common()))
            for run_id, recorded_at, commit, added in shown]
    if not rows:
        return ["no run has added rows yet"]
    lines = _table(("recorded", "run", "commit", "rows", "verdicts against the previous measurement"), rows)
    if len(kept) > len(shown):
        lines.append(f"({len(kept) - len(shown)} earlier runs not shown; --limit to see more)")
    return lines


def measurement_lines(connection, kernel: str | None, cell: str | None, limit: int) -> list[str]:
    """One line per kept measurement of the kernel or cells, oldest first (the last ``limit``)."""
    kept = store.measurements(connection, kernel=kernel, cell=cell, with_rows=False)
    if not kept:
        what = " and ".join(x for x in (f"kernel {kernel}" if kernel else "", f"cells matching {cell!r}" if cell else "")
                            if x)
        raise store.HistoryUnavailable(f"no measurement of {what} in the results database")
    shown = kept[-limit:]
    rows = []
    for m in shown:
        spread = (f"{100 * m.kernel_ms_iqr / m.kernel_ms:.1f}%"
                  if m.kernel_ms and m.kernel_ms_iqr is not None else "")
        rows.append((m.finished_at, m.run_id, (m.git_commit or "")[:10], m.code_version or "", m.kernel_hash or "",
                     f"{m.kernel_ms:.4g}" if m.kernel_ms else m.status, spread,
                     m.verdict or "", (f"x{m.ratio:.3f}" if m.ratio else ""), short_cell(m.cell)))
    lines = _table(("when", "run", "commit", "code", "kernel files", "kernel_ms", "spread", "verdict", "new/prev",
                    "cell"), rows)
    if len(kept) > len(shown):
        lines.append(f"({len(kept) - len(shown)} earlier measurements not shown; --limit to see more)")
    return lines


def history_lines(folder: str | Path, kernel: str | None = None, cell: str | None = None,
                  limit: int = 50) -> list[str]:
    """The runs of the device folder's database, or the measurements of a kernel or cell, and how
    many rows wait to be added to it, and why."""
    waiting = waiting_line(folder)
    try:
        connection = store.open_for_reading(store.database_path(folder))
    except store.HistoryUnavailable as error:
        if waiting:
            raise store.HistoryUnavailable(f"{error}; {waiting}") from None
        raise
    try:
        lines = measurement_lines(connection, kernel, cell, limit) if kernel or cell else run_lines(connection, limit)
    finally:
        connection.close()
    return lines + ([waiting] if waiting else [])
