"""The report stage's part of the run's plan (convlab.snakefile.runplan): the figures of the figure
table (convlab.report.figuretable), the seeds' comparisons, tables and figures (convlab.report.seeds),
what the report's intro says of this run, and the report stage's final files.

The seeds and their figures are the seed table's; their report category is the family that
reproduces them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from convlab.backends.choice import BackendChoice
from convlab.measure.hostinfo import cpu_name
from convlab.plan.cell import Cell
from convlab.plan.families import FAMILIES
from convlab.report.familydisplay import DISPLAYS, SIZE_FIGURE_FAMILY, seed_family
from convlab.report.figuretable import BACKEND as FIGURE_BACKEND
from convlab.report.figuretable import BY_FILE as FIGURES_BY_FILE
from convlab.report.figuretable import SIZE_FAMILY, ReportFigure
from convlab.report.figuretable import TABLE as FIGURE_TABLE
from convlab.report.seeds import SEEDS, figure_names, figure_stem, figure_stems, report_labels, seed_figure, table_stem

RESULTS = "results/{device}"
SEED_TABLES = "config/seeds/seed_tables.csv"
METHOD_MAP = "config/seeds/method_map.yaml"
SEED_DIR = f"{RESULTS}/seeds"
SEED_FIGURE = f"{SEED_DIR}/{figure_stem('{seed}', '{figure}')}.png"
SEED_TABLE = f"{SEED_DIR}/{table_stem('{seed}')}.html"
# A family's slice of the summary (aggregate.smk), and the comparison of the seeds it reproduces.
FAMILY_SUMMARY = f"{RESULTS}/summary/{{experiment}}.csv"
FAMILY_COMPARISON = f"{SEED_DIR}/comparison/{{experiment}}.csv"


class ReportPlan:
    """The report stage's paths, wildcards and lookups for one run."""

    seed_tables = SEED_TABLES
    method_map = METHOD_MAP
    seed_dir = SEED_DIR
    seed_figure = SEED_FIGURE
    seed_table = SEED_TABLE
    family_summary = FAMILY_SUMMARY
    family_comparison = FAMILY_COMPARISON
    # the seed rules' wildcards: {seed} is an id of the seed table, {figure} a name of one of its figures
    seed_ids = "|".join(SEEDS)
    seed_figures = "|".join(figure_names())
    seed_table_log = f"{RESULTS}/logs/seeds/{table_stem('{seed}')}.log"
    seed_figure_log = f"{RESULTS}/logs/seeds/{figure_stem('{seed}', '{figure}')}.log"
    figure_files = "|".join(entry.file.replace(".", r"\.") for entry in FIGURE_TABLE)

    def __init__(self, config: Mapping[str, Any], choice: BackendChoice, devices: Sequence[str], cells: Sequence[Cell],
                 basedir: str | Path) -> None:
        self.config = config
        self.choice = choice
        self.backend = choice.backend
        self.devices = list(devices)
        self.cells = list(cells)
        self.basedir = Path(basedir)
        self.seeded = [name for name in FAMILIES if DISPLAYS[name].seeds]
        self.seeded_families = "|".join(self.seeded)

    # -- the figure table's figures, by the {file} wildcard
    @staticmethod
    def figure_entry(wildcards: Any) -> ReportFigure:
        return FIGURES_BY_FILE[wildcards.file]

    def figure_filed(self, wildcards: Any) -> tuple[str, str, dict[str, str]]:
        """A figure's report category, subcategory and labels, from the figure table: SIZE_FAMILY is
        filed under the name of the family drawn against size."""
        entry = self.figure_entry(wildcards)
        category = SIZE_FIGURE_FAMILY.name if entry.category == SIZE_FAMILY else entry.category
        labels = {key: value.replace(FIGURE_BACKEND, self.backend) for key, value in entry.labels.items()}
        return category, entry.subcategory, labels

    def figure_category(self, wildcards: Any) -> str:
        return self.figure_filed(wildcards)[0]

    def figure_subcategory(self, wildcards: Any) -> str:
        return self.figure_filed(wildcards)[1]

    def figure_labels(self, wildcards: Any) -> dict[str, str]:
        return self.figure_filed(wildcards)[2]

    def figure_rows(self, wildcards: Any) -> str:
        """The narrowest summary a figure reads: the slice of the family drawn against size, or every row."""
        if self.figure_entry(wildcards).reads == SIZE_FAMILY:
            return FAMILY_SUMMARY.format(device=wildcards.device, experiment=SIZE_FIGURE_FAMILY.name)
        return f"results/{wildcards.device}/summary.csv"

    def figure_name(self, wildcards: Any) -> str:
        return self.figure_entry(wildcards).name

    def figure_priority(self, wildcards: Any) -> int:
        """Above the report's other jobs for a figure the table starts first (its slowest drawings)."""
        return 1 if self.figure_entry(wildcards).first else 0

    def figure_caption(self, wildcards: Any) -> str:
        """The figure's caption file (workflow/report/), for figure.rst to show: a rule has one caption."""
        return (self.basedir / "workflow" / "report" / self.figure_entry(wildcards).caption).read_text()

    # -- the seeds, by the {seed} and {figure} wildcards
    @staticmethod
    def seed_summary(wildcards: Any) -> str:
        """The slice of the summary a seed's figure reads: its family's."""
        return FAMILY_SUMMARY.format(device=wildcards.device, experiment=seed_family(wildcards.seed).name)

    @staticmethod
    def seed_comparison_part(wildcards: Any) -> str:
        """The comparison a seed's table and figures read: its family's seeds'."""
        return FAMILY_COMPARISON.format(device=wildcards.device, experiment=seed_family(wildcards.seed).name)

    @staticmethod
    def seed_experiment(wildcards: Any) -> str:
        """A seed's report category: the family that reproduces it."""
        return seed_family(wildcards.seed).name

    @staticmethod
    def seed_figure_labels(wildcards: Any) -> dict[str, str]:
        return report_labels(wildcards.seed, wildcards.figure)

    @staticmethod
    def seed_table_labels(wildcards: Any) -> dict[str, str]:
        return report_labels(wildcards.seed)

    @staticmethod
    def seed_figure_caption(wildcards: Any) -> str:
        """The figure's caption, for workflow/report/seed_figure.rst. Asked when the DAG is built, so a
        figure the seed does not draw fails there, naming the seed's figures."""
        return seed_figure(wildcards.seed, wildcards.figure).caption

    def intro(self) -> dict[str, Any]:
        """What the report's intro (workflow/report/workflow.rst) says of this run: the backend and
        device resolved here and each family with cells in the grid, with its kernels."""
        if self.backend == "cpu":
            device = f"{cpu_name()} ({os.cpu_count()} cores)"
        else:
            # a login node sees no GPU: the configured device label is all that names it here
            labelled = f"the GPU{'s' if len(self.devices) > 1 else ''} labelled {', '.join(self.devices)}"
            device = ", ".join(sorted(set(self.choice.gpus))) or labelled
        families = []
        for name in FAMILIES:
            cells = [cell for cell in self.cells if cell.experiment == name]
            if cells:
                families.append({"name": name, "label": DISPLAYS[name].label, "seeds": ", ".join(DISPLAYS[name].seeds),
                                 "kernels": ", ".join(sorted({cell.kernel for cell in cells})), "cells": len(cells)})
        return {"backend": self.backend, "requested": self.config["backend"], "device": device,
                "label": ", ".join(self.devices),
                "folders": ", ".join(f"``results/{label}/``" for label in self.devices),
                "families": families, "family_names": [entry["name"] for entry in families]}

    def outputs(self) -> list[str]:
        """The final files of the report stage, those of a device label once per label."""
        per_device = [
            f"{SEED_DIR}/comparison.csv",
            *[f"{SEED_DIR}/{stem}.png" for stem in figure_stems()],
            *[f"{SEED_DIR}/{table_stem(seed)}.html" for seed in SEEDS],
            f"{RESULTS}/figures/roofline.png",
            f"{RESULTS}/findings.html",
            *[f"{RESULTS}/figures/{entry.file}" for entry in FIGURE_TABLE],
        ]
        return [path.format(device=label) for label in self.devices for path in per_device] + ["results/gpus.html"]
