# All rows -> results/summary.csv.


rule aggregate:
    input:
        cells=[cell.path for cell in CELLS],
    output:
        summary=report(
            "results/summary.csv",
            caption="../report/summary.rst",
            category="Summary",
            labels={"table": "all cells"},
        ),
    log:
        "results/logs/aggregate.log",
    conda:
        "../../envs/convlab.yaml"
    params:
        runner=RUNNER,
    shell:
        "{params.runner} aggregate --out {output.summary} {input.cells} > {log} 2>&1"
