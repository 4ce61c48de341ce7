"""The report's history: each kernel's time across the runs of its device's results database,
marked where its own files changed, and a page with the latest run's verdicts."""

from __future__ import annotations

import csv
import html
import math
from collections import defaultdict
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from convlab.history import store
from convlab.history.listing import short_cell
from convlab.history.verdicts import ORDER, geomean
from convlab.report.pages import html_page, write_page
from convlab.report.plotting import new_figure, note_figure, note_figure_object, panel_title, save_figure

COLUMNS = 5
RELATIVE_LABEL = "time / first time\n(1 = unchanged)"


def relative_times(measurements: list[store.Measurement]) -> dict[str, list[tuple[int, float, bool]]]:
    """Per kernel, per run that measured it (in run order): the geomean over its cells of the
    time relative to the cell's first ok measurement, and whether the kernel's files changed
    since the kernel's previous run."""
    run_order: dict[str, int] = {}
    first: dict[str, float] = {}
    per_run: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    hashes: dict[str, dict[int, str]] = defaultdict(dict)
    for m in measurements:
        index = run_order.setdefault(m.run_id, len(run_order))
        if m.status != "ok" or not m.kernel_ms:
            continue
        base = first.setdefault(m.cell, m.kernel_ms)
        per_run[m.kernel][index].append(m.kernel_ms / base)
        hashes[m.kernel][index] = m.kernel_hash
    series = {}
    for kernel, runs in per_run.items():
        points, last_hash = [], None
        for index in sorted(runs):
            changed = last_hash is not None and hashes[kernel][index] != last_hash
            points.append((index + 1, geomean(runs[index]), changed))
            last_hash = hashes[kernel][index]
        series[kernel] = points
    return series


def render_history_figure(measurements: list[store.Measurement], device: str, out: str | Path) -> Path:
    return save_figure(history_figure(measurements, device), Path(out))


def history_figure(measurements: list[store.Measurement], device: str) -> Figure:
    """Small multiples, one panel per kernel: its relative time per run; a red marker and line
    where its files changed."""
    series = relative_times(measurements)
    if not series:
        return note_figure_object(f"{device}: kernel times across runs", "no ok measurement kept yet")
    kernels = sorted(series)
    rows = math.ceil(len(kernels) / COLUMNS)
    columns = min(COLUMNS, len(kernels))
    figure, axes = new_figure(rows, columns, width=2.8, height=2.1, share=False)
    flat = [ax for row in axes for ax in row]
    for index, (ax, kernel) in enumerate(zip(flat, kernels)):
        points = series[kernel]
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        ax.plot(xs, ys, marker="o", markersize=3.5, color="#3a6ea5", linewidth=1.2)
        for x, y, changed in points:
            if changed:
                ax.axvline(x - 0.5, color="#c0392b", linestyle="--", linewidth=0.9)
                ax.plot([x], [y], marker="^", color="#c0392b", markersize=6)
        ax.axhline(1.0, color="0.6", linewidth=0.6)
        panel_title(ax, kernel, fontsize=9)
        # linear: run-to-run changes are a few percent, which a log axis leaves without a tick
        low, high = min(ys + [1.0]), max(ys + [1.0])
        margin = max(0.05, (high - low) * 0.15)
        ax.set_ylim(low - margin, high + margin)
        ax.yaxis.set_major_locator(MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10]))
        ax.yaxis.set_major_formatter(lambda v, _: f"{v:.2f}")
        ax.set_xlim(0.5, max(xs) + 0.5)
        # whole runs only: a run is a count, and a lone run's axis would otherwise read 0.6 ... 1.4
        ax.xaxis.set_major_locator(MaxNLocator(nbins=6, integer=True, min_n_ticks=1))
        ax.tick_params(labelsize=7)
        if index % columns == 0:  # each row's first panel names the y axis
            ax.set_ylabel(RELATIVE_LABEL, fontsize=8)
    for ax in flat[len(kernels):]:
        ax.set_axis_off()
    runs = len({m.run_id for m in measurements})
    lone_run = ("\none run kept so far: every time is its own first measurement (1); a later run that "
                "re-measures the cells shows how they moved") if runs == 1 else ""
    figure.suptitle(f"{device}: each kernel's time per run (geomean over the cells it re-measured, relative to each "
                    f"cell's first measurement; red: its files changed){lone_run}", fontsize=10)
    figure.supxlabel(f"run (in order; {runs} run{'s' if runs != 1 else ''} kept)", fontsize=9)
    return figure


def _verdict_rows(latest_csv: Path) -> list[dict[str, str]]:
    with open(latest_csv, newline="") as handle:
        rows = list(csv.DictReader(handle))
    rank = {word: i for i, word in enumerate(ORDER)}
    return sorted(rows, key=lambda r: (rank.get(r["verdict"], -1), r["kernel"], r["cell"]))


def _ratio_text(row: dict[str, str]) -> str:
    """The ratio, with its interval where the cell's pair or its own floor gave one."""
    if not row["ratio"]:
        return ""
    text = f"{float(row['ratio']):.3f}"
    if row.get("ratio_low") and row.get("ratio_high"):
        text += f" [{float(row['ratio_low']):.3f}, {float(row['ratio_high']):.3f}]"
    return text


def _note(row: dict[str, str]) -> str:
    """How sure the verdict is: measured side by side with the previous version, or unconfirmed."""
    if row.get("paired_rounds") in ("0", 0):
        return "the same machine code as the previous version, launched alike: not timed again"
    if row.get("paired_rounds"):
        return f"paired: side by side with the previous version, {row['paired_rounds']} rounds"
    return f"unconfirmed: {row['unconfirmed']}" if row.get("unconfirmed") else ""


def write_history_page(folder: str | Path, latest_csv: str | Path, figure_out: str | Path, out: str | Path) -> str:
    """The figure and the page: the latest run's verdicts, cell by cell, and every run."""
    folder = Path(folder)
    device = folder.name
    try:
        connection = store.open_for_reading(store.database_path(folder))
    except store.HistoryUnavailable as error:
        note_figure(Path(figure_out), f"{device}: kernel times across runs", str(error))
        measurements, runs = [], []
    else:
        try:
            measurements, runs = store.measurements(connection), store.runs(connection)
        finally:
            connection.close()
        render_history_figure(measurements, device, figure_out)
    colours = {"SAME": "#eef5ee", "FASTER": "#cfe8cf", "SLOWER": "#f6cccc", "UNCLEAR": "#fff2c2"}
    rows = _verdict_rows(Path(latest_csv))
    head = ("verdict", "kernel", "cell", "previous ms", "ms", "new/previous [interval]", "changed", "note")
    body = "".join(
        f'<tr style="background:{colours.get(r["verdict"], "#fff")}">'
        + "".join(f"<td>{html.escape(v)}</td>" for v in (
            r["verdict"], r["kernel"], short_cell(r["cell"]), r["previous_ms"], r["kernel_ms"], _ratio_text(r),
            r["changed"].replace(";", ", "), _note(r)))
        + "</tr>" for r in rows)
    run_rows = "".join(f"<tr><td>{html.escape(a)}</td><td>{html.escape(b)}</td><td>{html.escape((c or '')[:10])}"
                       f"</td><td>{d}</td></tr>" for b, a, c, d in reversed(runs))
    page = html_page(
        f"{device}: history", "body{font-family:sans-serif;margin:1.5em;max-width:1300px}"
        "table{border-collapse:collapse;margin-bottom:1.5em}td,th{border:1px solid #ccc;padding:3px 8px;"
        "text-align:left;font-size:13px;overflow-wrap:anywhere}th{background:#f0f0f0}",
        f"<h2>{html.escape(device)}: what the latest run changed</h2>"
        f"<p>{len(rows)} cells measured in the latest run that recorded rows; each against its previous ok "
        "measurement on this device (the rule of <code>python -m convlab compare</code>, with the cell's own "
        "floor and its interval where its reruns gave one). "
        f"The figure <code>figures/{html.escape(Path(figure_out).name)}</code> shows each kernel across runs.</p>"
        f"<table><tr>{''.join(f'<th>{h}</th>' for h in head)}</tr>{body}</table>"
        f"<h3>Runs</h3><table><tr><th>recorded</th><th>run</th><th>commit</th><th>rows added</th></tr>{run_rows}"
        "</table>")
    write_page(out, page)
    return f"{out}: {len(rows)} verdicts of the latest run, {len(runs)} runs; {figure_out}"
