# Paths and report helpers of the report stage (rules in report.smk): the figures of the figure table
# (convlab.report.figuretable), the seed comparison, and what the report's intro says of this run.
# The seeds and their figures are the seed table's, convlab.report.seeds; their report category is
# the family that reproduces them.
from convlab.snakefile.api import (
    FAMILY_DISPLAYS,
    FIGURE_BACKEND,
    FIGURES_BY_FILE,
    FIGURE_TABLE,
    SEEDS,
    SIZE_FAMILY,
    cpu_name,
    figure_names,
    figure_stem,
    figure_stems,
    report_labels,
    seed_family,
    seed_figure,
    table_stem,
)

SEED_TABLES = "config/seeds/seed_tables.csv"
METHOD_MAP = "config/seeds/method_map.yaml"
SEED_DIR = f"{RESULTS}/seeds"
# The seed rules' wildcards: {seed} is an id of the seed table, {figure} a name of one of its figures.
SEED_IDS = "|".join(SEEDS)
SEED_FIGURES = "|".join(figure_names())
SEED_FIGURE = f"{SEED_DIR}/{figure_stem('{seed}', '{figure}')}.png"
SEED_TABLE = f"{SEED_DIR}/{table_stem('{seed}')}.html"
# A family's slice of the summary (aggregate.smk), and the comparison of the seeds it reproduces.
FAMILY_SUMMARY = f"{RESULTS}/summary/{{experiment}}.csv"
FAMILY_COMPARISON = f"{SEED_DIR}/comparison/{{experiment}}.csv"
SEEDED = [name for name in FAMILIES if FAMILY_DISPLAYS[name].seeds]
SEEDED_FAMILIES = "|".join(SEEDED)


def figure_entry(wildcards):
    """The figure table's entry of a figures job (its {file})."""
    return FIGURES_BY_FILE[wildcards.file]


def figure_filed(wildcards):
    """A figure's report category, subcategory and labels, from the figure table: SIZE_FAMILY is
    filed under the name of the family drawn against size."""
    entry = figure_entry(wildcards)
    if entry.category == SIZE_FAMILY:
        category = SIZE_FIGURE_FAMILY.name
    else:
        category = entry.category
    labels = {
        key: value.replace(FIGURE_BACKEND, BACKEND)
        for key, value in entry.labels.items()
    }
    return category, entry.subcategory, labels


def family_summary(device, family) -> str:
    """A family's slice of a device's summary."""
    return FAMILY_SUMMARY.format(device=device, experiment=family)


def figure_rows(wildcards) -> str:
    """The narrowest summary a figure reads: the slice of the family drawn against size, or every row."""
    if figure_entry(wildcards).reads == SIZE_FAMILY:
        return family_summary(wildcards.device, SIZE_FIGURE_FAMILY.name)
    return f"results/{wildcards.device}/summary.csv"


def seed_summary(wildcards) -> str:
    """The slice of the summary a seed's figure reads: its family's."""
    return family_summary(wildcards.device, seed_family(wildcards.seed).name)


def seed_comparison_part(wildcards) -> str:
    """The comparison a seed's table and figures read: its family's seeds'."""
    return FAMILY_COMPARISON.format(
        device=wildcards.device, experiment=seed_family(wildcards.seed).name
    )


def figure_priority(wildcards) -> int:
    """Above the report's other jobs for a figure the table starts first (its slowest drawings)."""
    return 1 if figure_entry(wildcards).first else 0


def figure_caption(wildcards) -> str:
    """The figure's caption file (workflow/report/), for figure.rst to show: a rule has one caption."""
    return Path(
        workflow.basedir, "workflow", "report", figure_entry(wildcards).caption
    ).read_text()


def seed_experiment(wildcards) -> str:
    """A seed's report category: the family that reproduces it."""
    return seed_family(wildcards.seed).name


def seed_figure_labels(wildcards) -> dict[str, str]:
    return report_labels(wildcards.seed, wildcards.figure)


def seed_table_labels(wildcards) -> dict[str, str]:
    return report_labels(wildcards.seed)


def seed_figure_caption(wildcards) -> str:
    """The figure's caption, for workflow/report/seed_figure.rst. Asked when the DAG is built, so a
    figure the seed does not draw fails there, naming the seed's figures."""
    return seed_figure(wildcards.seed, wildcards.figure).caption


def report_intro() -> dict:
    """What the report's intro (workflow/report/workflow.rst) says of this run: the backend and
    device resolved here and each family with cells in the grid, with its kernels."""
    if BACKEND == "cpu":
        device = f"{cpu_name()} ({os.cpu_count()} cores)"
    else:
        # a login node sees no GPU: the configured device label is all that names it here
        labelled = (
            f"the GPU{'s' if len(DEVICES) > 1 else ''} labelled {', '.join(DEVICES)}"
        )
        device = ", ".join(sorted(set(CHOICE.gpus))) or labelled
    families = []
    for name in FAMILIES:
        cells = [cell for cell in CELLS if cell.experiment == name]
        if cells:
            families.append(
                {
                    "name": name,
                    "label": FAMILY_DISPLAYS[name].label,
                    "seeds": ", ".join(FAMILY_DISPLAYS[name].seeds),
                    "kernels": ", ".join(sorted({cell.kernel for cell in cells})),
                    "cells": len(cells),
                }
            )
    return {
        "backend": BACKEND,
        "requested": config["backend"],
        "device": device,
        "label": ", ".join(DEVICES),
        "folders": ", ".join(f"``results/{label}/``" for label in DEVICES),
        "families": families,
        "family_names": [entry["name"] for entry in families],
    }


# The report renders workflow.rst with snakemake.config alone, where backend may still read
# "auto": the resolved run is added under a key of its own (after validation, so that no config
# file or --config can set it).
config["report_intro"] = report_intro()
