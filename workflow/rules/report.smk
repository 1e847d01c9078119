# Aggregation and the human answer. Cheap rules: local even on a cluster.


localrules:
    aggregate,
    summary,


rule aggregate:
    input:
        CELL_FILES,
    output:
        "results/benchmarks.parquet",
    log:
        "logs/aggregate.log",
    conda:
        "../../envs/numbench-cpu.yaml"
    params:
        python=PYTHON,
        script=SCRIPTS / "aggregate.py",
    shell:
        "{params.python} {params.script} --output {output} {input} > {log} 2>&1"


rule summary:
    input:
        "results/benchmarks.parquet",
    output:
        "results/summary.md",
    log:
        "logs/summary.log",
    conda:
        "../../envs/numbench-cpu.yaml"
    params:
        python=PYTHON,
        script=SCRIPTS / "summary.py",
    shell:
        "{params.python} {params.script} --benchmarks {input} --output {output} > {log} 2>&1"
