# Each family's cell rows -> results/<device>/summary/<family>.csv (its slice of the summary), and
# the slices -> results/<device>/summary.csv. A report job reads the narrowest of the two it needs,
# so that after an edit to one kernel only what reads that kernel's families is drawn again. Thin
# clients of the tools workers, as the report stage's jobs are (report.smk): no core of their own,
# one `render` each.


# The whole report stage is made again from here when a run may have left part of it stale: a
# run that stopped, or changed code, captions or config (REPORT_SUSPECT, common.smk). A touch, run
# first and on no core: every slice waits for it, and at --cores 1 it would otherwise wait behind
# the cells and the gallery's device jobs, and the whole report stage behind it.
rule report_stage_reset:
    input:
        REPORT_SUSPECT,
    output:
        REDRAWN,
    log:
        "results/logs/report_stage_reset.log",
    priority: 100
    conda:
        "../../envs/convlab.yaml"
    threads: 0
    shell:
        logged("touch {output}")


rule aggregate_family:
    input:
        cells=PLAN.family_cells,
        # Only to wait for every cell of the device, so that no report job draws while a cell is
        # timed: ancient, so that a new row of another family re-runs nothing of this one.
        after=lambda wildcards: ancient(PLAN.other_family_cells(wildcards)),
        # made again after a run that may have left the report stage stale (common.smk)
        redrawn=REDRAWN,
    output:
        summary=f"{RESULTS}/summary/{{experiment}}.csv",
    log:
        f"{RESULTS}/logs/summary/{{experiment}}.log",
    conda:
        "../../envs/convlab.yaml"
    threads: 0
    resources:
        render=1,
    params:
        code=CODE["summary"],
        runner=RUNNER,
    shell:
        logged("{params.runner} aggregate --slice --out {output.summary} {input.cells}")


rule aggregate:
    input:
        families=expand(
            f"{RESULTS}/summary/{{experiment}}.csv",
            experiment=FAMILIES,
            allow_missing=True,
        ),
    output:
        summary=report(
            f"{RESULTS}/summary.csv",
            caption="../report/summary.rst",
            category="Summary",
            labels={"table": "all cells"},
        ),
    log:
        f"{RESULTS}/logs/aggregate.log",
    conda:
        "../../envs/convlab.yaml"
    threads: 0
    resources:
        render=1,
    params:
        code=CODE["summary"],
        runner=RUNNER,
    shell:
        logged(
            "{params.runner} aggregate --slices --out {output.summary} {input.families}"
        )


localrules:
    aggregate_family,
