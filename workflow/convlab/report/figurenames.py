"""The report's conv2d figures and its table of failed cells: the names the `figures` command renders them under,
one rule `figures` job each. A new figure is named here, drawn in convlab.report.figures, captioned by
workflow/report/<name>.rst and labelled in workflow/rules/report.smk.

Standard library only: the command line reads it before it has site-packages, and the Snakefile without loading the
drawing code.
"""

from __future__ import annotations

FIGURES = ("time_vs_size", "gflops_vs_size", "pct_of_floor_vs_size", "variants", "status")  # each <name>.png
STATUS_TABLE = "status_table"  # the page of failed cells, status_table.html
NAMES = (*FIGURES, STATUS_TABLE)


def file_name(name: str) -> str:
    """The file ``name`` is rendered to, in the figures folder."""
    return f"{name}.html" if name == STATUS_TABLE else f"{name}.png"


def name_of(file: str) -> str:
    """The name ``file`` of the figures folder is rendered under: file_name's inverse."""
    return file.rsplit(".", 1)[0]
