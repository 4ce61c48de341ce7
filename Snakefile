# convlab: the CUDA 2D-convolution lab as a reproducible Snakemake DAG.
# Run `snakemake --cores 1`; see README.md.
from snakemake.utils import min_version

min_version("9.3.1")


# config/config.yaml, checked before Snakemake reads it
include: "workflow/rules/configfile.smk"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/cells.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/history.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/counters.smk"
include: "workflow/rules/benchmark.smk"


rule all:
    input:
        PLAN.final_outputs(),
