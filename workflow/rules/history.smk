# The cells this run re-measured because their kernel files changed, each measured side by side
# with its previous version (kept in the database) on the device: read by the record step below.


rule pair:
    input:
        summary=f"{RESULTS}/summary.csv",
    output:
        pairs=f"{RESULTS}/verdicts/paired.csv",
    log:
        f"{RESULTS}/logs/pair.log",
    priority: 50
    conda:
        "../../envs/convlab.yaml"
    resources:
        **PLACEMENT,
        gpu=GPU_JOB,
    params:
        code=CODE["measurement"],
        runner=RUNNER,
        results=lambda wildcards, input: os.path.dirname(input.summary),
        backend=BACKEND,
        device=lambda wildcards: wildcards.device,
        grid=PLAN.grid_of,
    shell:
        logged(
            "{params.runner} pair --results {params.results} --backend {params.backend} "
            '--device {params.device} --grid {params.grid:q} --run-id "$CONVLAB_RUN_ID" '
            "--out {output.pairs}"
        )


# The results database: the run's new rows are added to results/<device>/history.sqlite (this
# rule is its one writer), each re-measured cell gets a verdict against its previous measurement,
# and the job prints them as soon as they are recorded: before the report stage draws anything
# (its priority puts it ahead of the figure jobs that become ready with it).


rule history:
    input:
        # after the summary: a refused (damaged) row stops the run before anything is recorded
        summary=f"{RESULTS}/summary.csv",
        pairs=f"{RESULTS}/verdicts/paired.csv",
    output:
        verdicts=f"{RESULTS}/verdicts/latest.txt",
        table=f"{RESULTS}/verdicts/latest.csv",
    log:
        f"{RESULTS}/logs/history.log",
    priority: 50
    conda:
        "../../envs/convlab.yaml"
    params:
        code=CODE["history"],
        runner=RUNNER,
        # results/<device>: the folder of the summary
        results=lambda wildcards, input: os.path.dirname(input.summary),
        backend=BACKEND,
        device=lambda wildcards: wildcards.device,
        # the grid the rows belong to: each row's kernel files and settings are hashed from it
        grid=PLAN.grid_of,
        # with several device labels each verdict says whose it is
        heading=PLAN.verdict_heading,
    shell:
        logged(
            "{params.runner} record --results {params.results} --backend {params.backend} "
            '--device {params.device} --grid {params.grid:q} --run-id "$CONVLAB_RUN_ID" '
            "--pairs {input.pairs}",
            then="{{ printf '%s' {params.heading:q}; cat {output.verdicts}; }} >&2",
        )


rule history_page:
    input:
        table=f"{RESULTS}/verdicts/latest.csv",
    output:
        figure=report(
            f"{RESULTS}/figures/history.png",
            caption="../report/history.rst",
            category="Summary",
            labels={"table": "kernel times across runs"},
        ),
        page=report(
            f"{RESULTS}/history.html",
            caption="../report/verdicts.rst",
            category="Summary",
            labels={"table": "what the latest run changed"},
        ),
    log:
        f"{RESULTS}/logs/history_page.log",
    conda:
        "../../envs/convlab.yaml"
    params:
        code=CODE["report"],
        runner=RUNNER,
        # results/<device>: the folder of the page
        results=lambda wildcards, output: os.path.dirname(output.page),
    shell:
        logged(
            "{params.runner} history-page --results {params.results} --verdicts {input.table} "
            "--figure {output.figure} --out {output.page}"
        )


localrules:
    history,
    history_page,
