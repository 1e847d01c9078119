# Inputs and the timed cells: one fresh process per (library, device, operation, size).


rule inputs:
    output:
        "results/inputs/{operation}/{size}.npz",
    log:
        "logs/inputs/{operation}/{size}.log",
    conda:
        "../../envs/numbench-cpu.yaml"
    # Making inputs is heavy at large sizes (the float64 reference): it takes the timing slot
    # so that it never runs beside a timing cell, whose core it would share.
    resources:
        timing_slots=1,
    params:
        python=PYTHON,
        script=SCRIPTS / "make_inputs.py",
        seed=CFG["seed"],
        op_params=op_params,
    shell:
        "{params.python} {params.script} --operation {wildcards.operation}"
        " --size {wildcards.size} --seed {params.seed} --params={params.op_params:q}"
        " --output {output} > {log} 2>&1"


rule cell:
    input:
        "results/inputs/{operation}/{size}.npz",
    output:
        "results/cells/{library}/{device}/{operation}/{size}.parquet",
    log:
        "logs/cells/{library}/{device}/{operation}/{size}.log",
    conda:
        "../../envs/numbench-cpu.yaml"
    threads: CFG["threads"]
    resources:
        timing_slots=1,
        runtime=CELL_RUNTIME_MIN,
        cpus_per_task=CFG["threads"],
        gpu=cell_gpus,
    params:
        python=PYTHON,
        script=SCRIPTS / "run_cell.py",
        dtype=CFG["dtype"],
        timeout=CFG["cell_timeout_s"],
        memory_limit=CFG["cell_memory_limit_mb"] or 0,
        min_sample_time=TIMING["min_sample_time_s"],
        min_samples=TIMING["min_samples"],
        max_samples=TIMING["max_samples"],
        budget=TIMING["budget_s"],
        op_params=op_params,
    shell:
        "{params.python} {params.script} --library {wildcards.library}"
        " --device {wildcards.device} --operation {wildcards.operation}"
        " --size {wildcards.size} --dtype {params.dtype} --threads {threads}"
        " --inputs {input} --output {output} --timeout-s {params.timeout}"
        " --memory-limit-mb {params.memory_limit}"
        " --min-sample-time-s {params.min_sample_time} --min-samples {params.min_samples}"
        " --max-samples {params.max_samples} --budget-s {params.budget}"
        " --params={params.op_params:q} > {log} 2>&1"
