# The roofs of this host: what its memory (at each cache level) and its arithmetic can do,
# measured once per (device, dtype, threads) of the grid, for every cell's place on the
# roofline (numbench.measure.roofs, numbench.analyse.roofline).
import json

# Wall time on Slurm: a few seconds per (device, dtype, threads) and library here; generous.
ROOFS_RUNTIME_MIN = 15


rule roofs:
    output:
        ROOFS_FILE,
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
        script=SCRIPTS / "roofs.py",
        dims=json.dumps(ROOF_DIMS),
        libraries=json.dumps(CFG["libraries"]),
        allocator=CFG["allocator"],
        cpu_taken=ROOF_CPU_TAKEN_ARG,
    shell:
        "python {params.script:q} --dims {params.dims:q} --libraries {params.libraries:q}"
        " --allocator {params.allocator} --lock-timeout-s {resources.lock_timeout_s}"
        " {params.cpu_taken} --output {output} > {log} 2>&1"
