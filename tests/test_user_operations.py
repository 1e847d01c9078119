"""A user's own operation: a file outside the package, named in the config, loaded and
checked before any job runs, measured like a built-in one, and its code's hash in every
cell's spec (issue 32). The workflow end to end is in test_user_operations_e2e.py."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import REPO, make_spec

from numbench import operations
from numbench.config import ConfigError, cell_spec, grid, resolve
from numbench.operations.loading import operation_code

SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
FAST = {"min_sample_time_s": 0.001, "min_samples": 3, "max_samples": 3, "budget_s": 0.01}

#: a user's operation: an in-place-safe sort, its helper beside it; {impl} is the numpy
#: builder's body (a function ``sort(a)``), {extra} more Operation fields
OPERATION = """\
import numpy as np
from helper import draw

from numbench import Operation


def make_inputs(size, rng):
    return {{"a": draw(size, rng)}}


def reference(a):
    return np.sort(a)


def _numpy(np_, dtype):
{impl}
    return sort


OPERATION = Operation(
    name="{name}",
    summary="ascending sort",
    input_names=("a",),
    make_inputs=make_inputs,
    reference=reference,
    tolerance={{"float32": 1e-6, "float64": 1e-14}},
    implementations={{"numpy": _numpy}},
{extra})
"""
SORTED_COPY = "    def sort(a):\n        return np_.sort(a)\n"
HELPER = "def draw(size, rng):\n    return rng.standard_normal(size)\n"


def write_operation(
    folder: Path, name: str = "mysort", impl: str = SORTED_COPY, extra: str = "", file=None
) -> Path:
    """A user's operation file (and its helper) in ``folder``; returns the file."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "helper.py").write_text(HELPER)
    path = folder / (file or f"{name}.py")
    path.write_text(OPERATION.format(name=name, impl=impl, extra=textwrap.indent(extra, "    ")))
    return path


def config_with(path: Path, name: str = "mysort", sizes=(100,), **entry) -> dict:
    return {
        "libraries": ["numpy"],
        "operations": {name: {"module": str(path), "sizes": list(sizes), **entry}},
    }


def config_error(cfg: dict) -> str:
    with pytest.raises(ConfigError) as info:
        resolve(cfg, SCHEMA)
    return str(info.value)


# -- the public interface -------------------------------------------------------------------------
def test_operation_is_a_public_import_that_loads_nothing_heavy_until_used():
    code = (
        "import sys, numbench; heavy = 'numpy' in sys.modules; "
        "from numbench import Operation; from numbench.operations import sort; "
        "print(heavy, sort.OPERATION.__class__ is Operation)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


# -- config time ----------------------------------------------------------------------------------
def test_a_file_in_a_folder_with_a_space_is_found_and_its_cells_carry_it(tmp_path):
    path = write_operation(tmp_path / "my ops")
    cfg = resolve(config_with(path), SCHEMA)
    specs = [cell_spec(cfg, c) for c in grid(cfg)]
    assert {s.operation_file for s in specs} == {str(path.resolve())}
    assert {s.operation_hash for s in specs} == {operation_code(path).sha256}


def test_a_relative_module_lies_under_the_workflow_folder(tmp_path):
    write_operation(tmp_path / "ops")
    cfg = config_with(Path("ops/mysort.py"))
    resolved = resolve(cfg, SCHEMA, workflow_dir=tmp_path)
    assert resolved["operations"]["mysort"]["module"] == str(tmp_path / "ops" / "mysort.py")
    assert "ops/mysort.py does not exist" in config_error(cfg)  # not under the repository


def test_a_missing_file_is_a_config_error_naming_it(tmp_path):
    message = config_error(config_with(tmp_path / "nowhere" / "op.py"))
    assert message.startswith("operations.mysort.module: ")
    assert f"{tmp_path / 'nowhere' / 'op.py'} does not exist" in message


def test_a_file_that_does_not_import_says_the_exception_s_last_line(tmp_path):
    path = write_operation(tmp_path, extra="")
    path.write_text("import numpy\n\nraise ValueError('no grid here')\n")
    message = config_error(config_with(path))
    assert f"{path} does not import: ValueError: no grid here (mysort.py, line 3)" in message
    path.write_text("def broken(:\n")
    assert "does not import: SyntaxError" in config_error(config_with(path))
    path.write_text("import no_such_module_here\n")
    assert "ModuleNotFoundError: No module named 'no_such_module_here'" in config_error(
        config_with(path)
    )


def test_a_file_without_an_operation_or_with_another_value_is_refused(tmp_path):
    path = tmp_path / "mysort.py"
    path.write_text("X = 1\n")
    assert f"{path} defines no OPERATION" in config_error(config_with(path))
    path.write_text("OPERATION = {'name': 'mysort'}\n")
    assert f"{path}: OPERATION is a dict, not a numbench.Operation" in config_error(
        config_with(path)
    )


def test_the_config_key_must_be_the_operation_s_name(tmp_path):
    path = write_operation(tmp_path, name="other_sort", file="mysort.py")
    message = config_error(config_with(path))
    assert "defines the operation 'other_sort' (its OPERATION.name)" in message
    assert "the config's key must be the same name" in message


def test_make_inputs_or_reference_failing_at_the_smallest_size_is_a_config_error(tmp_path):
    path = write_operation(tmp_path)
    (tmp_path / "helper.py").write_text(
        "def draw(size, rng):\n    if size < 50:\n        raise ValueError('too small')\n"
        "    return rng.standard_normal(size)\n"
    )
    message = config_error(config_with(path, sizes=(10, 100)))
    assert "make_inputs(10, rng) raised ValueError: too small" in message
    assert f"{tmp_path / 'helper.py'}:3:" in message  # where it raised, in the helper
    (tmp_path / "helper.py").write_text(HELPER)
    text = path.read_text().replace("return np.sort(a)", "return np.sort(a, axis=3)")
    path.write_text(text)
    message = config_error(config_with(path))
    assert "reference at size 100 raised numpy.exceptions.AxisError: axis 3" in message
    assert f"{path}:" in message


def test_every_problem_of_the_fields_is_said_at_once(tmp_path):
    extra = 'mutates_inputs=("b",),\n'
    path = write_operation(tmp_path, extra=extra)
    path.write_text(
        path.read_text()
        .replace('"float32": 1e-6, ', "")
        .replace('{"numpy": _numpy}', '{"numpy": _numpy, "pytorch": _numpy}')
    )
    message = config_error(config_with(path) | {"dtype": ["float64", "float32"]})
    assert "has 3 problem(s)" in message
    assert "tolerance: gives no relative error > 0 for float32" in message
    assert "implementations: 'pytorch' is no library family" in message
    assert "mutates_inputs: 'b' is not one of input_names ('a',)" in message


def test_a_built_in_name_and_an_unknown_one_are_refused_with_a_hint(tmp_path):
    path = write_operation(tmp_path, name="sort")
    message = config_error(config_with(path, name="sort"))
    assert "sort is a built-in operation; give yours another name" in message
    message = config_error({"operations": {"nosuchop": {"sizes": [10]}}})
    assert "or give operations.nosuchop.module: the .py file of your own" in message
    message = config_error({"operations": {"My-Op": {"module": str(path), "sizes": [10]}}})
    assert "'My-Op' is no operation name" in message


def test_an_operation_given_by_name_only_must_have_sizes(tmp_path):
    path = write_operation(tmp_path)
    message = config_error({"operations": {"mysort": {"module": str(path)}}})
    assert "operations.mysort has no sizes" in message


def test_params_are_given_under_params_and_the_older_spelling_still_reads():
    old = resolve({"operations": {"linreg_gd": {"sizes": [2], "iterations": 7}}}, SCHEMA)
    new = resolve(
        {"operations": {"linreg_gd": {"sizes": [2], "params": {"iterations": 7}}}}, SCHEMA
    )
    (cell,) = [c for c in grid(old) if c.library == "numpy"]
    assert cell_spec(old, cell) == cell_spec(new, cell)
    assert cell_spec(new, cell).params == {"iterations": 7}
    both = {"linreg_gd": {"sizes": [2], "iterations": 7, "params": {"iterations": 8}}}
    assert "gives iterations twice" in config_error({"operations": both})
    bad = {"linreg_gd": {"sizes": [2], "params": {"iterations": 0}}}
    assert "operations.linreg_gd.params.iterations = 0 is out of range" in config_error(
        {"operations": bad}
    )


def test_a_user_s_params_override_its_defaults_and_unknown_ones_are_refused(tmp_path):
    path = write_operation(tmp_path, extra='params={"k": 1},\n')
    path.write_text(path.read_text().replace("def reference(a)", "def reference(a, *, k)"))
    path.write_text(
        path.read_text().replace("def _numpy(np_, dtype)", "def _numpy(np_, dtype, *, k)")
    )
    cfg = resolve(config_with(path, params={"k": 3}), SCHEMA)
    assert {cell_spec(cfg, c).params["k"] for c in grid(cfg)} == {3}
    message = config_error(config_with(path, params={"j": 3}))
    assert "mysort has no parameter 'j'; known: k" in message


# -- the code's hash ------------------------------------------------------------------------------
def test_the_hash_follows_imports_inside_the_folder_only(tmp_path):
    path = write_operation(tmp_path)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "deep.py").write_text("X = 1\n")
    (tmp_path / "helper.py").write_text(HELPER + "from pkg import deep\n")
    (tmp_path / "unrelated.py").write_text("Y = 2\n")
    code = operation_code(path)
    assert [code.relative(h) for h in code.helpers] == [
        "helper.py",
        "pkg/__init__.py",
        "pkg/deep.py",
    ]
    before = code.sha256
    (tmp_path / "unrelated.py").write_text("Y = 3\n")  # not imported: no change
    assert operation_code(path).sha256 == before
    (tmp_path / "pkg" / "deep.py").write_text("X = 2\n")  # imported by a helper: a change
    assert operation_code(path).sha256 != before


def test_a_built_in_s_hash_covers_its_module_and_what_it_imports_from_the_package():
    code = operations.loading.find("elementwise").code
    names = [code.relative(h) for h in code.helpers]
    assert names == ["operations/_numba_cuda.py", "operations/base.py"]
    assert operations.loading.find("sort").sha256 != code.sha256


def test_an_edited_helper_is_read_again_and_refused_where_the_cell_was_planned_before(tmp_path):
    path = write_operation(tmp_path)
    planned = operations.load_file(path).sha256
    (tmp_path / "helper.py").write_text(
        HELPER.replace("rng.standard_normal(size)", "rng.uniform(0.0, 1.0, size)")
    )
    found = operations.load("mysort", path)
    assert found.sha256 != planned
    assert found.operation.make_inputs(3, __import__("numpy").random.default_rng(0))["a"].min() >= 0
    with pytest.raises(operations.OperationChanged, match="changed after the cell was planned"):
        operations.load("mysort", path, planned)


def test_an_installed_operation_is_found_by_its_entry_point(tmp_path, monkeypatch):
    site = tmp_path / "site"
    write_operation(site / "numbench_demo_ops", name="demo_sort", file="ops.py")
    (site / "numbench_demo_ops" / "__init__.py").write_text("")
    text = (site / "numbench_demo_ops" / "ops.py").read_text()
    (site / "numbench_demo_ops" / "ops.py").write_text(
        text.replace("from helper import draw", "from numbench_demo_ops.helper import draw")
    )
    dist = site / "numbench_demo_ops-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: numbench-demo-ops\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[numbench.operations]\ndemo_sort = numbench_demo_ops.ops:OPERATION\n"
    )
    monkeypatch.syspath_prepend(str(site))
    cfg = resolve({"libraries": ["numpy"], "operations": {"demo_sort": {"sizes": [10]}}}, SCHEMA)
    spec = cell_spec(cfg, grid(cfg)[0])
    assert spec.operation_file is None
    code = operations.loading.find("demo_sort").code
    assert [code.relative(h) for h in code.helpers] == ["helper.py"]
    assert spec.operation_hash == code.sha256


# -- run time -------------------------------------------------------------------------------------
def measure(tmp_path: Path, path: Path, name="mysort", size=200, dtype="float64", library="numpy"):
    """Measure a cell of the user's operation in this process (the worker's own code)."""
    from numbench import inputs_file as inputs
    from numbench.measure.worker import measure as worker_measure

    npz = tmp_path / f"{name}-{size}.npz"
    inputs.write(name, size, 1, npz, operation_file=str(path))
    spec = make_spec(library, "cpu", name, size, npz, FAST, dtype=dtype, operation_file=path)
    return worker_measure(spec)


@pytest.mark.parametrize(
    "impl,status,error",
    [
        (
            "    def sort(a):\n        raise RuntimeError('no sort today')\n",
            "failed",
            "RuntimeError: no sort today",
        ),
        (
            "    def sort(a):\n        return np_.sort(a)[:-1]\n",
            "mismatch",
            "output does not match the reference: output shape (199,) differs from reference (200,)",
        ),
        (
            "    def sort(a):\n        return np_.sort(a).astype('float32')\n",
            "mismatch",
            "output 0 has dtype float32; a float64 cell must return float64",
        ),
        (
            "    def sort(a):\n        return np_.sort(a) * 1.01\n",
            "mismatch",
            "relative error 0.01 exceeds the float64 tolerance 1e-14",
        ),
        (
            "    def sort(a):\n        a.sort()\n        return a\n",
            "failed",
            "the numpy implementation changed its input 'a' (it writes into it",
        ),
    ],
    ids=["raises", "shape", "dtype", "wrong", "in-place"],
)
def test_a_broken_implementation_is_a_failed_or_mismatch_cell_saying_why(
    tmp_path, impl, status, error
):
    report = measure(tmp_path, write_operation(tmp_path, impl=impl))
    assert (report.status, error in (report.error or "")) == (status, True), report.error


def test_a_declared_mutation_gets_a_fresh_copy_for_every_call(tmp_path):
    """Each call must see unsorted data: one that sees its input sorted raises."""
    impl = (
        "    def sort(a):\n"
        "        if np_.all(a[1:] >= a[:-1]):\n"
        "            raise RuntimeError('called on data an earlier call sorted')\n"
        "        a.sort()\n"
        "        return a\n"
    )
    path = write_operation(tmp_path, impl=impl, extra='mutates_inputs=("a",),\n')
    report = measure(tmp_path, path)
    assert report.status == "ok", report.error
    assert report.loops > 1 and len(report.samples_s) == 3


def test_fresh_copies_are_made_in_chunks_outside_the_timed_region():
    from numbench.timing import Timer

    made, clock_now = [], [0.0]

    def clock():
        return clock_now[0]

    def fn(a):
        clock_now[0] += 1.0  # each call takes one second of the fake clock
        return a

    def fresh():
        made.append(1)
        clock_now[0] += 100.0  # a copy would take 100: it must never be timed
        return ([0.0] * 4,)

    timer = Timer(fn, ([0.0] * 4,), clock=clock, fresh_args=fresh, fresh_memory_bytes=3 * 32)
    assert timer.fresh_chunk == 3
    assert timer.time_loops(7) == 7.0
    assert len(made) == 7


def test_an_operation_without_a_cost_model_has_null_rates(tmp_path):
    from numbench.inputs_file import write
    from numbench.measure.supervisor import run_cell

    path = write_operation(tmp_path)
    npz = tmp_path / "in.npz"
    write("mysort", 100, 1, npz, operation_file=str(path))
    spec = make_spec("numpy", "cpu", "mysort", 100, npz, FAST, operation_file=path)
    out = tmp_path / "cell.parquet"
    result = run_cell(spec, out, lock=str(tmp_path / "lock"))
    assert result.status == "ok", result.error
    table = pq.read_table(out).to_pandas()
    assert table["gflop_per_s"].isna().all() and table["flops"].isna().all()
    assert set(table["operation_hash"]) == {operation_code(path).sha256}


def test_a_library_without_an_implementation_is_unsupported_saying_so(tmp_path):
    report = measure(tmp_path, write_operation(tmp_path), library="torch")
    assert (report.status, report.error) == ("unsupported", "no torch implementation of mysort")


# -- numbench check -------------------------------------------------------------------------------
def test_check_reports_every_problem_with_its_file_and_line_and_exits_1(tmp_path):
    impl = "    def sort(a):\n        a.sort()\n        return a.astype('float32')\n"
    path = write_operation(tmp_path / "my ops", impl=impl)
    lines = []
    from numbench.check import check

    assert check(str(path), say=lines.append) == 1
    text = "\n".join(lines)
    assert f"{path}:15: the numpy implementation changed its input 'a'" in text
    assert f"{path}:15: the numpy implementation: output 0 has dtype float32" in text
    assert f"{path}:15: the numpy implementation's relative error" in text
    assert "3 problem(s)" in text
    assert "jax: unsupported (no jax implementation of mysort)" in text


def test_check_says_no_problems_of_a_good_operation_through_the_command(tmp_path):
    path = write_operation(tmp_path / "my ops")
    proc = subprocess.run(
        [sys.executable, "-m", "numbench", "check", str(path), "--size", "64"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "inputs and reference at size 64 (float64): made" in proc.stdout
    assert "numpy: ok" in proc.stdout and "no problems" in proc.stdout
    assert f"mysort: {path}" in proc.stdout and "\n  ascending sort\n" in proc.stdout


def test_check_of_a_file_that_does_not_import_is_one_line_and_exit_1(tmp_path):
    path = tmp_path / "bad.py"
    path.write_text("raise ImportError('missing piece')\n")
    proc = subprocess.run(
        [sys.executable, "-m", "numbench", "check", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stdout + proc.stderr
    assert (
        f"error: {path} does not import: ImportError: missing piece (bad.py, line 1)" in proc.stdout
    )


def test_compare_marks_cells_measured_with_other_operation_code():
    from conftest import constructed_results

    from numbench.compare.runs import compare, environment_differences

    old, _, _ = constructed_results()
    old["operation_hash"] = old["operation"].map({"fft": "a" * 64, "sort": "b" * 64})
    new = old.copy()
    new.loc[new["operation"] == "sort", "operation_hash"] = "c" * 64
    table = compare(old, new, 1.1)
    differs = {op: set(d) for op, d in zip(table["operation"], table["differs"], strict=True)}
    assert differs["sort"] == {"operation_hash"} and differs["fft"] == set()
    (entry,) = [d for d in environment_differences(old, new) if d["what"].startswith("operation")]
    assert entry == {"what": "operation_hash (sort)", "old": ["b" * 12], "new": ["c" * 12]}


@pytest.mark.e2e
def test_a_lockstep_round_whose_library_writes_into_its_input_fails_the_cell(tmp_path, monkeypatch):
    """The worker stops after its samples; its partner, the NumPy baseline, is not held:
    freed, it ends ok with its samples, in every lockstep round the cell ran."""
    from numbench.inputs_file import write
    from numbench.measure import supervisor
    from numbench.measure.supervisor import run_cell

    ended: list[dict[str, object]] = []  # each round's reports, by library
    real_lockstep = supervisor.run_lockstep

    def run_lockstep(specs, seed):
        reports = real_lockstep(specs, seed)
        ended.append({s.library: report for s, (_, report) in zip(specs, reports, strict=True)})
        return reports

    monkeypatch.setattr(supervisor, "run_lockstep", run_lockstep)

    path = write_operation(tmp_path / "ops")
    text = path.read_text().replace(
        'implementations={"numpy": _numpy}', 'implementations={"numpy": _numpy, "numba": _numba}'
    )
    path.write_text(
        text.replace(
            "OPERATION = Operation(",
            "def _numba(np_, dtype):\n    def sort(a):\n        a.sort()\n        return a\n\n"
            "    return sort\n\n\nOPERATION = Operation(",
        )
    )
    npz = tmp_path / "in.npz"
    write("mysort", 300, 1, npz, operation_file=str(path))
    spec = make_spec(
        "numba",
        "cpu",
        "mysort",
        300,
        npz,
        FAST,
        operation_file=path,
        paired_with="numpy/cpu",
        lockstep=True,
    )
    result = run_cell(spec, tmp_path / "cell.parquet", lock=str(tmp_path / "lock"))
    assert result.status == "failed"
    assert "the numba implementation changed its input 'a'" in result.error
    # the cell's file keeps no baseline process of a failed cell: the rounds' own reports
    assert ended and all(r["numba"].status == "failed" for r in ended), ended
    for reports in ended:
        baseline = reports["numpy"]
        assert baseline.status == "ok", baseline.error
        assert len(baseline.samples_s) >= FAST["min_samples"], baseline


def test_check_by_name_reads_the_module_size_and_params_from_a_config(tmp_path):
    from numbench.check import check

    path = write_operation(tmp_path / "wf" / "ops", extra='params={"k": 1},\n')
    path.write_text(
        path.read_text()
        .replace("def reference(a)", "def reference(a, *, k)")
        .replace("def _numpy(np_, dtype)", "def _numpy(np_, dtype, *, k)")
    )
    config = tmp_path / "mine.yaml"
    config.write_text(
        "operations:\n  mysort:\n    module: ops/mysort.py\n    sizes: [300, 77]\n"
        "    params: {k: 2}\n"
    )
    lines = []
    status = check(
        "mysort", directory=str(tmp_path / "wf"), configfiles=[str(config)], say=lines.append
    )
    assert status == 0, lines
    assert "  inputs and reference at size 77 (float64): made" in lines
    lines.clear()
    config.write_text(config.read_text().replace("{k: 2}", "{j: 2}"))
    assert (
        check("mysort", directory=str(tmp_path / "wf"), configfiles=[str(config)], say=lines.append)
        == 1
    )
    assert lines[-1] == "error: mysort has no parameter 'j'; known: k"


def test_the_stencil_example_draws_its_field_with_the_same_bits_on_every_host():
    """The example's grid is made of sine waves through its own elementwise sine (a floor,
    then Horner's rule: the same bits on every host, which np.sin's are not): close to the
    true sine, and exactly plain Python floats in the same order."""
    import importlib.util
    import math

    import numpy as np

    spec = importlib.util.spec_from_file_location(
        "stencil_grids", REPO / "examples" / "stencil" / "grids.py"
    )
    grids = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(grids)
    t = np.linspace(-40.0, 40.0, 2001)
    got = grids.sine(t)
    assert np.max(np.abs(got - np.sin(t))) < 1e-10
    expected = []
    for v in t.tolist():
        r = v - 2.0 * math.pi * math.floor(v / (2.0 * math.pi) + 0.5)
        r2, acc = r * r, grids.SINE_TERMS[-1]
        for c in grids.SINE_TERMS[-2::-1]:
            acc = acc * r2 + c
        expected.append(r * acc)
    assert got.tolist() == expected
    assert grids.random_field(9, np.random.default_rng(5)).shape == (9, 9)
