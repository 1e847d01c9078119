"""Environments (library versions side by side): config, grid, specs, paths, the test-only
slowdown, and the worker's interpreter. The workflow runs them in test_environments_e2e.py."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from adapters import slowed

from numbench.cells import Cell
from numbench.config import ConfigError, cell_spec, grid, resolve
from numbench.config.environments import ENVS_DIR, pinned_libraries
from numbench.errors import MachineryFault
from numbench.measure import process
from numbench.spec import CellSpec

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
DEFAULT = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
SMALL = {
    "libraries": ["numpy", "jax", "torch"],
    "operations": {"matmul": {"sizes": [64]}, "sort": {"sizes": [1000, 10000]}},
}


def cfg(**over):
    return resolve({**DEFAULT, **SMALL, **over}, SCHEMA)


def test_without_the_key_the_grid_and_the_specs_are_what_they_were():
    c = cfg()
    assert c["environments"] == {}
    cells = grid(c)
    assert all(cell.environment == "" for cell in cells)
    spec = json.loads(cell_spec(c, Cell("torch", "cpu", "matmul", 64)).to_json())
    # the field is left out of the JSON: the rule's params, hence the measured cells, stay
    assert "environment" not in spec
    assert spec["paired_with"] == "numpy/cpu"
    assert Cell("torch", "cpu", "matmul", 64).path == (
        "results/cells/torch/cpu/float64/t1/matmul/64.parquet"
    )


def test_an_environment_adds_its_libraries_cells_paired_with_the_base_ones():
    c = cfg(environments={"numpy-2.3": ["numpy==2.3.*"]})
    assert c["environments"]["numpy-2.3"]["libraries"] == ["numpy"]
    cells = grid(c)
    extra = [cell for cell in cells if cell.environment]
    assert len(extra) == 3 and {cell.library for cell in extra} == {"numpy"}
    assert len(cells) == 3 * 3 + 3
    cell = Cell("numpy", "cpu", "sort", 1000, environment="numpy-2.3")
    assert cell.path == "results/cells/numpy@numpy-2.3/cpu/float64/t1/sort/1000.parquet"
    assert Cell.from_path(cell.path) == cell and Cell.from_path(cell.log) == cell
    assert cell.in_base == Cell("numpy", "cpu", "sort", 1000)
    spec = cell_spec(c, cell)
    # the baseline library's own cell is paired too: with its base environment
    assert spec.paired_with == "numpy/cpu"
    assert spec.environment.python == f"{ENVS_DIR}/numpy-2.3/bin/python"
    assert spec.environment.pins == ["numpy==2.3.*"]
    partner = spec.paired_spec()
    assert partner.environment is None and partner.library == "numpy"
    assert CellSpec.from_json(spec.to_json()) == spec


def test_libraries_default_to_those_pinned_else_every_one():
    grid_libs = ["numpy", "jax", "torch", "tensorflow", "numba"]
    assert pinned_libraries(["jaxlib==0.9.*"], grid_libs) == ["jax"]
    assert pinned_libraries(["tensorflow-cpu==2.20.*"], grid_libs) == ["tensorflow"]
    assert pinned_libraries(["Torch>=2.12,<2.13", "llvmlite==0.45.*"], grid_libs) == [
        "torch",
        "numba",
    ]
    c = cfg(environments={"flag": {"variables": {"TF_ENABLE_ONEDNN_OPTS": 0}}})
    assert c["environments"]["flag"]["libraries"] == ["numpy", "jax", "torch"]
    assert c["environments"]["flag"]["variables"] == {"TF_ENABLE_ONEDNN_OPTS": "0"}
    spec = cell_spec(c, Cell("jax", "cpu", "sort", 1000, environment="flag"))
    assert spec.environment.python is None and spec.paired_with == "jax/cpu"


@pytest.mark.parametrize(
    ("environments", "words"),
    [
        ("numpy==2.3", "must be a mapping"),
        ({"base": ["numpy==2.3.*"]}, "'base' is not allowed"),
        ({"a/b": ["numpy==2.3.*"]}, "'a/b' is not allowed"),
        ({"old": ["numpy=2.3"]}, "environments.old.pins[0] = 'numpy=2.3' is not a requirement"),
        ({"old": ["numpy==2.3.*", "NumPy<3"]}, "pins numpy twice"),
        ({"old": {"pins": ["numpy==2.3.*"], "libraries": ["cupy"]}}, "'cupy' is not in the grid"),
        ({"old": {"pins": ["numpy==2.3.*"], "python": "x"}}, "unknown key 'python'"),
        ({"old": {"variables": {"OMP_NUM_THREADS": 4}}}, "numbench sets OMP_NUM_THREADS"),
        ({"old": {"variables": {"PYTHONPATH": "x"}}}, "numbench sets PYTHONPATH"),
        ({"old": {"variables": {"1X": "x"}}}, "'1X' is not a variable name"),
        ({"old": {"variables": {"X": [1]}}}, "must be a string or a number"),
        ({"old": []}, "pins nothing and sets no variables"),
    ],
)
def test_a_bad_environment_is_a_config_error_naming_it(environments, words):
    with pytest.raises(ConfigError) as err:
        cfg(environments=environments)
    assert words in str(err.value)


def test_the_worker_runs_the_environments_interpreter(tmp_path, monkeypatch):
    c = cfg(environments={"numpy-2.3": ["numpy==2.3.*"]})
    spec = cell_spec(c, Cell("numpy", "cpu", "sort", 1000, environment="numpy-2.3"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MachineryFault, match="numpy-2.3.*interpreter .* is missing"):
        process.worker_interpreter(spec)
    python = tmp_path / ENVS_DIR / "numpy-2.3" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    assert process.worker_interpreter(spec) == str(python)
    base = cell_spec(c, Cell("numpy", "cpu", "sort", 1000))
    assert process.worker_interpreter(base) == process.sys.executable


def test_an_environments_variables_reach_its_workers_only():
    c = cfg(environments={"flag": {"variables": {"NUMBENCH_SOMETHING": "on"}}})
    env_spec = cell_spec(c, Cell("numpy", "cpu", "sort", 1000, environment="flag"))
    assert process.worker_environment(env_spec)["NUMBENCH_SOMETHING"] == "on"
    assert "NUMBENCH_SOMETHING" not in process.worker_environment(env_spec.paired_spec())


class _Adapter:
    sync = None

    def compile(self, fn):
        return fn

    def as_is(self, kernel):
        return kernel


class TickingClock:
    """A constructed ``perf_counter``: each reading is a millisecond after the last, and a
    call of the library moves it by its own duration."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1e-3
        return self.now


def test_the_slowdown_stretches_each_call_by_its_factor(monkeypatch):
    clock = TickingClock()
    monkeypatch.setattr(slowed, "time", SimpleNamespace(perf_counter=clock))
    monkeypatch.setenv(slowed.SLOWDOWN_ENV, "1.5")
    monkeypatch.setenv("NUMBENCH_TEST_ADAPTERS", "1")

    def call():
        clock.now += 0.02  # the library's own 20 ms

    fn = slowed.slowed_if_asked(_Adapter()).compile(call)
    t0 = clock.now
    fn()
    # the call, 21 ms from its first reading to its second, then a busy wait to 1.5 times
    # that, read a millisecond at a time
    took = clock.now - t0
    assert 1.5 * 0.021 + 1e-3 <= took < 1.5 * 0.021 + 3e-3
    synced = []
    adapter = _Adapter()
    adapter.sync = synced.append
    slowed.slowed_if_asked(adapter).compile(lambda: "result")()
    assert synced == ["result"]  # an asynchronous library's call is waited for first


def test_the_slowdown_stretches_a_kernel_handed_over_as_it_is(monkeypatch):
    """numbench compiles no kernel handed over as it is (``numbench.as_is``), and the
    slowdown still stretches its calls: a slowed twin of such an operation is slower."""
    import numbench
    from numbench.operations.kernels import prepared

    clock = TickingClock()
    monkeypatch.setattr(slowed, "time", SimpleNamespace(perf_counter=clock))
    monkeypatch.setenv(slowed.SLOWDOWN_ENV, "2")
    monkeypatch.setenv("NUMBENCH_TEST_ADAPTERS", "1")

    def kernel():
        clock.now += 0.05

    plain, came_as_is = prepared(_Adapter(), numbench.as_is(kernel))
    assert plain is kernel and came_as_is
    fn, came_as_is = prepared(slowed.slowed_if_asked(_Adapter()), numbench.as_is(kernel))
    assert came_as_is and fn is not kernel
    t0 = clock.now
    fn()
    assert 2 * 0.051 + 1e-3 <= clock.now - t0 < 2 * 0.051 + 3e-3


def test_the_slowdown_is_test_only_and_a_factor(monkeypatch):
    adapter = _Adapter()
    monkeypatch.delenv(slowed.SLOWDOWN_ENV, raising=False)
    assert slowed.slowed_if_asked(adapter) is adapter and adapter.compile(len) is len
    assert adapter.as_is(len) is len
    monkeypatch.setenv(slowed.SLOWDOWN_ENV, "1.1")
    monkeypatch.delenv("NUMBENCH_TEST_ADAPTERS", raising=False)
    with pytest.raises(ValueError, match="test-only"):
        slowed.slowed_if_asked(adapter)
    monkeypatch.setenv("NUMBENCH_TEST_ADAPTERS", "1")
    for bad in ("0.9", "fast"):
        monkeypatch.setenv(slowed.SLOWDOWN_ENV, bad)
        with pytest.raises(ValueError, match=slowed.SLOWDOWN_ENV):
            slowed.slowed_if_asked(adapter)
    monkeypatch.setenv(slowed.SLOWDOWN_ENV, "1")
    assert slowed.slowed_if_asked(adapter).compile(len) is len


def test_the_slowdown_registers_a_stretched_twin_of_every_adapter_only_when_asked():
    """Named in ``NUMBENCH_ADAPTERS`` (the conftest does), the slowdown's file replaces every
    adapter registered before it by a twin of the same name whose instances are stretched,
    as a worker makes them, and only where a slowdown is asked for: else it registers none."""
    import os
    import subprocess
    import sys

    code = (
        "from numbench import libraries as r; a = r.get('numpy')('cpu', 'float64', 1); "
        "print(type(a).__name__, r.get('fault-raise').__name__, a.compile(len) is len)"
    )

    def registered(**env: str) -> list[str]:
        env = {**os.environ, "PYTHONPATH": str(REPO / "src"), **env}
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        return done.stdout.split()

    assert registered() == ["NumpyAdapter", "RaiseAdapter", "True"]
    twins = registered(**{slowed.SLOWDOWN_ENV: "2"})
    assert twins == ["SlowedNumpyAdapter", "SlowedRaiseAdapter", "False"]


def test_an_offsite_plan_refuses_environments():
    from numbench.offsite.common import OffsiteError
    from numbench.offsite.plan import make_plan

    with pytest.raises(OffsiteError, match="not carried offsite"):
        make_plan(cfg(environments={"numpy-2.3": ["numpy==2.3.*"]}))
