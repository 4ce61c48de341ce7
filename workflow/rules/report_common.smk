# Paths and report helpers of the report stage's seed comparison (rules in report.smk). The seeds,
# their report categories and their figures are the seed table's, convlab.report.seeds.
from convlab.report.seeds import (
    SEEDS,
    figure_names,
    figure_stem,
    figure_stems,
    report_labels,
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


def seed_experiment(wildcards) -> str:
    """A seed's report category: the experiment that reproduces it."""
    return SEEDS[wildcards.seed].experiment


def seed_figure_labels(wildcards) -> dict[str, str]:
    return report_labels(wildcards.seed, wildcards.figure)


def seed_table_labels(wildcards) -> dict[str, str]:
    return report_labels(wildcards.seed)


def seed_figure_caption(wildcards) -> str:
    """The figure's caption, for workflow/report/seed_figure.rst. Asked when the DAG is built, so a
    figure the seed does not draw fails there, naming the seed's figures."""
    return seed_figure(wildcards.seed, wildcards.figure).caption
