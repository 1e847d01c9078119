# The finished run added to the history store beside results/ (history.add; numbench.history).


localrules:
    history,
    site,


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


# The results site from the store (numbench.site): a target of its own (snakemake site),
# never part of rule all; with history.add, the finished run is added first. Its inputs are
# the store's run files too, so a run added otherwise rebuilds it; steps are found with the
# config's margin, as numbench history changes finds them.
rule site:
    input:
        HISTORY_INPUT,
        site_runs,
    output:
        SITE_INDEX,
    log:
        "logs/site.log",
    conda:
        "../../envs/numbench-cpu.yaml"
    params:
        script=SCRIPTS / "site.py",
        store=site_store,
        out=site_folder,
        margin=CFG["margin"],
    shell:
        "python {params.script:q} --history {params.store:q} --out {params.out:q}"
        " --margin {params.margin} > {log} 2>&1"
