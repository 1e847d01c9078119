"""Config normalisation, validation and the grid."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from numbench import libraries, operations
from numbench.cells import Cell
from numbench.config import ConfigError, grid, input_files, resolve

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
DEFAULT = yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def cfg(**over):
    c = {**DEFAULT, **over}
    return resolve(c, SCHEMA)


def test_default_config_is_valid_and_has_the_five_libraries():
    c = cfg()
    assert c["libraries"][:5] == ["numpy", "jax", "torch", "tensorflow", "numba"]
    assert c["device"] == "cpu" and c["dtype"] == ["float64"] and c["threads"] == [1]


def test_grid_has_one_cell_per_library_operation_size():
    c = cfg()
    cells = grid(c)
    n_sizes = sum(len(e["sizes"]) for e in c["operations"].values())
    cpu_libraries = [lib for lib in c["libraries"] if "cpu" in libraries.get(lib).devices]
    assert "cupy" in c["libraries"] and "cupy" not in cpu_libraries  # GPU only: no cells here
    assert len(cells) == len(cpu_libraries) * n_sizes
    assert len(set(cells)) == len(cells)
    assert Cell("numpy", "cpu", "matmul", 100) in cells
    assert (
        Cell("numpy", "cpu", "matmul", 100).path
        == "results/cells/numpy/cpu/float64/t1/matmul/100.parquet"
    )
    assert len(input_files(c)) == n_sizes


def test_gpu_grid_keeps_cpu_baseline_and_drops_cpu_only_libraries():
    cells = grid(cfg(device="gpu"))
    devices = {(c.library, c.device) for c in cells}
    assert ("numpy", "cpu") in devices
    assert ("torch", "gpu") in devices and ("jax", "gpu") in devices
    assert ("numpy", "gpu") not in devices and ("numba", "cpu") not in devices
    assert {d for _, d in devices} == {"cpu", "gpu"}


def test_all_devices():
    devices = {(c.library, c.device) for c in grid(cfg(device="all"))}
    assert ("torch", "cpu") in devices and ("torch", "gpu") in devices


def test_command_line_strings_become_lists():
    c = cfg(libraries="numpy,torch", operations="matmul,sort")
    assert c["libraries"] == ["numpy", "torch"]
    assert list(c["operations"]) == ["matmul", "sort"]
    assert c["operations"]["matmul"]["sizes"] == [100, 250, 500, 1000, 2000]


def test_whole_float_sizes_are_accepted():
    c = cfg(operations={"sort": {"sizes": [1e3, "1e4"]}})
    assert c["operations"]["sort"]["sizes"] == [1000, 10000]


def test_configfile_operations_replace_the_default_set(tmp_path):
    user = tmp_path / "small.yaml"
    user.write_text("operations:\n  sort:\n    sizes: [10]\n")
    merged = {**DEFAULT, "operations": {**DEFAULT["operations"], "sort": {"sizes": [10]}}}
    c = resolve(merged, SCHEMA, [str(user)])
    assert list(c["operations"]) == ["sort"]


@pytest.mark.parametrize(
    "over, needle",
    [
        ({"libraries": ["numpy", "pandas"]}, "libraries[1] = 'pandas'"),
        ({"libraries": []}, "libraries is empty"),
        ({"dtype": "float16"}, "dtype = 'float16'"),
        ({"device": "tpu"}, "device = 'tpu'"),
        ({"operations": {"sort": {"sizes": [0]}}}, "operations.sort.sizes[0]"),
        ({"operations": {"sort": {"sizes": [2.5]}}}, "not a positive integer"),
        ({"operations": {"qr": {"sizes": [10]}}}, "operations.qr is not a known operation"),
        (
            {"baseline": {"library": "torch", "device": "cpu"}, "libraries": ["numpy"]},
            "baseline.library",
        ),
        ({"timing": {"min_samples": 10, "max_samples": 2}}, "timing.min_samples"),
        ({"timing": {"budget_s": -1}}, "timing.budget_s"),
        ({"colour": "blue"}, "unknown key 'colour'"),
        ({"threads": 0}, "threads = 0"),
    ],
)
def test_bad_config_names_key_and_value(over, needle):
    with pytest.raises(ConfigError) as err:
        cfg(**over)
    assert needle in str(err.value)


def test_dtype_and_threads_lists_are_grid_dimensions():
    import os

    from numbench.config import cell_spec, grid

    cpus = len(os.sched_getaffinity(0))
    c = cfg(libraries=["numpy"], dtype=["float64", "float32"], threads=[1, "all"])
    assert c["dtype"] == ["float64", "float32"] and c["threads"] == sorted({1, cpus})
    cells = grid({**c, "operations": {"sort": {"sizes": [10]}}})
    assert {(x.dtype, x.threads) for x in cells} == {
        (d, t) for d in ("float32", "float64") for t in sorted({1, cpus})
    }
    cell = next(x for x in cells if x.dtype == "float32")
    spec = cell_spec({**c, "operations": {"sort": {"sizes": [10]}}}, cell)
    assert (spec.dtype, spec.threads) == ("float32", cell.threads)
    assert cell.path == f"results/cells/numpy/cpu/float32/t{cell.threads}/sort/10.parquet"


@pytest.mark.parametrize("value, expected", [(None, True), (False, False), ("false", False)])
def test_lockstep_reaches_every_cell_spec(value, expected):
    from numbench.config import cell_spec, grid

    reps = {} if value is None else {"lockstep": value}
    c = cfg(libraries=["numpy", "torch"], replicates=reps)
    c = {**c, "operations": {"sort": {"sizes": [10]}}}
    specs = [cell_spec(c, cell) for cell in grid(c)]
    assert {s.replicates.lockstep for s in specs} == {expected}
    paired = [s for s in specs if s.paired_with]
    assert paired and paired[0].paired_spec().replicates.lockstep is expected


@pytest.mark.parametrize("limit, expected", [(None, None), (0.25, 0.25), ("0.3", 0.3)])
def test_the_cpu_taken_limit_reaches_the_cell_spec(limit, expected):
    from numbench.config import cell_spec, grid

    c = cfg(libraries=["numpy"], replicates={"max_cpu_taken": limit})
    c = {**c, "operations": {"sort": {"sizes": [10]}}}
    spec = cell_spec(c, grid(c)[0])
    assert spec.replicates.max_cpu_taken == expected


@pytest.mark.parametrize("name", sorted(operations.OPERATIONS))
def test_element_counts_match_the_arrays_the_operation_makes(name):
    """The memory check counts from shapes without allocating; here the counts meet the
    arrays that ``make_inputs``, ``make_fixed`` and the reference really give (a complex
    number counts as two reals), at two small sizes."""
    import numpy as np

    from numbench import inputs_file as inputs

    op = operations.get(name)
    params = op.resolve_params()
    for size in (2, 7):
        made = inputs.make(name, size, seed=1, params=params)
        refs = [made[f"ref_{i}"] for i in range(int(made["n_outputs"]))]
        reals = sum(r.size * (2 if np.iscomplexobj(r) else 1) for r in refs)
        assert op.input_elements(size, **params) == sum(made[n].size for n in op.input_names)
        assert op.output_elements(size, **params) == reals
        assert op.memory_floor_bytes(size, "float32", params) == (
            sum(made[n].nbytes for n in op.input_names) + sum(r.nbytes for r in refs) + reals * 4
        )


def test_an_operation_without_element_counts_is_not_weighed():
    from numbench.config.dims import check_memory

    c = {"dtype": ["float64"], "operations": {"sort": {"sizes": [10**15]}}}
    check_memory(c, lambda name, size, dtype: None)
    with pytest.raises(ConfigError, match=r"operations.sort.sizes\[0\] = 1000000000000000"):
        check_memory(c, lambda name, size, dtype: size * 8)


def test_settings_dataclasses_hold_no_defaults_of_their_own():
    """A default lives in the schema alone: the typed settings the code builds from the
    config must be given every field, so no code path can fall back on a second default."""
    import dataclasses

    from numbench.spec import ReplicateSettings
    from numbench.timing import TimingSettings

    for cls in (ReplicateSettings, TimingSettings):
        defaulted = [
            f.name
            for f in dataclasses.fields(cls)
            if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        ]
        assert not defaulted, f"{cls.__name__} defaults {defaulted} outside the schema"


def test_the_shipped_config_states_the_schemas_defaults():
    """config/config.yaml spells out the defaults for the reader; it must say what the schema
    says, key for key, or the two would be two places for one default."""

    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    shipped = yaml.safe_load((REPO / "config" / "config.yaml").read_text())

    def compare(props: dict, values: dict, where: str) -> list[str]:
        out = []
        for key, value in values.items():
            prop = props.get(key, {})
            if isinstance(value, dict) and "properties" in prop:
                out += compare(prop["properties"], value, f"{where}{key}.")
            elif isinstance(prop.get("default"), list) and not isinstance(value, list):
                out += compare({key: prop}, {key: [value]}, where)  # `dtype: float64` is a list
            elif "default" in prop and prop["default"] != value and key != "operations":
                out.append(f"{where}{key}: config.yaml {value!r}, schema {prop['default']!r}")
        return out

    assert compare(schema["properties"], shipped, "") == []


def test_the_stopping_margin_is_the_cells_and_the_report_margin_is_not():
    from numbench.config import cell_spec, grid, resolve

    base = {"operations": {"sort": {"sizes": [10]}}}
    specs = {}
    for margin in (1.1, 1.5):
        cfg = resolve({**base, "margin": margin}, SCHEMA)
        specs[margin] = [cell_spec(cfg, c).to_json() for c in grid(cfg)]
    assert specs[1.1] == specs[1.5]
    cfg = resolve({**base, "replicates": {"stop_margin": 1.3}}, SCHEMA)
    assert {cell_spec(cfg, c).replicates.stop_margin for c in grid(cfg)} == {1.3}


def test_renamed_replicate_settings_keep_their_stored_names_in_a_cells_spec():
    """stop_margin and early_rounds are written as margin and spread in the spec's JSON (the
    rules' parameter) and read back from it, so cells measured before the rename keep their
    spec and are not measured again."""
    import json

    from numbench.config import cell_spec, grid, resolve
    from numbench.spec import CellSpec

    cfg = resolve(
        {"operations": {"sort": {"sizes": [10]}}, "replicates": {"stop_margin": 1.3}}, SCHEMA
    )
    spec = cell_spec(cfg, grid(cfg)[0])
    stored = json.loads(spec.to_json())["replicates"]
    assert stored["margin"] == 1.3 and stored["spread"] == 1
    assert "stop_margin" not in stored and "early_rounds" not in stored
    back = CellSpec.from_json(spec.to_json()).replicates
    assert back.stop_margin == 1.3 and back.early_rounds == 1
