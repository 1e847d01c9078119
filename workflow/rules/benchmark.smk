# Inputs, the early rounds and the timed cells: fresh worker processes per (library, device,
# dtype, threads, operation, size).
# Every shell command runs the `python` of the environment the rule runs in (first on PATH:
# the venv that `make` puts there, or the env Snakemake's --sdm conda activates).


rule inputs:
    input:
        op_inputs_file,
    output:
        cells.INPUTS_FILE,
    log:
        cells.INPUTS_LOG,
    # Making inputs is heavy at large sizes (the float64 reference): it takes the timing slot
    # so that it never runs beside a timing cell, whose core it would share.
    priority: INPUTS_PRIORITY
    conda:
        "../../envs/numbench-cpu.yaml"
    resources:
        timing_slots=1,
    params:
        script=SCRIPTS / "make_inputs.py",
        seed=op_seed,
        op_params=op_params,
        op_file=op_file,
        op_hash=op_hash,
        inputs_from=op_inputs_from,
    shell:
        "python {params.script:q} --operation {wildcards.operation}"
        " --size {wildcards.size} --seed {params.seed} --params={params.op_params:q}"
        " --operation-file={params.op_file:q} --operation-hash {params.op_hash}"
        " --inputs-from={params.inputs_from:q}"
        " --output {output} > {log} 2>&1"


# One of the config's environments (config/README.md): a virtual environment with its pins,
# the base environment's packages behind them; made once, then reused by later runs.
rule environment:
    output:
        environments.ready_file("{environment}"),
    log:
        "logs/environments/{environment}.log",
    conda:
        "../../envs/numbench-cpu.yaml"
    params:
        script=SCRIPTS / "make_environment.py",
        pins=environment_pins,
        folder=lambda wildcards: f"{environments.ENVS_DIR}/{wildcards.environment}",
    shell:
        "python {params.script:q} --name {wildcards.environment} --pins {params.pins:q}"
        " --folder {params.folder:q} --output {output} > {log} 2>&1"


# An early round: one round of a cell (its own process and, paired, a baseline process),
# measured in a job of its own before any cell's remaining rounds (replicates.early_rounds).
rule early_round:
    input:
        inputs=cell_inputs,
        environment=environment_ready,
    output:
        temp(cells.ROUND_FILE),
    log:
        cells.ROUND_LOG,
    priority: early_round_priority
    conda:
        "../../envs/numbench-cpu.yaml"
    threads: cell_threads
    resources:
        timing_slots=1,
        runtime=ROUND_RUNTIME_MIN,
        cpus_per_task=cell_threads,
        gpu=cell_gpus,
        # a resource, not a param: changing how long a job waits remeasures nothing
        lock_timeout_s=LOCK_TIMEOUT_S,
        # so is the wait for quiet (wait_for_quiet)
        quiet_wait_s=QUIET_WAIT_S,
        quiet_below=QUIET_BELOW,
    params:
        script=SCRIPTS / "run_cell.py",
        spec=cell_spec_json,
    shell:
        "python {params.script:q} --spec {params.spec:q} --round {wildcards.round}"
        " --lock-timeout-s {resources.lock_timeout_s} --quiet-wait-s {resources.quiet_wait_s}"
        " --quiet-below {resources.quiet_below} --output {output} > {log} 2>&1"


rule cell:
    input:
        inputs=cell_inputs,
        earlier=early_round_files,
        environment=environment_ready,
    output:
        cells.CELL_FILE,
    log:
        cells.CELL_LOG,
    priority: cell_priority
    conda:
        "../../envs/numbench-cpu.yaml"
    threads: cell_threads
    resources:
        timing_slots=1,
        runtime=CELL_RUNTIME_MIN,
        cpus_per_task=cell_threads,
        gpu=cell_gpus,
        lock_timeout_s=LOCK_TIMEOUT_S,
        quiet_wait_s=QUIET_WAIT_S,
        quiet_below=QUIET_BELOW,
    params:
        script=SCRIPTS / "run_cell.py",
        spec=cell_spec_json,
    shell:
        "python {params.script:q} --spec {params.spec:q} --earlier {input.earlier}"
        " --lock-timeout-s {resources.lock_timeout_s} --quiet-wait-s {resources.quiet_wait_s}"
        " --quiet-below {resources.quiet_below} --output {output} > {log} 2>&1"
