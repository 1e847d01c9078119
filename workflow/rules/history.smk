# The finished run added to the history store beside results/ (history.add; numbench.history).


localrules:
    history,


rule history:
    input:
        benchmarks="results/benchmarks.parquet",
        speedups="results/speedups.parquet",
        # the run is finished once its summary is written
        summary="results/summary.md",
        roofs=ROOFS_INPUT,
    output:
        HISTORY_FILE,
    log:
        "logs/history.log",
    conda:
        "../../envs/numbench-cpu.yaml"
    params:
        script=SCRIPTS / "history_add.py",
        store=HISTORY["folder"],
    shell:
        "python {params.script:q} --results results --store {params.store:q}"
        " --output {output} > {log} 2>&1"
