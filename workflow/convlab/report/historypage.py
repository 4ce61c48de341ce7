"""The report's history: each kernel's time across the runs of its device's results database,
moved only where a verdict says it changed, its judged cells marked with their intervals, and a
page with the latest run's verdicts."""

from __future__ import annotations

import html
import math
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from convlab.history import store
from convlab.history.listing import short_cell
from convlab.history.verdictrule import FASTER, SAME, SLOWER, TIMED_VERDICTS, UNCLEAR, Ratio
from convlab.history.verdicts import ORDER, LatestVerdict, geomean, latest_rows, read_latest_verdicts
from convlab.report.pages import html_page, write_page
from convlab.report.plotting import natural_order, new_figure, note_figure, note_figure_object, panel_title, save_figure

COLUMNS = 5
# The runs the figure and the page show: the latest ones.
SHOWN_RUNS = 50
RELATIVE_LABEL = "time / first time\n(1 = unchanged)"
LEVEL_COLOR = "#3a6ea5"
FILES_CHANGED_COLOR = "#7b3294"  # not red: red is SLOWER
VERDICT_COLORS = {FASTER: "#1a9850", SLOWER: "#d73027", UNCLEAR: "#e08e00", SAME: "0.45"}
# How a cell's verdict was reached, and the marker it is drawn with.
HISTORY_RULE, PAIRED, SAME_CODE = "history rule", "paired", "same machine code"
MARKERS = {HISTORY_RULE: "o", PAIRED: "D", SAME_CODE: "s"}
HOW_LABELS = {HISTORY_RULE: "judged against its previous run's row",
              PAIRED: "paired: timed side by side with the previous version",
              SAME_CODE: "paired, the same machine code: not timed (ratio 1)"}
CAP = 0.07  # half the width of an interval's caps, in runs
MARK_SPREAD = 0.3  # a run's marks spread over ± this around the run's x, so that they do not hide each other
# gids name what an artist is, for whoever reads the figure back (the tests do).
LEVEL_LINE = "kernel-level"
CELL_MARK = "cell-mark"
CELL_INTERVAL = "cell-interval"
FILES_CHANGED = "files-changed"


@dataclass(frozen=True)
class JudgedStep:
    """A cell's step from its previous ok measurement to a later one, as its verdict judged it: its ratio (the
    measured one where the verdict gave none), with the interval and the rounds the verdict gave. ``before``: the
    previous measurement's time over the cell's first time, from which the verdict's ratio was judged."""

    kernel: str
    cell: str
    run: int
    verdict: str
    ratio: Ratio
    before: float

    @property
    def how(self) -> str:
        if self.ratio.rounds is None:
            return HISTORY_RULE
        return SAME_CODE if self.ratio.rounds == 0 else PAIRED

    @property
    def at(self) -> float:
        """Where the step puts the cell: its previous time over its first, times the judged ratio (a pair's
        ratio where it was paired, 1 where both versions are the same machine code)."""
        return self.before * self.ratio.value

    @property
    def interval(self) -> tuple[float, float] | None:
        if self.ratio.low is None or self.ratio.high is None:
            return None
        return self.before * self.ratio.low, self.before * self.ratio.high

    @property
    def marked(self) -> bool:
        """Drawn as a mark of its own: a change or an unclear one, and every paired cell (its interval is
        the pair's). A SAME cell judged by the history's rule is the kernel's line itself."""
        return self.verdict != SAME or self.ratio.rounds is not None


def _step_ratio(verdict: str | None, judged: float | None, measured: float) -> float:
    """How far a step moves a cell's level: by its ratio where the verdict is a change, not at all where it is
    SAME (however its times moved) or UNCLEAR (drawn as a mark instead), and by the measured ratio where no
    verdict judged it (a row kept without one)."""
    if verdict in (FASTER, SLOWER):
        return judged or measured
    if verdict in (SAME, UNCLEAR):
        return 1.0
    return measured


def history_levels(measurements: list[store.Measurement], latest: Mapping[str, LatestVerdict] | None = None,
                   earlier_runs: int = 0) -> tuple[dict[str, list[tuple[int, float, bool]]], list[JudgedStep]]:
    """Per kernel, per run that measured it (in run order): the geomean over its cells of each cell's level (its
    time relative to its first ok measurement, each step counted as its verdict judged it: _step_ratio), and
    whether the kernel's files changed since the kernel's previous run; and every judged step. ``latest``: the
    latest run's verdicts (read_latest_verdicts), which give the interval and the pairing of each cell's last
    step."""
    latest = latest or {}
    run_order: dict[str, int] = {}
    for m in measurements:
        run_order.setdefault(m.run_id, len(run_order))
    last_measurement = {m.cell: m for m in measurements}
    first_ms: dict[str, float] = {}
    previous_ms: dict[str, float] = {}
    level: dict[str, float] = {}
    per_run: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    hashes: dict[str, dict[int, str]] = defaultdict(dict)
    steps: list[JudgedStep] = []
    for m in measurements:
        index = run_order[m.run_id] + earlier_runs
        if m.status != "ok" or not m.kernel_ms:
            continue
        if m.cell in level:
            told = latest.get(m.cell) if last_measurement[m.cell] is m else None
            # the latest run's own verdict on this step, with its interval; else the one kept with the row
            verdict, ratio = (told.verdict, told.ratio) if told is not None else (m.verdict, Ratio(m.ratio))
            measured = m.kernel_ms / previous_ms[m.cell]
            if verdict in TIMED_VERDICTS:
                # from the previous measurement, whatever its verdict: the ratio was judged against it
                steps.append(JudgedStep(m.kernel, m.cell, index + 1, verdict, replace(ratio, value=ratio.value or measured),
                                        previous_ms[m.cell] / first_ms[m.cell]))
            level[m.cell] *= _step_ratio(verdict, ratio.value, measured)
        else:
            level[m.cell] = 1.0
            first_ms[m.cell] = m.kernel_ms
        previous_ms[m.cell] = m.kernel_ms
        per_run[m.kernel][index].append(level[m.cell])
        hashes[m.kernel][index] = m.kernel_hash
    series = {}
    for kernel, runs in per_run.items():
        points, last_hash = [], None
        for index in sorted(runs):
            changed = last_hash is not None and hashes[kernel][index] != last_hash
            points.append((index + 1, geomean(runs[index]), changed))
            last_hash = hashes[kernel][index]
        series[kernel] = points
    return series, steps


def relative_times(measurements: list[store.Measurement], latest: Mapping[str, LatestVerdict] | None = None
                   ) -> dict[str, list[tuple[int, float, bool]]]:
    """Per kernel, per run that measured it: its level (history_levels) and whether its files had changed."""
    return history_levels(measurements, latest)[0]


def render_history_figure(measurements: list[store.Measurement], device: str, out: str | Path,
                          latest: Mapping[str, LatestVerdict] | None = None, earlier_runs: int = 0) -> Path:
    return save_figure(history_figure(measurements, device, latest, earlier_runs), Path(out))


def _spread(count: int) -> list[float]:
    """x offsets of a run's ``count`` marks around the run."""
    if count == 1:
        return [0.0]
    return [-MARK_SPREAD + 2 * MARK_SPREAD * i / (count - 1) for i in range(count)]


def _draw_marks(ax: Axes, steps: list[JudgedStep]) -> list[float]:
    """Each marked step of one kernel at its run, coloured by its verdict, shaped by how it was judged (an
    UNCLEAR one hollow: not a change), with its interval as a bar; returns every y drawn."""
    by_run: dict[int, list[JudgedStep]] = defaultdict(list)
    for step in steps:
        by_run[step.run].append(step)
    ys = []
    for run, here in by_run.items():
        here.sort(key=lambda step: (step.at, step.cell))
        for offset, step in zip(_spread(len(here)), here):
            x, color = run + offset, VERDICT_COLORS[step.verdict]
            interval = step.interval
            if interval is not None:
                low, high = interval
                # capped: a pair's interval of a few tenths of a percent is a bar too short to see without its caps
                ax.plot([x - CAP, x + CAP, math.nan, x, x, math.nan, x - CAP, x + CAP],
                        [low, low, math.nan, low, high, math.nan, high, high], color=color, linewidth=1.3,
                        solid_capstyle="butt", zorder=3, gid=CELL_INTERVAL, label=f"_{step.cell}")
                ys.extend(interval)
            ax.plot([x], [step.at], linestyle="none", marker=MARKERS[step.how], markersize=5.5, color=color,
                    markeredgecolor=color, markeredgewidth=1.2,
                    markerfacecolor="white" if step.verdict == UNCLEAR else color, zorder=4, gid=CELL_MARK,
                    label=f"_{step.cell}")  # the leading underscore keeps a cell's name out of any legend
            ys.append(step.at)
    return ys


def _panel_heading(kernel: str, last_run: int, steps: list[JudgedStep]) -> str:
    """The kernel's name, and its verdicts in its last run: the SAME cells have no mark of their own."""
    counts = Counter(step.verdict for step in steps if step.kernel == kernel and step.run == last_run)
    if not counts:
        return kernel
    return f"{kernel}\nrun {last_run}: " + ", ".join(f"{counts[word]} {word}" for word in ORDER if counts[word])


def _legend_handles(steps: list[JudgedStep], any_files_changed: bool) -> list[Artist]:
    """One entry for each thing drawn, and only those."""
    handles = [Line2D([], [], color=LEVEL_COLOR, marker="o", markersize=3.5, linewidth=1.2,
                      label="the kernel's time (only FASTER and\nSLOWER steps move it)")]
    verdicts = {step.verdict for step in steps}
    # a swatch per verdict: the marker's shape says how the cell was judged, its colour the verdict
    handles += [Patch(facecolor="white" if word == UNCLEAR else VERDICT_COLORS[word], edgecolor=VERDICT_COLORS[word],
                      linewidth=1.2, label=f"{word} (not confirmed)" if word == UNCLEAR else word)
                for word in ORDER if word in verdicts]
    hows = {step.how for step in steps}
    handles += [Line2D([], [], linestyle="none", marker=MARKERS[how], markersize=6, color="0.3", label=HOW_LABELS[how])
                for how in (HISTORY_RULE, PAIRED, SAME_CODE) if how in hows]
    if any(step.interval is not None for step in steps):
        handles.append(Line2D([], [], linestyle="none", marker="|", markersize=14, markeredgewidth=1.3, color="0.3",
                              label="its interval of new/previous"))
    if any_files_changed:
        handles.append(Line2D([], [], color=FILES_CHANGED_COLOR, linestyle="--", linewidth=0.9,
                              label="the kernel's files changed"))
    return handles


def history_figure(measurements: list[store.Measurement], device: str,
                   latest: Mapping[str, LatestVerdict] | None = None, earlier_runs: int = 0) -> Figure:
    """Small multiples, one panel per kernel: its level per run (history_levels), which a noise swing leaves
    where it was; a mark for each cell judged FASTER, SLOWER or UNCLEAR and each paired cell, with its interval
    where the latest run's verdicts give one; a dashed line where the kernel's files changed. ``measurements``:
    those of the last runs kept, after ``earlier_runs`` runs that are not drawn."""
    series, steps = history_levels(measurements, latest, earlier_runs)
    if not series:
        return note_figure_object(f"{device}: kernel times across runs", "no ok measurement kept yet")
    # a kernel measured in one run only has no history yet: a panel of one dot at 1 says nothing, so it is
    # named in a line instead
    once = natural_order(kernel for kernel, points in series.items() if len(points) == 1)
    kernels = sorted(kernel for kernel in series if kernel not in once)
    shown = len({m.run_id for m in measurements})
    runs = earlier_runs + shown
    if not kernels:
        kept = ("one run kept so far" if runs == 1 else
                f"{runs} runs kept, but each kernel was measured in one of them only")
        return note_figure_object(
            f"{device}: kernel times across runs",
            f"{kept}: the {len(once)} kernels have no history to draw yet.\nA later run that measures "
            "their cells again shows how each kernel's time moved,\njudged cell by cell.", width=7.5, height=2.2)
    rows = math.ceil(len(kernels) / COLUMNS)
    columns = min(COLUMNS, len(kernels))
    figure, axes = new_figure(rows, columns, width=2.8, height=2.1, share=False)
    figure.set_figheight(2.1 * rows + (1.2 if once else 1.0))  # for the three or four lines of title
    flat = [ax for row in axes for ax in row]
    marked = [step for step in steps if step.marked]
    any_files_changed = False
    for index, (ax, kernel) in enumerate(zip(flat, kernels)):
        points = series[kernel]
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        ax.plot(xs, ys, marker="o", markersize=3.5, color=LEVEL_COLOR, linewidth=1.2, zorder=2, gid=LEVEL_LINE)
        for x, _, changed in points:
            if changed:
                any_files_changed = True
                ax.axvline(x - 0.5, color=FILES_CHANGED_COLOR, linestyle="--", linewidth=0.9, gid=FILES_CHANGED)
        drawn = ys + _draw_marks(ax, [step for step in marked if step.kernel == kernel])
        ax.axhline(1.0, color="0.6", linewidth=0.6)
        panel_title(ax, _panel_heading(kernel, points[-1][0], steps), fontsize=9)
        # linear: run-to-run changes are a few percent, which a log axis leaves without a tick
        low, high = min(drawn + [1.0]), max(drawn + [1.0])
        margin = max(0.05, (high - low) * 0.15)
        ax.set_ylim(low - margin, high + margin)
        ax.yaxis.set_major_locator(MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10]))
        ax.yaxis.set_major_formatter(lambda v, _: f"{v:.2f}")
        ax.set_xlim(earlier_runs + 0.5, max(xs) + 0.5)
        # whole runs only: a run is a count, and a lone run's axis would otherwise read 0.6 ... 1.4
        ax.xaxis.set_major_locator(MaxNLocator(nbins=6, integer=True, min_n_ticks=1))
        ax.tick_params(labelsize=7)
        if index % columns == 0:  # each row's first panel names the y axis
            ax.set_ylabel(RELATIVE_LABEL, fontsize=8)
    for ax in flat[len(kernels):]:
        ax.set_axis_off()
    lone_run = f"\nmeasured in one run only, so not drawn: {_names(once)}" if once else ""
    window = (f"per run over the last {shown} runs, relative to each cell's first measurement in them"
              if earlier_runs else "per run, relative to each cell's first measurement")
    figure.suptitle(f"{device}: each kernel's time {window} (geomean over its cells)\nits line moves only by the cells judged FASTER or SLOWER: a SAME cell stays where it "
                    "was however its time moved\nmarks: each cell judged FASTER, SLOWER or UNCLEAR and each paired "
                    f"cell, at its previous time over its first times its judged new/previous{lone_run}", fontsize=10)
    kept = f"the last {shown} of {runs} runs kept" if earlier_runs else f"{runs} run{'s' if runs != 1 else ''} kept"
    figure.supxlabel(f"run (in order; {kept})", fontsize=9)
    handles = _legend_handles(marked, any_files_changed)
    # below the panels: beside one row of them its entries would stand taller than the row
    figure.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(3, len(handles)),
                  frameon=False, fontsize=8)
    return figure


def _names(kernels: list[str], shown: int = 8) -> str:
    more = len(kernels) - shown
    return ", ".join(kernels[:shown]) + (f" and {more} more" if more > 0 else "")


def _verdict_rows(latest_csv: Path) -> list[dict[str, str]]:
    rank = {word: i for i, word in enumerate(ORDER)}
    return sorted(latest_rows(latest_csv), key=lambda r: (rank.get(r["verdict"], -1), r["kernel"], r["cell"]))


def _ratio_text(row: dict[str, str]) -> str:
    """The ratio, with its interval where the cell's pair or its own floor gave one."""
    if not row["ratio"]:
        return ""
    text = f"{float(row['ratio']):.3f}"
    if row.get("ratio_low") and row.get("ratio_high"):
        text += f" [{float(row['ratio_low']):.3f}, {float(row['ratio_high']):.3f}]"
    return text


def verdict_note(row: dict[str, str]) -> str:
    """How sure the verdict is (measured side by side with the previous version, or unconfirmed),
    and why it changed where the pair was explained by its hardware counts."""
    if row.get("paired_rounds") in ("0", 0):
        return "the same machine code as the previous version, launched alike: not timed again"
    if row.get("paired_rounds"):
        why = f"; {row['why']}" if row.get("why") else ""
        return f"paired: side by side with the previous version, {row['paired_rounds']} rounds{why}"
    return f"unconfirmed: {row['unconfirmed']}" if row.get("unconfirmed") else ""


def write_history_page(folder: str | Path, latest_csv: str | Path, figure_out: str | Path, out: str | Path) -> str:
    """The figure and the page: the latest run's verdicts, cell by cell, and the last SHOWN_RUNS runs."""
    folder = Path(folder)
    device = folder.name
    try:
        connection = store.open_for_reading(store.database_path(folder))
    except store.HistoryUnavailable as error:
        note_figure(Path(figure_out), f"{device}: kernel times across runs", str(error))
        measurements, runs = [], []
    else:
        try:
            runs = store.runs(connection)
            # the last runs only: a year of history costs the page what the runs it shows cost
            shown = runs[-SHOWN_RUNS:]
            measurements = store.measurements(connection, run_ids=[run[0] for run in shown], with_rows=False)
        finally:
            connection.close()
        render_history_figure(measurements, device, figure_out, read_latest_verdicts(latest_csv),
                              earlier_runs=len(runs) - len(shown))
    colours = {"SAME": "#eef5ee", "FASTER": "#cfe8cf", "SLOWER": "#f6cccc", "UNCLEAR": "#fff2c2"}
    rows = _verdict_rows(Path(latest_csv))
    head = ("verdict", "kernel", "cell", "previous ms", "ms", "new/previous [interval]", "changed", "note")
    body = "".join(
        f'<tr style="background:{colours.get(r["verdict"], "#fff")}">'
        + "".join(f"<td>{html.escape(v)}</td>" for v in (
            r["verdict"], r["kernel"]))
        # the cell's path breaks after a slash, the note between words; a verdict, a name or a number never
        + f'<td class="wrap">{"/<wbr>".join(html.escape(part) for part in short_cell(r["cell"]).split("/"))}</td>'
        + "".join(f"<td>{html.escape(v)}</td>" for v in (r["previous_ms"], r["kernel_ms"], _ratio_text(r)))
        + "".join(f'<td class="wrap">{html.escape(v)}</td>' for v in (r["changed"].replace(";", ", "), verdict_note(r)))
        + "</tr>" for r in rows)
    run_rows = "".join(f"<tr><td>{html.escape(a)}</td><td>{html.escape(b)}</td><td>{html.escape((c or '')[:10])}"
                       f"</td><td>{d}</td></tr>" for b, a, c, d in reversed(runs[-SHOWN_RUNS:]))
    if len(runs) > SHOWN_RUNS:
        run_rows += f'<tr><td colspan="4">{len(runs) - SHOWN_RUNS} earlier runs (<code>convlab history --limit N</code>)</td></tr>'
    page = html_page(
        f"{device}: history", "body{font-family:sans-serif;margin:1.5em;max-width:1300px}"
        "table{border-collapse:collapse;margin-bottom:1.5em}td,th{border:1px solid #ccc;padding:3px 8px;"
        "text-align:left;font-size:13px;white-space:nowrap}td.wrap{white-space:normal}th{background:#f0f0f0}",
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
