# The roofs of this host: what its memory (at each cache level) and its arithmetic can do,
# measured per (device, dtype, threads) of the grid before the cells and (roofs_at_end)
# again after every cell, for every cell's place on the roofline (numbench.roofline.measure,
# numbench.roofline.analyse: each roof at its best, with its spread across the run).
import json

# Wall time on Slurm: a few seconds per (device, dtype, threads) and library here; generous.
ROOFS_RUNTIME_MIN = 15


rule roofs:
    output:
        ROOFS_START_FILE,
    log:
        "logs/roofs.log",
    # Measuring takes the timing slot (and the host's timing lock): never beside a cell.
    priority: INPUTS_PRIORITY
    conda:
        "../../envs/numbench-cpu.yaml"
    threads: ROOF_THREADS
    resources:
        timing_slots=1,
        runtime=ROOFS_RUNTIME_MIN,
        cpus_per_task=ROOF_THREADS,
        gpu=ROOF_GPUS,
        lock_timeout_s=LOCK_TIMEOUT_S,
    params:
        # a new meaning of a roof (its version) measures the roofs again
        version=ROOFS_VERSION,
        script=SCRIPTS / "roofs.py",
        dims=json.dumps(ROOF_DIMS),
        libraries=json.dumps(ROOF_LIBRARIES),
        allocator=CFG["allocator"],
        cpu_taken=ROOF_CPU_TAKEN_ARG,
    shell:
        "python {params.script:q} --dims {params.dims:q} --libraries {params.libraries:q}"
        " --allocator {params.allocator} --lock-timeout-s {resources.lock_timeout_s}"
        " {params.cpu_taken} --round start --output {output} > {log} 2>&1"


if ROOFS_AT_END:

    # The same roofs again once every cell is measured: a roof measured at a disturbed
    # moment shows as a spread, and the best of the two counts.
    rule roofs_at_end:
        input:
            start=ROOFS_START_FILE,
            cells=CELL_FILES + ENV_CELL_FILES,
        output:
            ROOFS_FILE,
        log:
            "logs/roofs_at_end.log",
        conda:
            "../../envs/numbench-cpu.yaml"
        threads: ROOF_THREADS
        resources:
            timing_slots=1,
            runtime=ROOFS_RUNTIME_MIN,
            cpus_per_task=ROOF_THREADS,
            gpu=ROOF_GPUS,
            lock_timeout_s=LOCK_TIMEOUT_S,
        params:
            version=ROOFS_VERSION,
            script=SCRIPTS / "roofs.py",
            dims=json.dumps(ROOF_DIMS),
            libraries=json.dumps(ROOF_LIBRARIES),
            allocator=CFG["allocator"],
            cpu_taken=ROOF_CPU_TAKEN_ARG,
        shell:
            "python {params.script:q} --dims {params.dims:q} --libraries {params.libraries:q}"
            " --allocator {params.allocator} --lock-timeout-s {resources.lock_timeout_s}"
            " {params.cpu_taken} --round end --earlier {input.start:q} --output {output}"
            " > {log} 2>&1"
