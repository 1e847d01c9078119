"""The workload catalogue: every library family's implementation of each new operation
matches the float64 reference on fresh random inputs, in both dtypes; the cost models; and
the operation parameters' path from the config to the builders."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from numbench import config, libraries, operations
from numbench.inputs_file import FIXED_SIZE, make

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"

NEW_OPERATIONS = ("poly", "linreg_gd", "batched_matmul", "mlp")
FAMILIES = ("numpy", "jax", "torch", "tensorflow", "numba")
DTYPES = ("float32", "float64")
# Small sizes keep the suite fast; the algorithm does not change with the size.
SMALL_SIZE = {"poly": 5_000, "linreg_gd": 7, "batched_matmul": 3, "mlp": 5}
# Fewer iterations than the default keep linreg_gd cheap; 30 still leaves the weights far
# from zero, so a wrong update shows.
SMALL_PARAMS = {"linreg_gd": {"iterations": 30}}

_ADAPTERS: dict[tuple[str, str], libraries.Adapter] = {}


def adapter_for(family: str, dtype: str) -> libraries.Adapter:
    """One loaded adapter per (library, dtype) for the whole session: imports are slow."""
    key = (family, dtype)
    if key not in _ADAPTERS:
        adapter = libraries.get(family)("cpu", dtype, 1)
        try:
            adapter.load()
        except libraries.Unavailable as exc:
            pytest.skip(str(exc))
        _ADAPTERS[key] = adapter
    if family == "jax":
        # JAX's x64 switch is global to the process, and the last JAX adapter loaded in it
        # (this module's for the other dtype, or another test module's) set it: a float64
        # test ran at float32 after a float32 adapter loaded (rel error 4e-07 > 1e-10).
        # The workflow's workers load one adapter each; here it is set again for this dtype.
        import jax

        jax.config.update("jax_enable_x64", dtype == "float64")
    return _ADAPTERS[key]


def fresh_inputs(name: str, size: int, seed: int) -> dict[str, np.ndarray]:
    """Inputs from a seed no workflow run uses, with their float64 reference."""
    op = operations.get(name)
    rng = np.random.default_rng(seed)
    arrays = dict(op.make_fixed(rng)) if op.make_fixed else {}
    arrays.update(op.make_inputs(size, rng))
    return arrays


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("name", NEW_OPERATIONS)
def test_implementation_matches_float64_reference(name, family, dtype):
    op = operations.get(name)
    adapter = adapter_for(family, dtype)
    params = SMALL_PARAMS.get(name, {})
    seed = int(np.random.SeedSequence().entropy % 2**32)  # fresh every run
    arrays = fresh_inputs(name, SMALL_SIZE[name], seed)
    reference = op.run_reference(arrays, params)

    fn = adapter.compile(op.build(adapter.family, adapter.xp, dtype, params))
    args = tuple(adapter.to_device(np.asarray(arrays[n])) for n in op.input_names)
    result = adapter.to_numpy(fn(*args))

    err = operations.relative_error(result, reference)
    tol = op.tolerance_for(adapter.family, dtype)
    assert err <= tol, f"{family} {name} {dtype} (seed {seed}): rel error {err:.3g} > {tol:g}"
    for out in operations.as_outputs(result):
        assert out.dtype == np.dtype(dtype), f"{family} {name} computes in {out.dtype}"


def test_tolerances_catch_a_wrong_result():
    """The checks above can fail: a slightly wrong answer is outside every tolerance."""
    for name in NEW_OPERATIONS:
        op = operations.get(name)
        arrays = fresh_inputs(name, SMALL_SIZE[name], 7)
        ref = op.run_reference(arrays, SMALL_PARAMS.get(name, {}))
        wrong = tuple(r * (1 + 1e-3) for r in operations.as_outputs(ref))
        for dtype in DTYPES:
            assert operations.relative_error(wrong, ref) > op.tolerance[dtype], name


def test_linreg_gd_reference_fits_the_model():
    """The float64 GD reference moves towards the generating model and stops where told."""
    op = operations.get("linreg_gd")
    rng = np.random.default_rng(3)
    w_true = rng.standard_normal(4)
    x = rng.standard_normal((10_000, 4))
    y = x @ w_true + 0.5
    w, b = op.reference(x, y, iterations=100)
    assert np.allclose(w, w_true, atol=1e-6) and abs(float(b) - 0.5) < 1e-6
    w1, b1 = op.reference(x, y, iterations=1)
    # one step from zero: w = lr * 2/n * X^T y
    assert np.allclose(w1, 0.1 * 2 / 10_000 * (x.T @ y))
    assert not np.allclose(w1, w)


def test_linreg_gd_inputs_are_fixed_order_elementwise_arithmetic():
    """y is x w + b + noise summed feature by feature, each step one IEEE operation, so an
    offsite host makes the same bits (a matrix product rounds by CPU, BLAS and NumPy
    version): it equals, exactly, plain Python floats added in the same order."""
    from numbench.operations.linreg_gd import NOISE, SAMPLES, make_inputs

    d = 5
    made = make_inputs(d, np.random.default_rng(11))
    rng = np.random.default_rng(11)  # the same draws, in the same order
    w = rng.standard_normal(d).tolist()
    b = float(rng.standard_normal())
    x = rng.standard_normal((SAMPLES, d))
    noise = rng.standard_normal(SAMPLES).tolist()
    assert np.array_equal(made["x"], x)
    rows = x.tolist()
    expected = []
    for i in range(SAMPLES):
        acc = 0.0
        for j in range(d):
            acc = acc + rows[i][j] * w[j]
        expected.append(acc + b + NOISE * noise[i])
    assert made["y"].dtype == np.float64
    assert made["y"].tolist() == expected


#: what rounds otherwise on another CPU, BLAS or NumPy version: matrix products, reductions,
#: transcendental functions (an offsite import compares the inputs bit for bit)
HOST_DEPENDENT = re.compile(
    r"@|\b(dot|matmul|einsum|tensordot|inner|sum|mean|norm|sin|cos|exp|log|linspace)\("
)


def test_no_built_in_input_maker_does_host_dependent_arithmetic():
    import inspect

    for name, op in operations.OPERATIONS.items():
        for maker in (op.make_inputs, op.make_fixed):
            if maker is not None:
                found = [m[0] for m in HOST_DEPENDENT.finditer(inspect.getsource(maker))]
                assert found == [], f"{name}: {maker.__name__} calls {found}"
    assert HOST_DEPENDENT.search("y = x @ w + b") and HOST_DEPENDENT.search("np.sum(a, 0)")


def test_numba_linreg_gd_is_explicit_loops():
    """As the published comparison wrote it: no matrix products in the Numba version."""
    import inspect

    source = inspect.getsource(operations.get("linreg_gd").implementations["numba"])
    assert "for i in range(n)" in source and "for j in range(d)" in source
    assert "@" not in source and "np.dot" not in source


def test_cost_models():
    def cost(name, size, itemsize=8, **params):
        return operations.get(name).cost(size, itemsize, params or None)

    assert cost("matmul", 300) == (2 * 300**3, 3 * 300 * 300 * 8)
    assert cost("batched_matmul", 64) == (2 * 64 * 1024 * 1024, (2 * 64 * 1024 + 1024**2) * 8)
    assert cost("batched_matmul", 64, itemsize=4)[1] == (2 * 64 * 1024 + 1024**2) * 4
    assert cost("poly", 10**6) == (9e6, 2 * 10**6 * 8)
    # mlp: per sample, 2*1024*1024 + 1024 (bias) + 1024 (relu) twice, then 2*1024*10 + 10
    per_sample = 2 * (2 * 1024 * 1024 + 2 * 1024) + 2 * 1024 * 10 + 10
    weights = 2 * (1024 * 1024 + 1024) + 1024 * 10 + 10
    assert cost("mlp", 16) == (16 * per_sample, (16 * 1024 + weights + 16 * 10) * 8)
    # linreg_gd scales with the iterations and with d
    flops_100, bytes_100 = cost("linreg_gd", 10)
    flops_10, bytes_10 = cost("linreg_gd", 10, iterations=10)
    assert flops_100 == pytest.approx(10 * flops_10) and bytes_100 == bytes_10
    assert flops_100 == 100 * (4 * 10_000 * 10 + 3 * 10_000 + 2 * 10 + 2)
    assert bytes_100 == (10_000 * 10 + 10_000 + 10 + 1) * 8
    for name, op in operations.OPERATIONS.items():
        for size in config.default_sizes(name):
            flops, moved = op.cost(size, 8)
            assert moved > 0, (name, size)
            # sort's work is comparisons: it gives bytes and no flops
            assert (flops is None) == (name == "sort"), name
            assert flops is None or (math.isfinite(flops) and flops >= 0), (name, size)


def test_every_operation_in_the_default_grid_with_its_sweep():
    cfg = config.load_file(REPO / "config" / "config.yaml", SCHEMA)
    assert set(cfg["operations"]) == set(operations.OPERATIONS)
    for name in operations.OPERATIONS:
        sizes = cfg["operations"][name]["sizes"]
        assert len(sizes) >= 3 and sizes == sorted(set(sizes)), name  # a sweep, ascending
        assert config.default_sizes(name) == sizes, name  # the one place they are written
    assert config.operation_params(cfg, "linreg_gd") == {"iterations": 100}
    assert config.operation_params(cfg, "mlp") == {}
    assert len(config.grid(cfg)) == 5 * sum(
        len(config.default_sizes(name)) for name in operations.OPERATIONS
    )
    # --config operations=a,b selects operations with the shipped default sizes
    picked = config.resolve({"operations": "fft,mlp"}, SCHEMA)["operations"]
    assert picked == {name: {"sizes": config.default_sizes(name)} for name in ("fft", "mlp")}


def test_iterations_flow_from_config_to_inputs_and_reference(tmp_path):
    raw = {"operations": {"linreg_gd": {"sizes": [3], "iterations": 7}, "poly": None}}
    cfg = config.resolve(raw, SCHEMA)
    assert config.operation_params_json(cfg, "linreg_gd") == json.dumps({"iterations": 7})
    assert config.operation_params_json(cfg, "poly") == ""
    data = make("linreg_gd", 3, seed=1, params=config.operation_params(cfg, "linreg_gd"))
    assert str(data["params_json"]) == '{"iterations": 7}'
    w7, _ = operations.get("linreg_gd").reference(data["x"], data["y"], iterations=7)
    assert np.array_equal(data["ref_0"], w7)
    # parameters without sizes get the default sweep
    cfg = config.resolve({"operations": {"linreg_gd": {"iterations": 5}}}, SCHEMA)
    assert cfg["operations"]["linreg_gd"]["sizes"] == [2, 5, 10, 20, 50, 100]


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"linreg_gd": {"sizes": [2], "iterations": 0}}, "iterations = 0 is out of range"),
        ({"linreg_gd": {"sizes": [2], "learning_rate": 1}}, "unknown key 'learning_rate'"),
        ({"poly": {"sizes": [10], "iterations": 5}}, "unknown key 'iterations'"),
    ],
)
def test_bad_operation_parameters_are_config_errors(raw, message):
    with pytest.raises(config.ConfigError, match=message):
        config.resolve({"operations": raw}, SCHEMA)


def test_unknown_parameter_is_refused_by_the_operation():
    with pytest.raises(KeyError, match="no parameter 'depth'"):
        operations.get("linreg_gd").resolve_params({"depth": 3})
    with pytest.raises(KeyError, match="known: none"):
        operations.get("mlp").resolve_params({"iterations": 3})


def test_model_weights_are_the_same_for_every_batch_size():
    small, large = make("mlp", 2, seed=11), make("mlp", 8, seed=11)
    for name in ("w1", "b1", "w2", "b2", "w3", "b3"):
        assert np.array_equal(small[name], large[name]), name
    assert not np.array_equal(make("mlp", 2, seed=12)["w1"], small["w1"])  # the seed matters
    assert np.array_equal(make("batched_matmul", 1, 5)["w"], make("batched_matmul", 16, 5)["w"])
    assert FIXED_SIZE not in config.default_sizes("mlp")
    assert small["x"].shape == (2, 1024) and small["ref_0"].shape == (2, 10)


def test_a_float64_jax_check_after_a_float32_jax_adapter_loaded_in_the_process():
    """JAX's x64 switch is global: once a float32 adapter is loaded in this process (as
    another test module's may be, in any order), the session's float64 adapter still checks
    in float64 (it failed at rel error 4e-07 on CI when the order came out so)."""
    adapter_for("jax", "float64")
    float32 = libraries.get("jax")("cpu", "float32", 1)
    try:
        float32.load()
    except libraries.Unavailable as exc:
        pytest.skip(str(exc))
    test_implementation_matches_float64_reference("batched_matmul", "jax", "float64")


def float32_matmul_mode(family: str) -> dict:
    """What the library, once its adapter is loaded, does with a float32 product."""
    if family == "jax":
        import jax

        return {"default_matmul_precision": jax.config.jax_default_matmul_precision}
    if family == "torch":
        import torch

        return {
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        }
    import tensorflow as tf

    return {"tensor_float_32": tf.config.experimental.tensor_float_32_execution_enabled()}


FULL_FLOAT32 = {
    "jax": {"default_matmul_precision": "highest"},
    "torch": {
        "float32_matmul_precision": "highest",
        "cuda.matmul.allow_tf32": False,
        "cudnn.allow_tf32": False,
    },
    "tensorflow": {"tensor_float_32": False},
}


@pytest.mark.parametrize("family", sorted(FULL_FLOAT32))
def test_every_adapter_computes_float32_products_without_tf32(family):
    """On an Ampere or later GPU, JAX and TensorFlow round float32 products through TF32 by
    default: JAX's float32 matmul, batched_matmul and mlp failed their check on an H100 (relative
    error 3e-4 to 6e-4, tolerance 1e-4). Each adapter's load turns it off, whatever the
    library's default; the switches are the same on the CPU, where this test can see them."""
    adapter_for(family, "float32")
    assert float32_matmul_mode(family) == FULL_FLOAT32[family]


def test_cupy_cells_run_with_tf32_off():
    adapter = libraries.get("cupy")("gpu", "float32", 1)
    assert adapter.environment()["CUPY_TF32"] == "0"
