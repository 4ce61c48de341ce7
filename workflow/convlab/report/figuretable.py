"""The figure table: every figure and page the `figures` command renders, one rule `figures` job each. The rules
(workflow/rules/report.smk: outputs, inputs, report entries and captions), the command line (`figures --figure`)
and the tests read it, so a new figure is one entry here, its draw function and its caption file
(workflow/report/<caption>).

Standard library only: the command line reads it before it has site-packages, and the Snakefile without loading
the drawing code (a draw function is named "module:function" and imported when its figure is drawn).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# What a figure reads, and the report category it is filed under (families are named by their role: which
# family plays it is convlab.report.familydisplay's to say).
SIZE_FAMILY = "size_family"  # the rows of the family drawn against size (size_figures): its slice of the
# summary, results/<device>/summary/<family>.csv; as a category, that family's name
EVERY_ROW = "every_row"  # every row of the device's summary, results/<device>/summary.csv
READS = (SIZE_FAMILY, EVERY_ROW)
SUMMARY = "Summary"  # the report category of the run's summary pages
BACKEND = "{backend}"  # in a label: the run's backend


@dataclass(frozen=True)
class ReportFigure:
    """One file of the figures folder, results/<device>/figures/<file>, and its report entry."""

    name: str  # `figures --figure <name>`; its job's log is logs/figures/<file>.log
    file: str  # the file it is drawn into
    reads: str  # SIZE_FAMILY or EVERY_ROW: the rows its draw function is given
    draw: str  # "module:function"; function(rows, path) -> path, called in the report's plotting style
    caption: str  # its caption, a file of workflow/report/
    labels: dict[str, str] = field(default_factory=dict)  # its report labels (BACKEND: the run's backend)
    category: str = SIZE_FAMILY  # SIZE_FAMILY (that family's name) or a category of its own (SUMMARY)
    subcategory: str | None = "Figures"
    # started before the report's other jobs: its drawing grows with the grid (a row of panels per kernel) and is
    # among the slowest, so the report stage waits least for it started first
    first: bool = False

    def __post_init__(self) -> None:
        if self.reads not in READS:
            raise ValueError(f"figure {self.name}: reads is one of {', '.join(READS)}, not {self.reads!r}")
        if ":" not in self.draw:
            raise ValueError(f"figure {self.name}: draw names a function as 'module:function', not {self.draw!r}")


DRAW = "convlab.report.figures"

TABLE: tuple[ReportFigure, ...] = (
    ReportFigure("time_vs_size", "time_vs_size.png", SIZE_FAMILY, f"{DRAW}:draw_time_vs_size", "time_vs_size.rst",
                 {"figure": "time vs size", "backend": BACKEND}),
    ReportFigure("gflops_vs_size", "gflops_vs_size.png", SIZE_FAMILY, f"{DRAW}:draw_gflops_vs_size",
                 "gflops_vs_size.rst", {"figure": "GFLOPS vs size", "backend": BACKEND}),
    ReportFigure("pct_of_floor_vs_size", "pct_of_floor_vs_size.png", SIZE_FAMILY, f"{DRAW}:draw_pct_of_floor_vs_size",
                 "pct_of_floor_vs_size.rst", {"figure": "% of floor vs size", "backend": BACKEND}),
    ReportFigure("variants", "variants.png", SIZE_FAMILY, f"{DRAW}:draw_variants", "variants.rst",
                 {"figure": "variants", "backend": BACKEND}, first=True),
    # every cell of the summary, whatever its family, filed beside the figures against size
    ReportFigure("status", "status.png", EVERY_ROW, f"{DRAW}:draw_status", "status.rst",
                 {"figure": "cells by status", "backend": BACKEND}),
    ReportFigure("status_table", "status_table.html", EVERY_ROW, f"{DRAW}:status_table_page", "status_table.rst",
                 {"table": "failed cells"}, category=SUMMARY, subcategory=None),
)

FIGURES: dict[str, ReportFigure] = {entry.name: entry for entry in TABLE}
BY_FILE: dict[str, ReportFigure] = {entry.file: entry for entry in TABLE}
NAMES: tuple[str, ...] = tuple(FIGURES)


def figure_entry(name: str) -> ReportFigure:
    """The entry named ``name``; a ValueError names the table's figures."""
    if name not in FIGURES:
        raise ValueError(f"no figure named {name}; the figures are {', '.join(NAMES)}")
    return FIGURES[name]
