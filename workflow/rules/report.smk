# Aggregation and the human answer. Cheap rules: local even on a cluster.


localrules:
    aggregate,
    versions,
    speedups,
    crossovers,
    dimensions,
    charts,
    findings,
    summary,


rule aggregate:
    input:
        cells=CELL_FILES,
        inputs=INPUT_FILES,
        roofs=ROOFS_INPUT,
    output:
        benchmarks="results/benchmarks.parquet",
        samples="results/samples.parquet",
    log:
        "logs/aggregate.log",
    conda:
        "../../envs/numbench-cpu.yaml"
    params:
        roofs=roofs_option,
        script=SCRIPTS / "aggregate.py",
    shell:
        "python {params.script:q} --output {output.benchmarks} --samples {output.samples}"
        " --inputs {input.inputs} {params.roofs}"
        " --cells {input.cells} > {log} 2>&1"


# The cells of the config's environments against their libraries in the base environment.
rule versions:
    input:
        cells=ENV_CELL_FILES,
        # the base cells' status and version, for a cell whose own file lost its base process
        benchmarks="results/benchmarks.parquet",
    output:
        VERSIONS_FILE,
    log:
        "logs/versions.log",
    conda:
        "../../envs/numbench-cpu.yaml"
    params:
        script=SCRIPTS / "versions.py",
        margin=CFG["margin"],
    shell:
        "python {params.script:q} --margin {params.margin} --output {output}"
        " --benchmarks {input.benchmarks} --cells {input.cells} > {log} 2>&1"


rule speedups:
    input:
        benchmarks="results/benchmarks.parquet",
        samples="results/samples.parquet",
    output:
        "results/speedups.parquet",
    log:
        "logs/speedups.log",
    conda:
        "../../envs/numbench-cpu.yaml"
    params:
        script=SCRIPTS / "speedups.py",
        baseline_library=BASELINE["library"],
        baseline_device=BASELINE["device"],
        margin=CFG["margin"],
    shell:
        "python {params.script:q} --benchmarks {input.benchmarks}"
        " --samples {input.samples} --margin {params.margin}"
        " --baseline-library {params.baseline_library}"
        " --baseline-device {params.baseline_device}"
        " --output {output} > {log} 2>&1"


rule crossovers:
    input:
        "results/speedups.parquet",
    output:
        "results/crossovers.parquet",
    log:
        "logs/crossovers.log",
    conda:
        "../../envs/numbench-cpu.yaml"
    params:
        script=SCRIPTS / "crossovers.py",
    shell:
        "python {params.script:q} --speedups {input} --output {output} > {log} 2>&1"


rule dimensions:
    input:
        "results/samples.parquet",
    output:
        precision="results/precision.parquet",
        scaling="results/scaling.parquet",
    log:
        "logs/dimensions.log",
    conda:
        "../../envs/numbench-cpu.yaml"
    params:
        script=SCRIPTS / "dimensions.py",
        margin=CFG["margin"],
    shell:
        "python {params.script:q} --samples {input} --margin {params.margin}"
        " --precision {output.precision} --scaling {output.scaling} > {log} 2>&1"


rule charts:
    input:
        benchmarks="results/benchmarks.parquet",
        speedups="results/speedups.parquet",
        crossovers="results/crossovers.parquet",
        precision="results/precision.parquet",
        scaling="results/scaling.parquet",
        roofs=ROOFS_INPUT,
        versions=VERSIONS_INPUT,
    output:
        report(
            directory(CHARTS_DIR),
            patterns=["{name}.svg"],
            caption="../report/charts.rst",
            category="Charts",
            labels={"chart": "{name}"},
        ),
    log:
        "logs/charts.log",
    conda:
        "../../envs/numbench-cpu.yaml"
    params:
        roofs=roofs_option,
        script=SCRIPTS / "charts.py",
        baseline_library=BASELINE["library"],
        baseline_device=BASELINE["device"],
        versions=versions_option,
    shell:
        "python {params.script:q} --benchmarks {input.benchmarks}"
        " --baseline-library {params.baseline_library}"
        " --baseline-device {params.baseline_device}"
        " --speedups {input.speedups} --crossovers {input.crossovers}"
        " --precision {input.precision} --scaling {input.scaling}"
        " {params.roofs} {params.versions} --outdir {output} > {log} 2>&1"


# What the summary will say, decided from the tables: the summary only words it.
rule findings:
    input:
        benchmarks="results/benchmarks.parquet",
        speedups="results/speedups.parquet",
        crossovers="results/crossovers.parquet",
        precision="results/precision.parquet",
        scaling="results/scaling.parquet",
        roofs=ROOFS_INPUT,
    output:
        "results/findings.parquet",
    log:
        "logs/findings.log",
    conda:
        "../../envs/numbench-cpu.yaml"
    params:
        roofs=roofs_option,
        script=SCRIPTS / "findings.py",
        baseline_library=BASELINE["library"],
        baseline_device=BASELINE["device"],
        margin=CFG["margin"],
    shell:
        "python {params.script:q} --benchmarks {input.benchmarks}"
        " --speedups {input.speedups} --crossovers {input.crossovers}"
        " --baseline-library {params.baseline_library}"
        " --baseline-device {params.baseline_device} --margin {params.margin}"
        " --precision {input.precision} --scaling {input.scaling} {params.roofs}"
        " --output {output} > {log} 2>&1"


rule summary:
    input:
        benchmarks="results/benchmarks.parquet",
        speedups="results/speedups.parquet",
        findings="results/findings.parquet",
        precision="results/precision.parquet",
        scaling="results/scaling.parquet",
        roofs=ROOFS_INPUT,
        versions=VERSIONS_INPUT,
    output:
        markdown="results/summary.md",
        html=report(
            "results/summary.html",
            caption="../report/summary.rst",
            category="Summary",
            labels={"document": "summary"},
        ),
    log:
        "logs/summary.log",
    conda:
        "../../envs/numbench-cpu.yaml"
    params:
        roofs=roofs_option,
        script=SCRIPTS / "summary.py",
        charts=CHARTS_DIR,
        versions=versions_option,
    shell:
        "python {params.script:q} --benchmarks {input.benchmarks}"
        " {params.versions}"
        " --speedups {input.speedups} --findings {input.findings}"
        " --precision {input.precision} --scaling {input.scaling} {params.roofs}"
        " --charts-dir {params.charts} --output {output.markdown}"
        " --html-output {output.html} > {log} 2>&1"
