# numbench: which numerical library is fastest for my operation, size and device?
# The data flow and the contract are described in README.md and config/README.md.


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/benchmark.smk"
include: "workflow/rules/roofs.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/history.smk"


rule all:
    default_target: True
    input:
        ROOFS_INPUT,
        "results/benchmarks.parquet",
        "results/speedups.parquet",
        "results/crossovers.parquet",
        "results/precision.parquet",
        "results/scaling.parquet",
        CHARTS_DIR,
        "results/summary.md",
        VERSIONS_INPUT,
        HISTORY_INPUT,


# The processes the cells' workers were forked from (worker_start: fork) end with the run;
# left alone, each would end after a minute with nothing to do. The cells' shared
# compilations (compile_cache: cell) last one run too.
onsuccess:
    stop_zygotes()
    clear_compile_caches()


onerror:
    stop_zygotes()
    clear_compile_caches()
