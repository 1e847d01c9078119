"""Kernels a user already has, handed over as they are (issue 41): a reference and kernels
that write into their arguments, dtypes an operation supports, several outputs checked one
by one. A user's operation file in general is in test_user_operations.py."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import make_spec

from numbench.operations.base import array_digest

SCHEMA = Path("workflow") / "schemas" / "config.schema.yaml"

FAST = {"min_sample_time_s": 0.001, "min_samples": 3, "max_samples": 3, "budget_s": 0.01}

#: a user's operation whose reference, as a kernel suite's often does, writes its result
#: into its input and returns it; {impl}: the numpy builder's body defining ``kernel(a)``,
#: {extra}: more Operation fields
IN_PLACE = """\
import numpy as np

from numbench import Operation


def make_inputs(size, rng):
    return {{"a": rng.standard_normal(size)}}


def reference(a):
    a *= 2.0
    return a


def _numpy(np_, dtype):
{impl}
    return kernel


OPERATION = Operation(
    name="{name}",
    summary="doubles a, in place",
    input_names=("a",),
    make_inputs=make_inputs,
    reference=reference,
    tolerance={{"float32": 1e-6, "float64": 1e-14}},
    implementations={{"numpy": _numpy}},
{extra})
"""
#: the kernel as the suite writes it: into its argument
KERNEL_IN_PLACE = "    def kernel(a):\n        a *= 2.0\n        return a\n"


def write_op(
    folder: Path,
    name: str = "twice",
    impl: str = KERNEL_IN_PLACE,
    extra: str = "",
    template: str = IN_PLACE,
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(template.format(name=name, impl=impl, extra=textwrap.indent(extra, "    ")))
    return path


def measure(tmp_path: Path, path: Path, name="twice", size=300, dtype="float64", params=None):
    """A cell of the operation measured in this process, by the worker's own code."""
    from numbench import inputs_file as inputs
    from numbench.measure.worker import measure as worker_measure

    npz = tmp_path / f"{name}-{size}-{dtype}.npz"
    inputs.write(name, size, 1, npz, params=params, operation_file=str(path))
    spec = make_spec(
        "numpy", "cpu", name, size, npz, FAST, dtype=dtype, operation_file=path, params=params
    )
    return worker_measure(spec)


# -- the reference and the kernels get copies -----------------------------------------------------
def test_a_reference_written_in_place_leaves_the_stored_inputs_byte_identical(tmp_path):
    from numbench import inputs_file as inputs
    from numbench import operations

    path = write_op(tmp_path)
    op = operations.load_file(path).operation
    drawn = op.make_inputs(500, operations.input_rng(7, "twice", 500))["a"]
    stored = inputs.make("twice", 500, 7, operation_file=str(path))
    assert array_digest(stored["a"]) == array_digest(drawn)
    np.testing.assert_array_equal(stored["ref_0"], 2.0 * drawn)


def test_kernels_written_in_place_leave_the_worker_s_inputs_as_loaded(tmp_path):
    """The reference and the kernel both write into their argument: the cell is ok (the
    kernel declares it, so each call gets a fresh copy), and the arrays the worker loaded are
    byte-identical after placement and calls (numpy hands a float64 array over as itself)."""
    from numbench.libraries import get
    from numbench.measure.worker import placed_copies

    path = write_op(tmp_path, extra='mutates_inputs=("a",),\n')
    report = measure(tmp_path, path)
    assert report.status == "ok", report.error

    adapter = get("numpy")("cpu", "float64", 1)
    adapter.load()
    host = [np.arange(10.0)]
    before = array_digest(host[0])
    (placed,) = placed_copies(adapter, host, "float64")
    placed *= 3.0
    assert array_digest(host[0]) == before


def test_inputs_written_into_can_be_declared_per_library(tmp_path):
    """``mutates_inputs={family: names}``: that family's calls get fresh copies, the
    others reuse their arguments (a fresh input per call has its own cost)."""
    from types import SimpleNamespace

    from numbench import operations
    from numbench.measure.worker import fresh_inputs
    from numbench.operations.check import declared_problems

    ok = measure(tmp_path, write_op(tmp_path, extra='mutates_inputs={"numpy": ("a",)},\n'))
    assert ok.status == "ok", ok.error
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    path = write_op(elsewhere, extra='mutates_inputs={"jax": ("a",)},\n')
    report = measure(elsewhere, path)  # the numpy kernel writes into a, declared for jax alone
    assert report.status != "ok" and "the numpy implementation changed its input 'a'" in (
        report.error or ""
    )
    op = operations.load_file(path).operation
    assert (op.mutated_by("jax"), op.mutated_by("numpy")) == (("a",), ())
    host, args = [np.zeros(3)], (np.ones(3),)
    placing = SimpleNamespace(family="jax", to_device=lambda a: a + 0.0)
    assert fresh_inputs(SimpleNamespace(family="numpy"), op, host, args) is None
    assert [a.tolist() for a in fresh_inputs(placing, op, host, args)()] == [[0.0, 0.0, 0.0]]
    bad = write_op(tmp_path / "bad", extra='mutates_inputs={"pytorch": ("a",), "jax": "a"},\n')
    found = operations.load_file(bad)
    said = [str(p) for p in declared_problems(found)]
    assert any("mutates_inputs: 'pytorch' is no library family" in p for p in said), said
    assert any("mutates_inputs: ['jax']'a' is a string" in p for p in said), said


def test_check_gives_every_library_the_inputs_as_drawn(tmp_path):
    """``numbench check`` calls every implementation on the same inputs in one process: one
    that writes into them (declared) must leave them for the next."""
    from numbench import operations
    from numbench.libraries import get
    from numbench.operations.check import generator_problems, implementation_problems

    found = operations.load_file(write_op(tmp_path, extra='mutates_inputs=("a",),\n'))
    problems, inputs, reference = generator_problems(found, 64, {})
    assert problems == []
    before = array_digest(inputs["a"])
    adapter = get("numpy")("cpu", "float64", 1)
    adapter.load()
    for _ in range(2):  # the second call sees what the first saw
        assert (
            implementation_problems(found, "numpy", adapter, inputs, reference, "float64", {}) == []
        )
    assert array_digest(inputs["a"]) == before


# -- the dtypes an operation supports -------------------------------------------------------------
FLOAT64_ONLY = 'dtypes=("float64",),\n'


def test_a_float64_only_operation_on_a_float32_and_float64_grid_gives_unsupported_float32(
    tmp_path,
):
    """No float32 tolerance is asked of it: the config loads, and the float32 cells are
    ``unsupported`` saying why, while the float64 ones measure."""
    from conftest import REPO

    from numbench.config import grid, resolve

    path = write_op(tmp_path, extra='dtypes=("float64",),\nmutates_inputs=("a",),\n')
    text = path.read_text().replace('"float32": 1e-6, ', "")
    path.write_text(text)
    cfg = {
        "libraries": ["numpy"],
        "dtype": ["float32", "float64"],
        "operations": {"twice": {"module": str(path), "sizes": [100]}},
    }
    cells = grid(resolve(cfg, REPO / "workflow" / "schemas" / "config.schema.yaml"))
    assert sorted(c.dtype for c in cells) == ["float32", "float64"]
    f32 = measure(tmp_path, path, size=100, dtype="float32")
    assert (f32.status, f32.error) == (
        "unsupported",
        "twice supports only float64, not float32 (its dtypes)",
    )
    f64 = measure(tmp_path, path, size=100, dtype="float64")
    assert f64.status == "ok", f64.error


def test_dtypes_outside_numbench_s_are_a_declared_problem(tmp_path):
    from numbench import operations
    from numbench.operations.check import declared_problems

    found = operations.load_file(write_op(tmp_path, extra='dtypes=("float16",),\n'))
    messages = [p.message for p in declared_problems(found)]
    assert messages == ["dtypes: ('float16',) is not a tuple of dtypes out of float32, float64"]


def test_check_of_a_float64_only_operation_in_float32_runs_nothing_and_says_why(tmp_path):
    from numbench.check import check

    path = write_op(tmp_path, extra=FLOAT64_ONLY + 'mutates_inputs=("a",),\n')
    lines = []
    assert check(str(path), dtype="float32", say=lines.append) == 0
    text = "\n".join(lines)
    assert "float32: unsupported (twice supports only float64, not float32" in text
    assert "numpy: ok" not in text


# -- several outputs ------------------------------------------------------------------------------
#: an operation of two named outputs (a dict); {impl} defines ``kernel(a, b)``
TWO_OUTPUTS = """\
import numpy as np

from numbench import Operation


def make_inputs(size, rng):
    return {{"a": rng.standard_normal(size), "b": rng.standard_normal(size)}}


def reference(a, b):
    return {{"total": a + b, "product": a * b}}


def _numpy(np_, dtype):
{impl}
    return kernel


OPERATION = Operation(
    name="{name}",
    summary="sum and product",
    input_names=("a", "b"),
    make_inputs=make_inputs,
    reference=reference,
    tolerance={{"float32": 1e-6, "float64": 1e-14}},
    implementations={{"numpy": _numpy}},
{extra})
"""


def two_outputs(tmp_path, body: str):
    path = write_op(tmp_path, name="pair", impl=body, template=TWO_OUTPUTS)
    return measure(tmp_path, path, name="pair")


def test_named_outputs_are_each_checked_as_a_dict_or_a_tuple_in_order(tmp_path):
    as_dict = "    def kernel(a, b):\n        return {'product': a * b, 'total': a + b}\n"
    as_tuple = "    def kernel(a, b):\n        return a + b, a * b\n"
    for body in (as_dict, as_tuple):
        report = two_outputs(tmp_path, body)
        assert (report.status, report.error) == ("ok", None)
        assert report.output_bytes == 2 * 300 * 8


def test_a_failing_output_is_named(tmp_path):
    body = "    def kernel(a, b):\n        return {'total': a + b, 'product': a * b * 1.01}\n"
    report = two_outputs(tmp_path, body)
    assert report.status == "mismatch"
    assert report.error == (
        "output 'product': relative error 0.01 exceeds the float64 tolerance 1e-14 (1 of 2 outputs)"
    )
    wrong_keys = "    def kernel(a, b):\n        return {'total': a + b, 'prod': a * b}\n"
    report = two_outputs(tmp_path, wrong_keys)
    assert report.status == "mismatch"
    assert report.error == (
        "output does not match the reference: outputs ['prod', 'total'] differ from the "
        "reference's ['product', 'total']"
    )


def test_a_wrong_shape_or_dtype_names_its_output():
    from numbench.operations.base import dtype_problem, output_errors

    ref = (np.zeros(3), np.ones(4))
    with pytest.raises(ValueError, match=r"output 1 shape \(3,\) differs from reference \(4,\)"):
        output_errors((np.zeros(3), np.ones(3)), ref)
    named = {"u": np.zeros(3), "v": np.ones(3)}
    got = {"u": np.zeros(3), "v": np.ones(3, dtype=np.float32)}
    assert dtype_problem(got, named, "float64") == (
        "output 'v' has dtype float32; a float64 cell must return float64"
    )


def test_check_names_the_output_that_misses(tmp_path):
    from numbench.check import check

    body = "    def kernel(a, b):\n        return a + b + 1.0, a * b\n"
    path = write_op(tmp_path, name="pair", impl=body, template=TWO_OUTPUTS)
    lines = []
    assert check(str(path), say=lines.append) == 1
    assert any(
        "the numpy implementation: output 'total': relative error" in line for line in lines
    ), lines


# -- kernels handed over as they are --------------------------------------------------------------
#: an operation whose builders hand over kernels compiled their own way
AS_IS = """\
import numpy as np

import numbench
from numbench import Operation


def make_inputs(size, rng):
    return {{"a": rng.standard_normal(size)}}


def reference(a):
    return np.sin(a) * 2.0


def _numpy(np_, dtype):
    return numbench.as_is(lambda a: np_.sin(a) * 2.0)


def _numba(np_, dtype):
    import numba

    @numba.njit(parallel=True, fastmath=False)
    def kernel(a):
        out = np.empty_like(a)
        for i in numba.prange(a.shape[0]):
            out[i] = np.sin(a[i]) * 2.0
        return out

    return numbench.as_is(kernel)


def _jax(jnp, dtype):
    from functools import partial

    import jax

    @partial(jax.jit, static_argnums=1)
    def kernel(a, factor):
        return jnp.sin(a) * factor

    return numbench.as_is(lambda a: kernel(a, 2.0))


OPERATION = Operation(
    name="{name}",
    summary="2 sin(a), kernels as they are",
    input_names=("a",),
    make_inputs=make_inputs,
    reference=reference,
    tolerance={{"float32": 1e-6, "float64": 1e-13}},
    implementations={{"numpy": _numpy, "numba": _numba, "jax": _jax}},
{extra})
"""


def test_as_is_hands_the_kernel_over_untouched_and_compiles_the_rest():
    from numbench import as_is
    from numbench.operations.kernels import AsIs, prepared

    class Compiles:
        def compile(self, fn):
            return ("compiled", fn)

        def as_is(self, kernel):  # as the base adapter's: the kernel itself
            return kernel

    def kernel(a):
        return a

    assert prepared(Compiles(), as_is(kernel)) == (kernel, True)
    assert prepared(Compiles(), kernel) == (("compiled", kernel), False)
    assert as_is(as_is(kernel)) == AsIs(kernel)
    with pytest.raises(TypeError, match="needs a callable kernel, not a int"):
        as_is(3)


def test_the_worker_never_compiles_an_as_is_kernel_and_a_variant_is_unsupported(
    tmp_path, monkeypatch
):
    from numbench import libraries
    from numbench.libraries.numpy_ import NumpyAdapter

    class NeverCompiles(NumpyAdapter):
        def compile(self, fn):
            raise AssertionError("numbench compiled a kernel handed over as it is")

    class Variant(NeverCompiles):
        name, variant = "numpy-variant", True

    path = write_op(tmp_path, name="sine", template=AS_IS)
    monkeypatch.setattr(libraries, "get", lambda name: NeverCompiles)
    report = measure(tmp_path, path, name="sine")
    assert (report.status, report.error, report.as_is) == ("ok", None, True)
    monkeypatch.setattr(libraries, "get", lambda name: Variant)
    report = measure(tmp_path, path, name="sine")
    assert report.status == "unsupported"
    assert report.error.startswith(
        "the numpy builder hands its kernel over as it is (numbench.as_is): numpy-variant "
    )


@pytest.mark.e2e
@pytest.mark.parametrize("library", ["numba", "jax"])
def test_a_compiled_kernel_runs_as_it_is_and_its_row_says_so(tmp_path, library):
    """A Numba kernel with ``parallel=True`` and a JAX kernel with a static argument, each
    measured by a real worker process; the cell file's ``as_is`` column is true."""
    import pyarrow.parquet as pq

    from numbench.inputs_file import write
    from numbench.measure.supervisor import run_cell

    path = write_op(tmp_path, name="sine", template=AS_IS)
    npz = tmp_path / "in.npz"
    write("sine", 1000, 1, npz, operation_file=str(path))
    spec = make_spec(library, "cpu", "sine", 1000, npz, FAST, operation_file=path, threads=2)
    out = tmp_path / "cell.parquet"
    result = run_cell(spec, out, lock=str(tmp_path / "lock"))
    assert result.status == "ok", result.error
    assert set(pq.read_table(out).column("as_is").to_pylist()) == {True}


# -- inputs of one's own --------------------------------------------------------------------------
#: an operation that draws its inputs with its own generator, from its own seed
OWN_SEED = """\
import numpy as np

from numbench import Operation


def make_inputs(size, seed):
    state = np.random.RandomState(seed)  # the suite's own input maker
    return {{"a": state.uniform(-1.0, 1.0, size)}}


def reference(a):
    return a * 2.0


def _numpy(np_, dtype):
    return lambda a: a * 2.0


OPERATION = Operation(
    name="{name}",
    summary="doubles inputs of its own",
    input_names=("a",),
    make_inputs=make_inputs,
    reference=reference,
    tolerance={{"float32": 1e-6, "float64": 1e-14}},
    implementations={{"numpy": _numpy}},
    seed=17,
{extra}{impl})
"""


def test_an_own_generator_gets_its_seed_or_the_config_s_and_the_cell_records_it(tmp_path):
    """The operation's own seed is used unless the config gives another; a second seed
    changes the inputs' digest, and the cell file's ``seed`` column says which it was."""
    import pyarrow.parquet as pq
    from conftest import REPO

    from numbench import inputs_file as inputs
    from numbench.config import cell_spec, grid, resolve
    from numbench.measure.supervisor import run_cell

    path = write_op(tmp_path, name="ownseed", impl="", template=OWN_SEED)
    schema = REPO / SCHEMA
    digests = {}
    for given, expected in ((None, 17), ("5", 5)):
        entry = {"module": str(path), "sizes": [100]}
        if given is not None:
            entry["seed"] = given  # as --config would give it: text
        cfg = resolve({"libraries": ["numpy"], "operations": {"ownseed": entry}}, schema)
        spec = cell_spec(cfg, grid(cfg)[0])
        assert spec.seed == expected
        npz = tmp_path / f"in-{expected}.npz"
        inputs.write("ownseed", 100, spec.seed, npz, operation_file=str(path))
        with np.load(npz) as data:
            digests[expected] = array_digest(data["a"])
            assert int(data["seed"]) == expected
            drawn = np.random.RandomState(expected).uniform(-1.0, 1.0, 100)
            np.testing.assert_array_equal(data["a"], drawn)
        spec = spec.replace(inputs=str(npz), timing=FAST, replicates={**_one_round()})
        out = tmp_path / f"cell-{expected}.parquet"
        assert run_cell(spec, out, lock=str(tmp_path / "lock")).status == "ok"
        assert set(pq.read_table(out).column("seed").to_pylist()) == {expected}
    assert digests[17] != digests[5]


def test_the_worker_refuses_inputs_drawn_with_another_seed(tmp_path):
    """Snakemake remakes the inputs when the seed changes (a rule parameter); an inputs
    file drawn with another seed than the cell's (copied in, or run by hand) is refused."""
    from conftest import REPO

    from numbench import inputs_file as inputs
    from numbench.config import cell_spec, grid, resolve
    from numbench.measure.supervisor import run_cell

    path = write_op(tmp_path, name="ownseed", impl="", template=OWN_SEED)
    entry = {"module": str(path), "sizes": [100], "seed": 5}
    cfg = resolve({"libraries": ["numpy"], "operations": {"ownseed": entry}}, REPO / SCHEMA)
    spec = cell_spec(cfg, grid(cfg)[0])
    npz = tmp_path / "in-17.npz"
    inputs.write("ownseed", 100, 17, npz, operation_file=str(path))
    spec = spec.replace(inputs=str(npz), timing=FAST, replicates={**_one_round()})
    report = run_cell(spec, tmp_path / "cell.parquet", lock=str(tmp_path / "lock"))
    assert report.status == "failed"
    assert report.error == (
        f"the inputs file {npz} was drawn with seed 17 but the cell asks for seed 5; "
        "remake the inputs"
    )


def _one_round() -> dict:
    return {
        "min": 1,
        "max": 1,
        "target_ci": 0.03,
        "stop_margin": 1.1,
        "early_rounds": 0,
        "round_sd": 0.03,
        "max_cpu_taken": 0.1,
        "lockstep": False,
        "max_cell_s": None,
    }


def test_a_seed_that_is_no_whole_number_is_a_declared_problem(tmp_path):
    from numbench import operations
    from numbench.operations.check import declared_problems

    path = write_op(tmp_path, name="ownseed", impl="", extra="", template=OWN_SEED)
    path.write_text(path.read_text().replace("seed=17", "seed=-1"))
    found = operations.load_file(path)
    assert [p.message for p in declared_problems(found)] == [
        "seed: -1 is no seed: give a whole number >= 0, or None"
    ]


def _config_from_files(path: Path, pattern: str, sizes=(50,)) -> dict:
    entry = {"module": str(path), "sizes": list(sizes), "inputs": pattern}
    return {"libraries": ["numpy"], "operations": {"twice": entry}}


def test_inputs_read_from_npz_and_parquet_files_are_measured_and_recorded(tmp_path):
    import pandas as pd
    from conftest import REPO

    from numbench import inputs_file as inputs
    from numbench.config import cell_spec, grid, resolve
    from numbench.measure.worker import measure as worker_measure

    path = write_op(tmp_path, extra='mutates_inputs=("a",),\n')
    data = np.linspace(-1.0, 1.0, 50)
    np.savez(tmp_path / "a_50.npz", a=data, unused=np.zeros(3))
    pd.DataFrame({"a": data}).to_parquet(tmp_path / "a_50.parquet")
    schema = REPO / "workflow" / "schemas" / "config.schema.yaml"
    for suffix in ("npz", "parquet"):
        cfg = resolve(
            _config_from_files(path, f"a_{{size}}.{suffix}"), schema, workflow_dir=tmp_path
        )
        spec = cell_spec(cfg, grid(cfg)[0])
        assert (spec.seed, spec.inputs_from) == (None, str(tmp_path / f"a_50.{suffix}"))
        npz = tmp_path / f"made-{suffix}.npz"
        pattern = cfg["operations"]["twice"]["inputs"]
        inputs.write("twice", 50, 1, npz, operation_file=str(path), inputs_from=pattern)
        with np.load(npz) as made:
            assert array_digest(made["a"]) == array_digest(data)
            np.testing.assert_array_equal(made["ref_0"], 2.0 * data)
            assert "unused" not in made.files
        report = worker_measure(spec.replace(inputs=str(npz), timing=FAST))
        assert report.status == "ok", report.error


def test_an_inputs_file_of_the_wrong_arrays_is_refused_naming_the_file_and_array(tmp_path):
    from numbench import inputs_file as inputs
    from numbench.inputs_file import InputsFileError

    path = write_op(tmp_path)
    cases = {
        "short": ({"a": np.zeros(40)}, "array 'a' has shape (40,); at size 50 the operation's "),
        "missing": ({"b": np.zeros(50)}, "has no array 'a' (the operation's inputs are a; "),
        "complex": ({"a": np.zeros(50, complex)}, "array 'a' is complex128; inputs are real"),
    }
    for name, (arrays, message) in cases.items():
        np.savez(tmp_path / f"{name}.npz", **arrays)
        with pytest.raises(InputsFileError) as info:
            inputs.make(
                "twice", 50, 1, operation_file=str(path), inputs_from=str(tmp_path / f"{name}.npz")
            )
        assert str(info.value).startswith(f"{tmp_path / name}.npz")
        assert message in str(info.value)


def test_a_missing_inputs_file_or_another_kind_is_a_config_error(tmp_path):
    from conftest import REPO

    from numbench.config import ConfigError, resolve

    path = write_op(tmp_path)
    schema = REPO / "workflow" / "schemas" / "config.schema.yaml"
    np.savez(tmp_path / "a_50.npz", a=np.zeros(50))
    for pattern, message in (
        ("a_{size}.npz", f"operations.twice.inputs: {tmp_path}/a_60.npz (the inputs of size 60) "),
        ("a.csv", f"operations.twice.inputs: {tmp_path}/a.csv is neither a .npz nor a .parquet"),
    ):
        with pytest.raises(ConfigError) as info:
            resolve(
                _config_from_files(path, pattern, sizes=(50, 60)), schema, workflow_dir=tmp_path
            )
        assert str(info.value).startswith(message)


# -- library options and variants -----------------------------------------------------------------
#: an operation whose Numba builder numbench compiles, with compile options of its own
WITH_OPTIONS = """\
import numpy as np

from numbench import Operation


def make_inputs(size, rng):
    return {{"a": rng.standard_normal(size)}}


def reference(a):
    return np.sin(a) * 2.0


def _numpy(np_, dtype):
    return lambda a: np_.sin(a) * 2.0


def _numba(np_, dtype):
    def kernel(a):
        out = np.empty_like(a)
        for i in range(a.shape[0]):
            out[i] = np.sin(a[i]) * 2.0
        return out

    return kernel


OPERATION = Operation(
    name="{name}",
    summary="2 sin(a), numba compiled with options",
    input_names=("a",),
    make_inputs=make_inputs,
    reference=reference,
    tolerance={{"float32": 1e-6, "float64": 1e-13}},
    implementations={{"numpy": _numpy, "numba": _numba}},
    options={{"numba": {{"fastmath": False}}}},
{extra}{impl})
"""
VARIANTS = {"numba-parallel": {"library": "numba", "options": {"parallel": True}}}


def _variants_config(path: Path, **more) -> dict:
    return {
        "libraries": ["numpy", "numba", "numba-parallel"],
        "variants": VARIANTS,
        "operations": {"sine": {"module": str(path), "sizes": [2000], **more}},
    }


def test_a_variant_is_a_library_of_its_own_name_with_its_options(tmp_path):
    from conftest import REPO

    from numbench.config import cell_spec, grid, resolve

    path = write_op(tmp_path, name="sine", impl="", template=WITH_OPTIONS)
    schema = REPO / "workflow" / "schemas" / "config.schema.yaml"
    given = {"options": {"numba": {"cache": False}}}
    cfg = resolve(_variants_config(path, **given), schema)
    specs = {c.library: cell_spec(cfg, c) for c in grid(cfg)}
    assert sorted(specs) == ["numba", "numba-parallel", "numpy"]
    assert (specs["numba"].adapter, specs["numba"].options) == (None, {"cache": False})
    assert specs["numba-parallel"].adapter == "numba"
    assert specs["numba-parallel"].options == {"cache": False, "parallel": True}
    assert specs["numba-parallel"].paired_with == "numpy/cpu"


def test_a_variant_or_library_the_config_cannot_use_is_refused(tmp_path):
    from conftest import REPO

    from numbench.config import ConfigError, resolve

    path = write_op(tmp_path, name="sine", impl="", template=WITH_OPTIONS)
    schema = REPO / "workflow" / "schemas" / "config.schema.yaml"
    for variants, message in (
        (
            {"numba": {"library": "numba", "options": {"parallel": True}}},
            "variants.numba: numba is a library of numbench's",
        ),
        (
            {"numba-parallel": {"library": "nope", "options": {"parallel": True}}},
            "variants.numba-parallel.library = 'nope' is not a known library",
        ),
        (
            {"numba-parallel": {"library": "numba", "options": {}}},
            "variants.numba-parallel.options is empty",
        ),
        ({}, "libraries[2] = 'numba-parallel' is not a known library"),
    ):
        cfg = _variants_config(path)
        cfg["variants"] = variants
        with pytest.raises(ConfigError) as info:
            resolve(cfg, schema)
        assert str(info.value).startswith(message), info.value


@pytest.mark.e2e
def test_serial_and_parallel_numba_run_as_two_cells_each_recording_its_options(tmp_path):
    import pyarrow.parquet as pq
    from conftest import REPO

    from numbench.config import cell_spec, grid, resolve
    from numbench.config.operations import operation_seed
    from numbench.inputs_file import write
    from numbench.measure.supervisor import run_cell

    path = write_op(tmp_path, name="sine", impl="", template=WITH_OPTIONS)
    cfg = resolve(_variants_config(path), REPO / SCHEMA)
    npz = tmp_path / "in.npz"
    write("sine", 2000, operation_seed(cfg, "sine"), npz, operation_file=str(path))
    recorded = {}
    for cell in grid(cfg):
        if cell.library == "numpy":
            continue
        spec = cell_spec(cfg, cell).replace(
            inputs=str(npz), timing=FAST, replicates=_one_round(), paired_with=None, threads=2
        )
        out = tmp_path / f"{cell.library}.parquet"
        assert run_cell(spec, out, lock=str(tmp_path / "lock")).status == "ok"
        table = pq.read_table(out)
        recorded[cell.library] = set(table.column("options").to_pylist())
    assert recorded == {
        "numba": {'{"fastmath": false}'},
        "numba-parallel": {'{"fastmath": false, "parallel": true}'},
    }


def test_each_compiler_gets_the_options_and_an_eager_library_refuses_them():
    from numbench.libraries import get

    numba = get("numba")("cpu", "float64", 1)
    numba.load()
    compiled = numba.compile(lambda a: a + 1.0, parallel=True, fastmath=True)
    assert compiled.targetoptions["parallel"] is True and compiled.targetoptions["fastmath"]
    numpy = get("numpy")("cpu", "float64", 1)
    with pytest.raises(
        ValueError, match=r"numpy compiles nothing, so it takes no options \(given: mode\)"
    ):
        numpy.compile(lambda a: a, mode="fast")


def test_a_kernel_as_it_is_has_no_variant_cells(tmp_path):
    path = write_op(tmp_path, name="sine", template=AS_IS)
    from numbench import inputs_file as inputs
    from numbench.measure.worker import measure as worker_measure

    npz = tmp_path / "in.npz"
    inputs.write("sine", 100, 1, npz, operation_file=str(path))
    spec = make_spec("numba", "cpu", "sine", 100, npz, FAST, operation_file=path)
    spec = spec.replace(library="numba-parallel", adapter="numba", options={"parallel": True})
    report = worker_measure(spec)
    assert report.status == "unsupported"
    assert report.error.startswith("numba-parallel runs numba with other compile options; ")


def test_the_baseline_beside_a_variant_runs_the_baseline_s_own_library(tmp_path):
    from conftest import REPO

    from numbench.config import cell_spec, grid, resolve

    path = write_op(tmp_path, name="sine", impl="", template=WITH_OPTIONS)
    cfg = resolve(_variants_config(path), REPO / "workflow" / "schemas" / "config.schema.yaml")
    spec = next(cell_spec(cfg, c) for c in grid(cfg) if c.library == "numba-parallel")
    partner = spec.paired_spec()
    assert (partner.library, partner.adapter, partner.options) == ("numpy", None, {})
    assert partner.adapter_name == "numpy"


def test_options_for_no_library_are_a_declared_problem(tmp_path):
    from numbench import operations
    from numbench.operations.check import declared_problems

    path = write_op(tmp_path, name="sine", impl="", template=WITH_OPTIONS)
    path.write_text(path.read_text().replace('{"numba": {"fastmath"', '{"numbaa": {"fastmath"'))
    messages = [p.message for p in declared_problems(operations.load_file(path))]
    assert len(messages) == 1 and messages[0].startswith("options: 'numbaa' is no library; ")


def test_an_input_s_digest_tells_a_changed_or_reordered_array_from_its_original():
    """What the worker's check of its inputs rests on: a kernel that writes into an input
    (one value, or its order, as an in-place sort does) changes its digest; an equal copy
    does not, and neither does a view laid out another way."""
    a = np.arange(1000.0)
    assert array_digest(a.copy()) == array_digest(a)
    assert array_digest(np.asfortranarray(a.reshape(20, 50))) == array_digest(a.reshape(20, 50))
    changed = a.copy()
    changed[500] += 1e-9
    assert array_digest(changed) != array_digest(a)
    assert array_digest(a[::-1]) != array_digest(a)
    assert array_digest(a.reshape(20, 50)) != array_digest(a)
    assert array_digest(a.astype(np.float32)) != array_digest(a.astype(np.float64))
    assert array_digest(np.empty(0)) == array_digest(np.empty(0))
