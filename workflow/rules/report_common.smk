# Paths and lookups of the report stage (rules in report.smk), from the run's plan
# (convlab.snakefile.reportplan): the figures of the figure table (convlab.report.figuretable), the
# seed comparison, and what the report's intro says of this run (in config["report_intro"], which
# workflow/report/workflow.rst renders). The seeds and their figures are the seed table's,
# convlab.report.seeds; their report category is the family that reproduces them.

REPORT = PLAN.report
SEED_TABLES = REPORT.seed_tables
METHOD_MAP = REPORT.method_map
SEED_DIR = REPORT.seed_dir
# The seed rules' wildcards: {seed} is an id of the seed table, {figure} a name of one of its figures.
SEED_IDS = REPORT.seed_ids
SEED_FIGURES = REPORT.seed_figures
SEED_FIGURE = REPORT.seed_figure
SEED_TABLE = REPORT.seed_table
# A family's slice of the summary (aggregate.smk), and the comparison of the seeds it reproduces.
FAMILY_SUMMARY = REPORT.family_summary
FAMILY_COMPARISON = REPORT.family_comparison
SEEDED = REPORT.seeded
SEEDED_FAMILIES = REPORT.seeded_families
