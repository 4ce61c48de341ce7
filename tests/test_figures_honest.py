"""Figures that do not mislead: the history draws a noise swing as no change and each UNCLEAR or paired cell with
its interval; the floor figure is readable when every line is a few percent of the floor; and a legend names only
what its figure draws. Checked on the artists the figures hold, not on pixels."""

from __future__ import annotations

import csv
import dataclasses
import importlib
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import Collection
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from convlab.history import store
from convlab.history.verdictrule import SAME, SLOWER, UNCLEAR
from convlab.history.verdicts import CSV_COLUMNS
from convlab.report import figures, historypage
from convlab.report.figuretable import TABLE, figure_entry
from convlab.report.plotting import note_figure_object, report_style, save_figure

# ---- the history


def _measurement(run: int, kernel: str, cell: str, ms: float, verdict: str | None = None,
                 ratio: float | None = None, kernel_hash: str = "v1") -> store.Measurement:
    """One kept row of run ``run`` (1, 2, ...), with the verdict the record step gave it."""
    return store.Measurement(
        row_check=f"{run}-{kernel}-{cell}", run_id=f"2026112{run}T100000-run{run}", cell=_cell(kernel, cell),
        experiment="conv2d", kernel=kernel, variant="default", status="ok", kernel_ms=ms, kernel_ms_iqr=ms * 0.01,
        finished_at=f"2026-11-2{run}T10:00:00", git_commit="c0ffee", code_version="v1", kernel_hash=kernel_hash,
        spec_hash="cfg", gpu_uuid="GPU-a", row_json="{}", verdict=verdict, ratio=ratio)


def _cell(kernel: str, cell: str) -> str:
    return f"results/h100/cells/cuda/conv2d/kernel~{kernel}/{cell}.csv"


def _write_latest(path: Path, rows: list[dict]) -> Path:
    """verdicts/latest.csv as the record step writes it."""
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({"experiment": "conv2d", "variant": "default", "status": "ok", "changed": "kernel files",
                             "previous_run": "20261122T100000-run2", **row})
    return path


def _points(ax) -> list[tuple[float, float]]:
    """Every data point a panel's lines draw (a line across the panel, such as the 1.0 guide, is no data)."""
    return [(float(x), float(y)) for line in ax.lines if line.get_transform() == ax.transData
            for x, y in zip(line.get_xdata(), line.get_ydata()) if math.isfinite(float(y))]


def _panel(figure: Figure, kernel: str):
    (ax,) = [ax for ax in figure.axes if ax.get_title().split("\n")[0] == kernel]
    return ax


def _by_cell(ax, gid: str) -> dict[str, Line2D]:
    return {line.get_label().lstrip("_").rsplit("/", 1)[-1].removesuffix(".csv"): line
            for line in ax.lines if line.get_gid() == gid}


def test_a_same_cell_is_drawn_unchanged_however_far_its_time_moved():
    """Two cells that swing 7 % up and 6 % down between runs, each judged SAME (within its floor): nothing drawn
    moves off the first run's level, and nothing is marked as a change."""
    kept = []
    for run, (a, b) in enumerate([(1.0, 2.0), (1.07, 1.88), (1.0, 2.0)], start=1):
        previous = kept[-2:]
        kept += [_measurement(run, "noisy", "a", a, SAME if previous else "new", a / previous[0].kernel_ms if previous
                              else None),
                 _measurement(run, "noisy", "b", b, SAME if previous else "new", b / previous[1].kernel_ms if previous
                              else None)]
    figure = historypage.history_figure(kept, "h100")
    ax = _panel(figure, "noisy")
    assert {x for x, _ in _points(ax)} == {1.0, 2.0, 3.0}
    assert {y for _, y in _points(ax)} == {1.0}
    assert historypage.relative_times(kept)["noisy"] == [(1, 1.0, False), (2, 1.0, False), (3, 1.0, False)]


@pytest.fixture
def judged_history(tmp_path) -> tuple[Path, Path]:
    """A device folder with a results database of three runs and the latest run's verdicts: an UNCLEAR cell with
    its own floor's interval, and an edited kernel's three cells measured side by side with the previous version:
    SLOWER, SAME, and the same machine code (not timed: ratio 1, although its rows differ by 3 %)."""
    kept = []
    for run, ms in enumerate([1.0, 1.01, 1.09], start=1):
        kept.append(_measurement(run, "unclear", "c", ms, ["new", SAME, UNCLEAR][run - 1],
                                 [None, 1.01, 1.09 / 1.01][run - 1]))
    latest = [{"cell": _cell("unclear", "c"), "kernel": "unclear", "previous_ms": 1.01, "kernel_ms": 1.09,
               "ratio": 1.09 / 1.01, "verdict": UNCLEAR, "ratio_low": 1.02, "ratio_high": 1.14, "own_floor": 0.03}]
    for cell, ms, verdict, ratio, low, high, rounds in (("d", 1.10, SLOWER, 1.104, 1.101, 1.107, 12),
                                                         ("e", 1.03, SAME, 1.006, 0.999, 1.013, 9),
                                                         ("f", 0.97, SAME, 1.0, 1.0, 1.0, 0)):
        kept += [_measurement(1, "edited", cell, 1.0, "new"), _measurement(2, "edited", cell, 1.0, SAME, 1.0),
                 _measurement(3, "edited", cell, ms, verdict, ratio, kernel_hash="v2")]
        latest.append({"cell": _cell("edited", cell), "kernel": "edited", "previous_ms": 1.0, "kernel_ms": ms,
                       "ratio": ratio, "verdict": verdict, "ratio_low": low, "ratio_high": high,
                       "paired_rounds": rounds})
    folder = tmp_path / "h100"
    connection, _ = store.open_for_writing(store.database_path(folder))
    try:
        store.add_measurements(connection, "host", [dataclasses.asdict(m) for m in kept])
    finally:
        connection.close()
    (folder / "verdicts").mkdir()
    return folder, _write_latest(folder / "verdicts" / "latest.csv", latest)


@pytest.fixture
def history_page_figure(judged_history, monkeypatch) -> Figure:
    """The figure the history page draws from the database and verdicts/latest.csv."""
    folder, latest = judged_history
    drawn = []
    real_save = historypage.save_figure
    monkeypatch.setattr(historypage, "save_figure", lambda figure, path: drawn.append(figure) or real_save(figure, path))
    historypage.write_history_page(folder, latest, folder / "figures" / "history.png", folder / "history.html")
    (figure,) = drawn
    return figure


def _level(ax) -> Line2D:
    (line,) = [line for line in ax.lines if line.get_gid() == historypage.LEVEL_LINE]
    return line


def test_unclear_and_paired_cells_are_drawn_with_their_intervals(history_page_figure):
    colors = historypage.VERDICT_COLORS
    unclear = _panel(history_page_figure, "unclear")
    (mark,) = _by_cell(unclear, historypage.CELL_MARK).values()
    # from its previous time (1.01 of its first), by the judged ratio and its interval
    assert mark.get_ydata()[0] == pytest.approx(1.09)
    assert to_rgba(mark.get_markeredgecolor()) == to_rgba(colors[UNCLEAR])
    assert to_rgba(mark.get_markerfacecolor()) == to_rgba("white")  # hollow: not a confirmed change
    (interval,) = _by_cell(unclear, historypage.CELL_INTERVAL).values()
    assert (np.nanmin(interval.get_ydata()), np.nanmax(interval.get_ydata())) == pytest.approx((1.01 * 1.02,
                                                                                                 1.01 * 1.14))
    # the unclear step leaves the kernel's line where it was
    assert list(_level(unclear).get_ydata()) == [1.0, 1.0, 1.0]

    edited = _panel(history_page_figure, "edited")
    marks, intervals = _by_cell(edited, historypage.CELL_MARK), _by_cell(edited, historypage.CELL_INTERVAL)
    expected = {"d": (SLOWER, "D", 1.104, (1.101, 1.107)), "e": (SAME, "D", 1.006, (0.999, 1.013)),
                "f": (SAME, "s", 1.0, (1.0, 1.0))}  # f: the same machine code, at ratio 1 whatever its rows say
    assert set(marks) == set(intervals) == set(expected)
    for cell, (verdict, marker, y, (low, high)) in expected.items():
        assert to_rgba(marks[cell].get_markeredgecolor()) == to_rgba(colors[verdict]), cell
        assert marks[cell].get_marker() == marker and marks[cell].get_ydata()[0] == pytest.approx(y), cell
        assert 2.5 < marks[cell].get_xdata()[0] < 3.5, cell  # at the run that judged it
        ys = intervals[cell].get_ydata()
        assert (np.nanmin(ys), np.nanmax(ys)) == pytest.approx((low, high)), cell
    # only the SLOWER cell moves the kernel's line: the geomean of 1.104, 1 and 1
    assert list(_level(edited).get_ydata()) == pytest.approx([1.0, 1.0, 1.104 ** (1 / 3)])


def test_a_mark_stands_where_the_cell_measured_after_an_unclear_step():
    """A cell that dropped to half its time (UNCLEAR) and came back to 1.2 times it (UNCLEAR against the half): the
    second mark is at 1.2, not at 2.4 from the unmoved line."""
    kept = [_measurement(1, "k", "a", 1.0, "new"), _measurement(2, "k", "a", 0.5, UNCLEAR, 0.5),
            _measurement(3, "k", "a", 1.2, UNCLEAR, 2.4)]
    ax = _panel(historypage.history_figure(kept, "h100"), "k")
    marks = sorted((float(line.get_xdata()[0]), float(line.get_ydata()[0])) for line in ax.lines
                   if line.get_gid() == historypage.CELL_MARK)
    assert marks == [(2.0, 0.5), (3.0, pytest.approx(1.2))]
    assert list(_level(ax).get_ydata()) == [1.0, 1.0, 1.0]


def test_the_history_legend_names_what_is_drawn(history_page_figure):
    (legend,) = history_page_figure.legends
    texts = [text.get_text() for text in legend.get_texts()]
    labels = historypage.HOW_LABELS
    assert texts == [texts[0], SLOWER, "UNCLEAR (not confirmed)", SAME, labels[historypage.HISTORY_RULE],
                     labels[historypage.PAIRED], labels[historypage.SAME_CODE], "its interval of new/previous",
                     "the kernel's files changed"]
    # no interval, no pair, no edit and no SAME mark drawn: none of them in the legend
    alone = historypage.history_figure([_measurement(1, "k", "a", 1.0, "new"),
                                        _measurement(2, "k", "a", 1.5, UNCLEAR, 1.5)], "h100")
    (legend,) = alone.legends
    assert [text.get_text() for text in legend.get_texts()][1:] == ["UNCLEAR (not confirmed)",
                                                                    labels[historypage.HISTORY_RULE]]


# ---- the figures of the figure table


def _row(kernel: str, size: int, stride: int, ms: float, pct: float, variant: str = "block~16",
         status: str = "ok") -> dict:
    return {"experiment": "conv2d", "kernel": kernel, "variant": variant, "backend": "cuda",
            "implementation": f"{kernel}.cu", "H": float(size), "W": float(size), "filter_size": 3.0,
            "stride": float(stride), "status": status, "reason": "" if status == "ok" else "planted",
            "kernel_ms": ms, "gflops": 2.0 / ms if ms == ms else math.nan, "pct_of_floor": pct,
            "device": "NVIDIA H100", "timing_mode": "warm", "code_version": "v1"}


@pytest.fixture(scope="module")
def few_percent() -> pd.DataFrame:
    """Every kernel a few percent of the floor or less (0.15 % to 6.4 %); winograd's rows have no % of the floor
    (nor a throughput), and direct's block~64 never produced a time."""
    rows = []
    for size in (256, 1024, 4096):
        scale = size / 256
        for stride in (1, 2):
            rows += [_row("direct", size, stride, 0.05 * scale**2, 0.4 * scale / stride),
                     _row("direct", size, stride, 0.07 * scale**2, 0.3 * scale / stride, variant="block~8"),
                     _row("direct", size, stride, math.nan, math.nan, variant="block~64", status="invalid_config"),
                     _row("im2col_gemm", size, stride, 0.03 * scale**2, 1.1 * scale**0.5),
                     _row("fft", size, stride, 0.2 * scale**2, 0.15 * scale**0.3),
                     {**_row("winograd", size, stride, 0.04 * scale**2, math.nan), "gflops": math.nan}]
    return pd.DataFrame(rows)


def _drawn_figure(name: str, frame: pd.DataFrame, tmp_path: Path, monkeypatch) -> Figure:
    """The figure the table's entry ``name`` draws from ``frame``, as its draw function saves it."""
    entry = figure_entry(name)
    module, function = entry.draw.split(":")
    drawn = []
    monkeypatch.setattr(figures, "save_figure", lambda figure, path: drawn.append(figure) or path)
    with report_style():
        getattr(importlib.import_module(module), function)(frame, tmp_path / entry.file)
    (figure,) = drawn
    return figure


def test_the_floor_figure_is_readable_when_every_line_is_a_few_percent(few_percent, tmp_path, monkeypatch):
    figure = _drawn_figure("pct_of_floor_vs_size", few_percent, tmp_path, monkeypatch)
    panels = [ax for ax in figure.axes if ax.get_title().startswith("stride")]
    assert len(panels) == 2
    for ax in panels:
        ys = [y for _, y in _points(ax)]
        low, high = ax.get_ylim()
        assert ys and max(ys) < 10 and low < min(ys) and max(ys) < 100 < high  # every point, and the floor
        # the lines span a third of the panel's height or more, where a 0-110 % axis squeezed them into a twentieth
        (bottom, top) = [ax.transAxes.inverted().transform(ax.transData.transform((1.0, y)))[1]
                         for y in (min(ys), max(ys))]
        assert top - bottom > 1 / 3
        # and the axis says what the values are: labelled ticks within the lines' range
        figure.canvas.draw()
        labelled = [tick.get_loc() for tick in ax.yaxis.get_major_ticks() + ax.yaxis.get_minor_ticks()
                    if tick.label1.get_text() and low <= tick.get_loc() <= high]
        assert len(labelled) >= 3 and any(min(ys) <= loc <= max(ys) for loc in labelled)


def _colour(color) -> tuple[float, ...]:
    return tuple(round(c, 3) for c in to_rgba(color))


def _drawn_colours(figure: Figure) -> set[tuple[float, ...]]:
    """The colour of every line, point and bar drawn with at least one value."""
    colours = set()
    for ax in figure.axes:
        for line in ax.lines:
            if any(math.isfinite(float(y)) for y in line.get_ydata()):
                colours |= {_colour(line.get_color()), _colour(line.get_markerfacecolor())}
        for collection in ax.collections:
            if isinstance(collection, Collection) and len(collection.get_offsets()):
                colours |= {_colour(c) for c in collection.get_facecolors()}
        colours |= {_colour(patch.get_facecolor()) for patch in ax.patches if patch.get_width() > 0}
    return colours


def _legend_entries(figure: Figure) -> list[tuple[str, tuple[float, ...]]]:
    legends = list(figure.legends) + [ax.get_legend() for ax in figure.axes if ax.get_legend() is not None]
    entries = []
    for legend in legends:
        for handle, text in zip(legend.legend_handles, legend.get_texts()):
            colour = handle.get_facecolor() if isinstance(handle, Patch) else handle.get_color()
            entries.append((text.get_text(), _colour(colour)))
    return entries


@pytest.mark.parametrize("name", [entry.name for entry in TABLE if entry.file.endswith(".png")])
def test_every_legend_of_the_figure_table_names_only_what_is_drawn(name, few_percent, tmp_path, monkeypatch):
    figure = _drawn_figure(name, few_percent, tmp_path, monkeypatch)
    drawn = _drawn_colours(figure)
    for text, colour in _legend_entries(figure):
        assert colour in drawn, f"{name}: the legend names {text!r}, which has no point in the figure"
    # the kernel without a value and the variant without a time, by name
    assert not any("winograd" in text or "block~64" in text for text, _ in _legend_entries(figure))


def test_a_long_history_draws_and_lists_its_last_runs_only(tmp_path, monkeypatch):
    """Sixty runs kept: the figure draws the last SHOWN_RUNS of them at their own run numbers, each cell
    relative to its first measurement among them, and the page lists them and counts the rest."""
    runs = historypage.SHOWN_RUNS + 10
    kept = [dataclasses.replace(_measurement(1, "k", "a", 1.0 + run / 100, None if run == 0 else SAME, 1.0),
                                row_check=f"{run}-k-a", run_id=f"run{run:03d}", finished_at=f"2026-11-01T{run:05d}")
            for run in range(runs)]
    folder = tmp_path / "h100"
    connection, _ = store.open_for_writing(store.database_path(folder))
    try:
        store.add_measurements(connection, "host", [dataclasses.asdict(m) for m in kept])
    finally:
        connection.close()
    (folder / "verdicts").mkdir()
    latest = _write_latest(folder / "verdicts" / "latest.csv", [])
    drawn = []
    real_save = historypage.save_figure
    monkeypatch.setattr(historypage, "save_figure", lambda figure, path: drawn.append(figure) or real_save(figure, path))
    line = historypage.write_history_page(folder, latest, folder / "figures" / "history.png", folder / "history.html")
    (figure,) = drawn
    xs = list(_level(_panel(figure, "k")).get_xdata())
    assert xs == list(range(11, runs + 1)) and list(_level(_panel(figure, "k")).get_ydata()) == [1.0] * 50
    assert _panel(figure, "k").get_xlim() == (10.5, runs + 0.5)  # the runs drawn fill the axis
    assert f"the last {historypage.SHOWN_RUNS} of {runs} runs kept" in figure.get_supxlabel()
    assert f"over the last {historypage.SHOWN_RUNS} runs" in figure.get_suptitle()
    page = (folder / "history.html").read_text()
    assert page.count("<td>run0") == historypage.SHOWN_RUNS and "10 earlier runs" in page
    assert f"{runs} runs" in line


def test_a_note_figures_long_sentence_is_wrapped_inside_the_figure(tmp_path, recwarn):
    """A sentence in place of a figure (an unreadable database's reason) fits the figure's width:
    wider, the layout would have no margins left and warn, and the sentence would be cut off."""
    reason = ("results/h200/history.sqlite cannot be read: file is not a database (it was damaged or cut "
              "short); the next plain run rebuilds it from the rows on disk")
    figure = note_figure_object("h200: kernel times across runs", reason)
    (text,) = figure.axes[0].texts
    assert text.get_text().replace("\n", " ") == reason and "\n" in text.get_text()
    save_figure(figure, tmp_path / "note.png")
    assert not [warning for warning in recwarn if "Tight layout" in str(warning.message)]
    renderer = figure.canvas.get_renderer()
    assert text.get_window_extent(renderer).width < figure.bbox.width
