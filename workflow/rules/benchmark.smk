# Inputs and the timed cells: one fresh process per (library, device, dtype, threads,
# operation, size).
# Every shell command runs the `python` of the environment the rule runs in (first on PATH:
# the venv that `make` puts there, or the env Snakemake's --sdm conda activates).


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
        script=SCRIPTS / "make_inputs.py",
        seed=CFG["seed"],
        op_params=op_params,
    shell:
        "python {params.script} --operation {wildcards.operation}"
        " --size {wildcards.size} --seed {params.seed} --params={params.op_params:q}"
        " --output {output} > {log} 2>&1"


rule cell:
    input:
        cell_inputs,
    output:
        "results/cells/{library}/{device}/{dtype}/t{threads}/{operation}/{size}.parquet",
    log:
        "logs/cells/{library}/{device}/{dtype}/t{threads}/{operation}/{size}.log",
    conda:
        "../../envs/numbench-cpu.yaml"
    threads: cell_threads
    resources:
        timing_slots=1,
        runtime=CELL_RUNTIME_MIN,
        cpus_per_task=cell_threads,
        gpu=cell_gpus,
    params:
        script=SCRIPTS / "run_cell.py",
        spec=cell_spec_json,
    shell:
        "python {params.script} --spec {params.spec:q} --output {output} > {log} 2>&1"
