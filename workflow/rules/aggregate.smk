# All rows -> results/summary.csv. A thin client of the tools workers, as the report stage's
# jobs are (report.smk): no core of its own, one `render`.


rule aggregate:
    input:
        cells=lambda wildcards: CELL_PATHS[wildcards.device],
    output:
        # update(): a failed aggregation restores the previous summary instead of deleting it
        summary=report(
            update(f"{RESULTS}/summary.csv"),
            caption="../report/summary.rst",
            category="Summary",
            labels={"table": "all cells"},
        ),
    log:
        f"{RESULTS}/logs/aggregate.log",
    threads: 0
    resources:
        render=1,
    conda:
        "../../envs/convlab.yaml"
    params:
        code=CODE["summary"],
        runner=RUNNER,
    shell:
        logged("{params.runner} aggregate --out {output.summary} {input.cells}")
