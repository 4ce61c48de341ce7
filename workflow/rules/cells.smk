# One job per cell. A cell's inputs are its image and its kernel's own files, and its
# params are its full settings, so Snakemake re-runs exactly the cells a change touches.
# The job is a thin client: the measurement service (convlab.service) measures the cell and
# writes its row. When the run ends, the service rests, warm for the next run until it idles out
# (config service.idle_timeout_s); after a failed run it stops.


onsuccess:
    run_ended(failed=False)


onerror:
    run_ended(failed=True)


# The copy bandwidth, which every cell reads, runs first and the first cell as soon as its inputs
# allow. The device figures the report alone needs (the SGEMM ceiling, then the gallery's device
# jobs) run midway through the cells (MIDWAY, common.smk): after the last cell the report stage
# waits for nothing but the cells.
rule copy_bandwidth:
    output:
        BANDWIDTH,
    log:
        f"{RESULTS}/logs/device/{BACKEND}_copy_bandwidth.log",
    priority: 11
    conda:
        "../../envs/convlab.yaml"
    resources:
        **PLACEMENT,
        gpu=GPU_JOB,
    params:
        code=CODE["measurement"],
        runner=RUNNER,
        backend=BACKEND,
    shell:
        logged("{params.runner} bandwidth --backend {params.backend} --out {output}")


rule sgemm_ceiling:
    output:
        CEILING,
    log:
        f"{RESULTS}/logs/device/{BACKEND}_sgemm_ceiling.log",
    # ahead of the gallery's device jobs, so that the roofline and the findings are not left
    # waiting for the gallery
    priority: MIDWAY + 0.01
    conda:
        "../../envs/convlab.yaml"
    resources:
        **PLACEMENT,
        gpu=GPU_JOB,
    params:
        code=CODE["measurement"],
        runner=RUNNER,
        backend=BACKEND,
    shell:
        logged("{params.runner} ceiling --backend {params.backend} --out {output}")


rule cell:
    input:
        # by its content, which the prologue checks against what each row was measured on; not by
        # its time (data/ deleted and made again would otherwise re-measure every cell that reads it)
        image=lambda wildcards: ancient(PLAN.cell_image(wildcards)),
        kernel=PLAN.kernel_files,
        bandwidth=BANDWIDTH,
    output:
        row=CELL_PATH,
    log:
        LOG_PATH,
    priority: PLAN.cell_priority
    group:
        CELL_GROUP
    conda:
        "../../envs/convlab.yaml"
    resources:
        **PLACEMENT,
        gpu=GPU_JOB,
        # always 1, whatever the backend: a `measurement` limit (the slurm profile's 1) runs
        # a group's cells one at a time, so the group asks for one cell's CPUs and memory
        measurement=1,
    params:
        code=CODE["measurement"],
        client=PLAN.cell_client,
        spec=PLAN.cell_spec,
        image=PLAN.image_option,
        row_format=PLAN.row_format,
        libraries=PLAN.kernel_libraries,
    shell:
        logged(
            "{params.client} cell --spec {params.spec:q} {params.image} "
            "--bandwidth {input.bandwidth} --out {output.row}"
        )
