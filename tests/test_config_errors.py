"""Bad configs stop the workflow before any job runs: one clear message naming the key, the
bad value and what is allowed, a non-zero exit, and no Python traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO, copy_workflow, made_once, snakemake

from numbench.config import ConfigError, resolve

SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"

# (id, config file text, substrings the message must hold). Every case is checked through
# resolve() (fast); the ids in SNAKEMAKE_CASES, one or more per kind of error, also through
# `snakemake -n`, where the message must come out whole and without a traceback.
CASES = [
    (
        "unknown-library",
        "libraries: [numpy, nosuchlib]",
        ["libraries[1] = 'nosuchlib' is not a known library", "allowed: numpy, jax"],
    ),
    (
        "unknown-operation",
        "operations: {nosuchop: {sizes: [10]}}",
        ["operations.nosuchop is not a known operation", "allowed: elementwise"],
    ),
    ("unknown-device", "device: tpu", ["device = 'tpu' is not allowed", "allowed: cpu, gpu, all"]),
    ("unknown-dtype", "dtype: float16", ["dtype = 'float16'", "allowed: float32, float64"]),
    (
        "unknown-dtype-in-list",
        "dtype: [float64, float16]",
        ["dtype[1] = 'float16' is not allowed", "allowed: float32, float64"],
    ),
    (
        "unknown-allocator",
        "allocator: jemalloc",
        ["allocator = 'jemalloc' is not allowed", "allowed: steady, system"],
    ),
    ("empty-dtype", "dtype: []", ["dtype is empty; give at least 1 item(s)"]),
    ("empty-threads", "threads: []", ["threads is empty; give at least 1 item(s)"]),
    (
        "threads-zero",
        "threads: [1, 0]",
        ["threads[1] = 0 is out of range; it must be >= 1"],
    ),
    (
        "threads-over-host",
        "threads: [1, 4096]",
        ["threads[1] = 4096 is more than the", "CPU(s) a cell may use on this host"],
    ),
    (
        "threads-all-misspelt",
        "threads: [1, every]",
        ["threads[1] = 'every' is not a thread count", "or 'all'"],
    ),
    (
        "size-zero",
        "operations: {matmul: {sizes: [64, 0]}}",
        ["operations.matmul.sizes[1] = 0 is not a positive integer size"],
    ),
    (
        "size-negative",
        "operations: {sort: {sizes: [-5]}}",
        ["operations.sort.sizes[0] = -5 is not a positive integer size"],
    ),
    (
        "size-fraction",
        "operations: {sort: {sizes: [2.5]}}",
        ["operations.sort.sizes[0] = 2.5 is not a positive integer size"],
    ),
    (
        "size-text",
        "operations: {sort: {sizes: [big]}}",
        ["operations.sort.sizes[0] = 'big' is not a positive integer size"],
    ),
    (
        # YAML reads 1e3 (no dot) as text: the grid listed the one cell twice
        "size-duplicate",
        "operations: {matmul: {sizes: [1000, 1e3]}}",
        ["operations.matmul.sizes: 1000 and '1e3' are the same size (1000)", "list each"],
    ),
    (
        "size-repeated",
        "operations: {sort: {sizes: [10, 20, 10]}}",
        ["operations.sort.sizes lists 10 twice; list each size once"],
    ),
    (
        # two 10^6 x 10^6 float64 matrices: 16 TB, on no host
        "size-over-host-memory",
        "operations: {matmul: {sizes: [100, 1000000]}}",
        ["operations.matmul.sizes[1] = 1000000:", "GiB at once", "more than the", "GiB"],
    ),
    ("empty-libraries", "libraries: []", ["libraries is empty; give at least 1"]),
    (
        "baseline-not-in-grid",
        "libraries: [jax, torch]",
        ["baseline.library = 'numpy' is not in the grid", "libraries: jax, torch"],
    ),
    (
        "baseline-device-not-in-grid",
        "libraries: [numpy, jax]\nbaseline: {library: jax, device: gpu}",
        ["baseline.device = 'gpu' is not in the grid", "device = 'cpu'"],
    ),
    (
        "timing-min-samples",
        "timing: {min_samples: 0}",
        ["timing.min_samples = 0 is out of range; it must be >= 1"],
    ),
    (
        "timing-sample-time",
        "timing: {min_sample_time_s: 0}",
        ["timing.min_sample_time_s = 0 is out of range; it must be > 0"],
    ),
    (
        "timing-budget",
        "timing: {budget_s: -1}",
        ["timing.budget_s = -1 is out of range; it must be > 0"],
    ),
    (
        "timing-min-over-max",
        "timing: {min_samples: 10, max_samples: 5}",
        ["timing.min_samples = 10 is larger than timing.max_samples = 5"],
    ),
    (
        "replicates-early-rounds-over-min",
        "replicates: {min: 2, max: 3, early_rounds: 3}",
        ["replicates.early_rounds = 3 is larger than replicates.min = 2"],
    ),
    (
        "replicates-early-rounds-negative",
        "replicates: {early_rounds: -1}",
        ["replicates.early_rounds = -1 is out of range"],
    ),
    (
        # the old name of early_rounds: refused by its new name, never ignored
        "replicates-spread-renamed",
        "replicates: {spread: 0}",
        ["replicates.spread was renamed to replicates.early_rounds"],
    ),
    (
        # the old name of stop_margin, which read as the report's margin
        "replicates-margin-renamed",
        "replicates: {margin: 1.2}",
        ["replicates.margin was renamed to replicates.stop_margin"],
    ),
    (
        "replicates-round-sd-negative",
        "replicates: {round_sd: -0.01}",
        ["replicates.round_sd = -0.01 is out of range; it must be >= 0"],
    ),
    (
        "replicates-round-sd-type",
        "replicates: {round_sd: lots}",
        ["replicates.round_sd"],
    ),
    (
        "replicates-max-cpu-taken-zero",
        "replicates: {max_cpu_taken: 0}",
        ["replicates.max_cpu_taken = 0 is out of range; it must be > 0"],
    ),
    (
        "replicates-max-cpu-taken-type",
        "replicates: {max_cpu_taken: busy}",
        ["replicates.max_cpu_taken"],
    ),
    (
        "replicates-lockstep-type",
        "replicates: {lockstep: sometimes}",
        ["replicates.lockstep", "sometimes"],
    ),
    (
        "cell-timeout",
        "cell_timeout_s: 0",
        ["cell_timeout_s = 0 is out of range; it must be > 0"],
    ),
    (
        "cell-memory-limit",
        "cell_memory_limit_mb: -100",
        ["cell_memory_limit_mb = -100 is out of range; it must be > 0"],
    ),
    (
        "cell-memory-limit-type",
        "cell_memory_limit_mb: lots",
        ["cell_memory_limit_mb = 'lots' has the wrong type; expected number or null"],
    ),
    (
        "unknown-key",
        "colour: red",
        ["unknown key 'colour'", "allowed keys: allocator, baseline, cell_memory_limit_mb"],
    ),
    (
        "unknown-nested-key",
        "timing: {warmup: 3}",
        ["unknown key 'warmup' under timing", "allowed keys: budget_s"],
    ),
]


#: The cases also run through ``snakemake -n``: one of each way a config reaches the check
#: (a file's key, a key unknown to the schema, a check against this host's CPUs and memory);
#: every case's message is checked on ``resolve`` itself (test_config_error_message), and the
#: path from the Snakefile to the message is the same for all of them. Each dry run is a
#: Snakemake start-up (seconds), so the list stays short.
SNAKEMAKE_CASES = {
    "unknown-library",
    "threads-over-host",
    "size-over-host-memory",
    "unknown-key",
}

CLI_CASES = [
    ("cli-empty-libraries", ["libraries="], ["libraries is empty"]),
    (
        "cli-unknown-library",
        ["libraries=numpy,nosuchlib"],
        ["libraries[1] = 'nosuchlib' is not a known library"],
    ),
    ("cli-threads", ["threads=two"], ["threads = 'two' is not a thread count"]),
    (
        "cli-nested-numbers",
        ['timing={"min_samples": 10, "max_samples": 2}'],
        ["timing.min_samples = 10 is larger than timing.max_samples = 2"],
    ),
]


@pytest.fixture(scope="module")
def wf(tmp_path_factory) -> Path:
    """One copy of the workflow for every case (dry runs write nothing but .snakemake)."""
    return copy_workflow(tmp_path_factory.mktemp("cfg") / "wf")


@pytest.fixture(scope="module")
def dry_runs(tmp_path_factory) -> dict:
    """Every case's ``snakemake -n``, a few at a time (each is mostly Snakemake's start-up),
    in a copy of the workflow of their own; made once a session (``made_once``), so that
    with the tests in two processes the second reads the first's instead of running all
    eight again."""
    from concurrent.futures import ThreadPoolExecutor

    def make() -> dict:
        wf = copy_workflow(tmp_path_factory.mktemp("cfg-dry") / "wf")
        jobs = {}
        for case_id, text, _ in CASES:
            if case_id not in SNAKEMAKE_CASES:
                continue
            (wf / f"{case_id}.yaml").write_text(text + "\n", encoding="utf-8")
            jobs[case_id] = ["-n", "--cores", "1", "--configfile", f"{case_id}.yaml"]
        for case_id, args, _ in CLI_CASES:
            jobs[case_id] = ["-n", "--cores", "1", "--config", *args]
        with ThreadPoolExecutor(max_workers=4) as pool:
            futures = {k: pool.submit(snakemake, wf, *a, timeout=300) for k, a in jobs.items()}
            return {k: f.result() for k, f in futures.items()}

    return made_once(tmp_path_factory, "config_error_dry_runs", make)


def assert_config_error(proc, expected: list[str]) -> None:
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "Traceback" not in out, out
    assert "config error: " in out, out
    for text in expected:
        assert text in out, f"{text!r} not in:\n{out}"


@pytest.mark.e2e
@pytest.mark.parametrize(
    "case_id,expected",
    [(c[0], c[2]) for c in CASES + CLI_CASES if c[0] in SNAKEMAKE_CASES or c in CLI_CASES],
    ids=[c[0] for c in CASES + CLI_CASES if c[0] in SNAKEMAKE_CASES or c in CLI_CASES],
)
def test_config_error_through_snakemake(dry_runs: dict, case_id: str, expected: list[str]) -> None:
    assert_config_error(dry_runs[case_id], expected)


def _merge(base: dict, extra: dict) -> dict:
    """Snakemake's --configfile merge: nested mappings merge, everything else replaces."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


@pytest.mark.parametrize("text,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_config_error_message(tmp_path: Path, text: str, expected: list[str]) -> None:
    import yaml

    default = yaml.safe_load((REPO / "config" / "config.yaml").read_text(encoding="utf-8"))
    user = tmp_path / "user.yaml"
    user.write_text(text + "\n", encoding="utf-8")
    merged = _merge(default, yaml.safe_load(text))
    with pytest.raises(ConfigError) as err:
        resolve(merged, SCHEMA, [str(user)])
    for part in expected:
        assert part in str(err.value)


@pytest.mark.e2e
def test_no_job_runs_on_a_config_error(wf: Path) -> None:
    (wf / "bad-run.yaml").write_text("dtype: float16\n", encoding="utf-8")
    proc = snakemake(wf, "--cores", "1", "--configfile", "bad-run.yaml")
    assert_config_error(proc, ["dtype = 'float16'"])
    assert not (wf / "results").exists()
    assert not (wf / "logs").exists()


def test_memory_limit_accepts_null_and_numbers() -> None:
    base = {"operations": {"sort": {"sizes": [10]}}}
    assert resolve(base, SCHEMA)["cell_memory_limit_mb"] is None
    for value, want in [("null", None), ("512", 512.0), (256, 256), (None, None)]:
        cfg = resolve({**base, "cell_memory_limit_mb": value}, SCHEMA)
        assert cfg["cell_memory_limit_mb"] == want
    with pytest.raises(ConfigError, match="cell_memory_limit_mb = 0 is out of range"):
        resolve({**base, "cell_memory_limit_mb": 0}, SCHEMA)


def test_fault_adapters_never_in_defaults() -> None:
    from numbench import libraries

    faults = [name for name, cls in libraries.ADAPTERS.items() if cls.test_only]
    assert sorted(faults) == sorted(
        ["fault-raise", "fault-crash", "fault-hang", "fault-oom", "fault-wrong", "fault-import"]
    )
    default = resolve({"operations": {"sort": {"sizes": [10]}}}, SCHEMA)
    assert not set(faults) & set(default["libraries"])
    import yaml

    shipped = yaml.safe_load((REPO / "config" / "config.yaml").read_text(encoding="utf-8"))
    assert not set(faults) & set(shipped["libraries"])


def test_adapters_from_outside_the_package_are_registered_from_the_modules_named() -> None:
    """``NUMBENCH_ADAPTERS`` names modules or files of adapters; one that cannot be imported, or
    that defines no ``ADAPTERS``, stops the registry's import, naming the variable and entry."""
    import os
    import subprocess
    import sys

    def registry(value: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "NUMBENCH_ADAPTERS": value}
        code = "from numbench import libraries; print(' '.join(libraries.ADAPTERS))"
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)

    faults = REPO / "tests" / "adapters" / "faults.py"
    built_in = registry("").stdout.split()
    assert "numpy" in built_in and "fault-raise" not in built_in
    assert registry(f"{os.pathsep}{faults}").stdout.split()[-6:][0] == "fault-raise"
    missing = registry("numbench_no_such_adapters")
    assert missing.returncode != 0
    assert "NUMBENCH_ADAPTERS: numbench_no_such_adapters cannot be imported" in missing.stderr
    empty = registry("numbench.errors")
    assert "NUMBENCH_ADAPTERS: numbench.errors defines no ADAPTERS" in empty.stderr


@pytest.mark.e2e
def test_a_user_config_cannot_name_a_fault_adapter(tmp_path: Path) -> None:
    """Where ``NUMBENCH_ADAPTERS`` does not name their file the fault adapters are not
    registered at all: a config naming one is refused like any unknown library, by Snakemake,
    before any job runs."""
    import os

    wd = copy_workflow(tmp_path / "wf")
    (wd / "user.yaml").write_text(
        "libraries: [numpy, fault-crash]\noperations:\n  sort: {sizes: [10]}\n", encoding="utf-8"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBENCH_ADAPTERS"}
    env["NUMBENCH_ADAPTERS"] = ""
    proc = snakemake(wd, "-n", "--cores", "1", "--configfile", "user.yaml", env=env)
    assert proc.returncode != 0
    assert "libraries[1] = 'fault-crash' is not a known library" in proc.stderr + proc.stdout
    assert not (wd / "results").exists()


# -- sizes against this host's memory, threads on a cluster ---------------------------------------

GIB = 2**30
MATMUL_8192 = {"operations": {"matmul": {"sizes": [8192]}}, "libraries": ["numpy"]}


def _host_memory(monkeypatch, gib: float) -> None:
    from numbench.config import dims as config_dims

    monkeypatch.setattr(config_dims, "host_memory_bytes", lambda: int(gib * GIB))


def test_memory_estimate_counts_float64_inputs_and_reference_whatever_the_dtype(monkeypatch):
    """matmul 8192: two float64 inputs (1 GiB) and the float64 reference (0.5 GiB) in every
    cell, plus the output in the cell's dtype: 2.0 GiB at float64, 1.75 GiB at float32."""
    _host_memory(monkeypatch, 1.9)
    with pytest.raises(ConfigError) as err:
        resolve({**MATMUL_8192, "dtype": ["float32", "float64"]}, SCHEMA)
    message = str(err.value)
    assert message.startswith("operations.matmul.sizes[0] = 8192: ")
    assert "2.0 GiB at once" in message and "float64" in message
    assert "more than the 1.9 GiB of memory of this host" in message
    assert resolve({**MATMUL_8192, "dtype": "float32"}, SCHEMA)["dtype"] == ["float32"]
    # a float32 grid still loads the float64 inputs and reference: 1.75 GiB, not 1.25
    _host_memory(monkeypatch, 1.5)
    with pytest.raises(ConfigError, match=r"1\.8 GiB at once.*more than the 1\.5 GiB"):
        resolve({**MATMUL_8192, "dtype": "float32"}, SCHEMA)


def test_memory_estimate_reads_the_operation_parameters_and_fixed_arrays(monkeypatch):
    """mlp's weights (size-independent, drawn once) count in every size's estimate."""
    from numbench import operations

    mlp = operations.get("mlp")
    weights = 1024 * 1024 * 2 + 1024 * 10 + 1024 * 2 + 10
    assert mlp.input_elements(1) == 1024 + weights
    assert mlp.memory_floor_bytes(1, "float64") == (1024 + weights + 10 + 10) * 8
    linreg = operations.get("linreg_gd")
    assert linreg.memory_floor_bytes(2, "float32", {"iterations": 5}) == (
        (10_000 * 2 + 10_000 + 3) * 8 + 3 * 4
    )


def test_every_size_of_the_shipped_configs_fits_here():
    """The memory check refuses none of the shipped grids (the full one holds float64)."""
    import yaml

    default = yaml.safe_load((REPO / "config" / "config.yaml").read_text(encoding="utf-8"))
    for name in ("config.yaml", "full.yaml"):
        extra = yaml.safe_load((REPO / "config" / name).read_text(encoding="utf-8"))
        resolve(_merge(default, extra), SCHEMA)


def test_on_a_cluster_threads_are_not_checked_against_this_host():
    """The cells run on the nodes: a count above this host's CPUs is the nodes' business (each
    cell asks the scheduler for that many CPUs and records the threads it got)."""
    base = {"operations": {"sort": {"sizes": [10]}}, "threads": [1, 4096]}
    with pytest.raises(ConfigError, match="more than the"):
        resolve(base, SCHEMA)
    assert resolve(base, SCHEMA, cells_run_here=False)["threads"] == [1, 4096]


def test_on_a_cluster_threads_all_is_refused_not_resolved_to_this_host():
    base = {"operations": {"sort": {"sizes": [10]}}, "threads": [1, "all"]}
    with pytest.raises(ConfigError) as err:
        resolve(base, SCHEMA, cells_run_here=False)
    message = str(err.value)
    assert message.startswith("threads[1] = 'all' ")
    assert "cells run on other hosts" in message and "give the counts" in message


def test_on_a_cluster_sizes_are_not_checked_against_this_host_memory(monkeypatch):
    _host_memory(monkeypatch, 0.5)
    with pytest.raises(ConfigError, match="more than the 0.5 GiB"):
        resolve(MATMUL_8192, SCHEMA)
    cfg = resolve(MATMUL_8192, SCHEMA, cells_run_here=False)
    assert cfg["operations"]["matmul"]["sizes"] == [8192]


@pytest.mark.parametrize(
    "nodes, remote, expected",
    [
        (None, False, True),  # --cores N (a local run turns --jobs alone into --cores)
        (50, False, False),  # --executor slurm --jobs 50, or the slurm profile's jobs: 50
        (None, True, False),  # a job on a cluster node reads the Snakefile in remote mode
    ],
)
def test_snakemake_runs_cells_here(nodes, remote, expected):
    from types import SimpleNamespace

    from numbench.config import snakemake_runs_cells_here

    workflow = SimpleNamespace(
        resource_settings=SimpleNamespace(nodes=nodes), remote_exec=remote, executor_plugin=None
    )
    assert snakemake_runs_cells_here(workflow) is expected


@pytest.mark.e2e
def test_a_cluster_dry_run_takes_threads_beyond_this_host(wf: Path) -> None:
    """Through Snakemake: the slurm executor's dry run plans cells at more threads than this
    host has, and refuses ``threads: all``; a local dry run refuses the count."""
    pytest.importorskip("snakemake_executor_plugin_slurm", reason="needs the slurm executor")
    (wf / "many-threads.yaml").write_text(
        "libraries: [numpy]\noperations: {sort: {sizes: [10]}}\nthreads: [1, 4096]\n",
        encoding="utf-8",
    )
    (wf / "all-threads.yaml").write_text(
        "libraries: [numpy]\noperations: {sort: {sizes: [10]}}\nthreads: [1, all]\n",
        encoding="utf-8",
    )
    cluster = ["-n", "--executor", "slurm", "--jobs", "2"]
    proc = snakemake(wf, *cluster, "--configfile", "many-threads.yaml", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "t4096/sort/10.parquet" in proc.stdout + proc.stderr
    proc = snakemake(wf, *cluster, "--configfile", "all-threads.yaml", timeout=300)
    assert_config_error(proc, ["threads[1] = 'all'", "give the counts"])
    proc = snakemake(wf, "-n", "--cores", "1", "--configfile", "many-threads.yaml", timeout=300)
    assert_config_error(proc, ["threads[1] = 4096 is more than the"])
