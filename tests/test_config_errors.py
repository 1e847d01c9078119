"""Bad configs stop the workflow before any job runs: one clear message naming the key, the
bad value and what is allowed, a non-zero exit, and no Python traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO, copy_workflow, snakemake

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
        "replicates-spread-over-min",
        "replicates: {min: 2, max: 3, spread: 3}",
        ["replicates.spread = 3 is larger than replicates.min = 2"],
    ),
    (
        "replicates-spread-negative",
        "replicates: {spread: -1}",
        ["replicates.spread = -1 is out of range"],
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


SNAKEMAKE_CASES = {
    "unknown-library",
    "unknown-operation",
    "unknown-device",
    "unknown-dtype",
    "empty-dtype",
    "threads-over-host",
    "threads-all-misspelt",
    "size-zero",
    "size-text",
    "empty-libraries",
    "baseline-not-in-grid",
    "timing-min-samples",
    "timing-min-over-max",
    "cell-memory-limit",
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
def dry_runs(wf: Path) -> dict:
    """Every case's ``snakemake -n``, a few at a time (each is mostly Snakemake's start-up)."""
    from concurrent.futures import ThreadPoolExecutor

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


def assert_config_error(proc, expected: list[str]) -> None:
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "Traceback" not in out, out
    assert "config error: " in out, out
    for text in expected:
        assert text in out, f"{text!r} not in:\n{out}"


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


def test_a_user_config_cannot_name_a_fault_adapter(tmp_path: Path) -> None:
    """Without the test-only switch the fault adapters are not registered at all: a config
    naming one is refused like any unknown library, by Snakemake, before any job runs."""
    import os

    wd = copy_workflow(tmp_path / "wf")
    (wd / "user.yaml").write_text(
        "libraries: [numpy, fault-crash]\noperations:\n  sort: {sizes: [10]}\n", encoding="utf-8"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBENCH_TEST_ADAPTERS"}
    env["NUMBENCH_TEST_ADAPTERS"] = ""
    proc = snakemake(wd, "-n", "--cores", "1", "--configfile", "user.yaml", env=env)
    assert proc.returncode != 0
    assert "libraries[1] = 'fault-crash' is not a known library" in proc.stderr + proc.stdout
    assert not (wd / "results").exists()
