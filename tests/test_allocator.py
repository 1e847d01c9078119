"""``allocator``: every worker process starts with the same malloc settings, so a call's
temporaries are reused memory in every process, not fresh pages in some and not in others."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest
from conftest import REPO, make_spec

from numbench.config import cell_spec, grid, resolve
from numbench.libraries import ALLOCATORS, STEADY_MALLOC, allocator_environment
from numbench.measure.process import worker_environment

SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"

# Minor page faults per call of NumPy's elementwise work on n = 1e5 (three 800 KB results):
# the cost the allocator's state adds to a call, counted, not timed.
FAULTS_PER_CALL = """
import resource
import numpy as np
a = np.random.default_rng(1).uniform(-3, 3, 100_000)
b = 0.5 * a
def call():
    return np.add(a, b), np.multiply(a, b), np.sin(a)
for _ in range(5):
    call()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    call()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 50)
"""


TIMING = {"min_sample_time_s": 0.001, "min_samples": 3, "max_samples": 3, "budget_s": 0.01}


def spec(allocator: str):
    return make_spec("numpy", "cpu", "elementwise", 1000, "x.npz", TIMING, allocator=allocator)


def test_allocator_environment():
    assert allocator_environment("steady") == STEADY_MALLOC
    assert set(STEADY_MALLOC) == {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"}
    assert allocator_environment("system") == {}
    with pytest.raises(ValueError, match="unknown allocator 'tcmalloc'"):
        allocator_environment("tcmalloc")


def test_config_default_is_steady_and_reaches_every_cell_spec():
    cfg = resolve({"operations": {"sort": {"sizes": [10]}}}, SCHEMA)
    assert cfg["allocator"] == "steady"
    assert {cell_spec(cfg, c).allocator for c in grid(cfg)} == {"steady"}
    cfg = resolve({"operations": {"sort": {"sizes": [10]}}, "allocator": "system"}, SCHEMA)
    specs = [cell_spec(cfg, c) for c in grid(cfg)]
    assert {s.allocator for s in specs} == {"system"}
    # the paired baseline processes run with the cell's settings
    assert {s.paired_spec().allocator for s in specs if s.paired_with} == {"system"}


def test_worker_environment_sets_the_steady_thresholds(monkeypatch):
    for name in STEADY_MALLOC:
        monkeypatch.delenv(name, raising=False)
    env = worker_environment(spec("steady"))
    assert {k: env[k] for k in STEADY_MALLOC} == STEADY_MALLOC
    env = worker_environment(spec("system"))
    assert not set(STEADY_MALLOC) & set(env)


@pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="the thresholds are glibc malloc's",
)
def test_steady_allocator_stops_the_page_faults_of_each_call():
    def faults(allocator: str) -> float:
        env = {k: v for k, v in os.environ.items() if k not in STEADY_MALLOC}
        env.update(allocator_environment(allocator))
        out = subprocess.run(
            [sys.executable, "-c", FAULTS_PER_CALL], env=env, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        return float(out.stdout)

    steady, system = faults("steady"), faults("system")
    # glibc's own thresholds hand the results fresh pages on every call (about 360 faults
    # per call here); the steady ones reuse the heap
    assert steady < 1, steady
    assert system > 100 * max(steady, 1), (steady, system)


def test_schema_allows_exactly_the_allocators_the_package_knows():
    import yaml

    schema = yaml.safe_load(SCHEMA.read_text(encoding="utf-8"))
    assert tuple(schema["properties"]["allocator"]["enum"]) == ALLOCATORS
