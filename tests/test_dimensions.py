"""numbench.analyse.dimensions on constructed samples: float32 against float64, N threads against
1; and their words (numbench.report.sections)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from numbench.analyse.dimensions import precision, precision_gaps, scaling, scaling_gaps
from numbench.contract.conclusions import PRECISION_COLUMNS, SCALING_COLUMNS
from numbench.report.sections import (
    dimension_findings,
    dimension_sections,
    precision_sentence,
    scaling_sentence,
)


def findings_of(prec: pd.DataFrame, scal: pd.DataFrame):
    """The precision and scaling findings as ``numbench.analyse.findings.decide`` makes them."""
    from types import SimpleNamespace

    return SimpleNamespace(
        precision=None if prec.empty else precision_gaps(prec),
        scaling=None if scal.empty else scaling_gaps(scal),
    )


def frame(cells: dict) -> pd.DataFrame:
    """(library, dtype, threads, size) -> median: two replicate processes of 5 samples each."""
    rows = []
    for (lib, dtype, threads, size), median in cells.items():
        for rep in range(2):
            for s in median * (1 + 0.001 * np.arange(-2, 3)):
                rows.append(
                    {
                        "library": lib,
                        "device": "cpu",
                        "operation": "matmul",
                        "size": size,
                        "dtype": dtype,
                        "host": "h",
                        "threads": threads,
                        "role": "measured",
                        "replicate": rep,
                        "seconds": float(s),
                    }
                )
    # a baseline process beside the cell is never counted as the cell's own
    extra = dict(rows[0], role="baseline", seconds=1000.0)
    return pd.DataFrame([*rows, extra])


CELLS = {
    ("torch", "float64", 1, 100): 1.0,
    ("torch", "float32", 1, 100): 0.5,
    ("torch", "float64", 2, 100): 0.6,
    ("torch", "float32", 2, 100): 0.3,
    ("torch", "float64", 1, 2000): 8.0,
    ("torch", "float32", 1, 2000): 8.1,
    ("torch", "float64", 2, 2000): 4.0,
    ("torch", "float32", 2, 2000): 4.0,
}


def test_precision_is_the_float32_over_float64_median_ratio():
    prec = precision(frame(CELLS), margin=1.1)
    assert list(prec.columns) == PRECISION_COLUMNS
    assert len(prec) == 4
    row = prec[(prec["size"] == 100) & (prec["threads"] == 1)].iloc[0]
    assert row["ratio"] == pytest.approx(0.5)
    assert row["ci_low"] <= row["ratio"] <= row["ci_high"]
    assert row["verdict"] == "faster"  # float32 takes half the time
    same = prec[(prec["size"] == 2000) & (prec["threads"] == 1)].iloc[0]
    assert same["ratio"] == pytest.approx(8.1 / 8.0) and same["verdict"] == "same"


def test_scaling_is_one_thread_over_the_most_threads_and_its_efficiency():
    scal = scaling(frame(CELLS), margin=1.1)
    assert list(scal.columns) == SCALING_COLUMNS
    assert len(scal) == 4 and set(scal["threads"]) == {2}
    row = scal[(scal["size"] == 2000) & (scal["dtype"] == "float64")].iloc[0]
    assert row["speedup"] == pytest.approx(2.0)
    assert row["efficiency"] == pytest.approx(1.0)
    assert row["verdict"] == "faster"


def test_one_dtype_or_one_thread_count_gives_empty_tables_with_their_columns():
    only = {k: v for k, v in CELLS.items() if k[1] == "float64" and k[2] == 1}
    prec, scal = precision(frame(only), 1.1), scaling(frame(only), 1.1)
    assert prec.empty and list(prec.columns) == PRECISION_COLUMNS
    assert scal.empty and list(scal.columns) == SCALING_COLUMNS
    assert precision_gaps(prec) == () and scaling_gaps(scal) == ()
    assert dimension_findings(findings_of(prec, scal)) == []
    text = "\n".join(dimension_sections(prec, scal))
    assert "Only one dtype was measured" in text and "Only one thread count" in text


def test_sentences_name_operation_library_and_size_only_when_clear():
    prec, scal = precision(frame(CELLS), 1.1), scaling(frame(CELLS), 1.1)
    # at 2000 float32 is the same speed: the sentence is the clear size, 100
    assert [precision_sentence(g) for g in precision_gaps(prec)] == [
        "float32 is 2× faster than float64 for matmul with PyTorch at n = 100 (1 thread(s))."
    ]
    said = [scaling_sentence(g) for g in scaling_gaps(scal)]
    assert len(said) == 1 and said[0].startswith("2 threads are 2")
    assert "faster than 1 for matmul with PyTorch at n = 2,000" in said[0]
    text = "\n".join(dimension_sections(prec, scal))
    assert "## Precision" in text and "## Parallel scaling" in text
    lines = dimension_findings(findings_of(prec, scal))
    assert "### float32 against float64" in lines and "### Parallel scaling" in lines


# -- a mixed grid elsewhere: series, and the fastest library compared like with like ----------
def test_series_labels_name_dtype_and_threads_only_on_a_mixed_frame():
    from numbench.formatting import series_labels

    d = pd.DataFrame(
        {
            "library": ["jax", "jax", "numpy"],
            "device": ["cpu"] * 3,
            "dtype": ["float32", "float64", "float64"],
            "threads": [1, 2, 2],
        }
    )
    assert list(series_labels(d)) == [
        "jax (float32, 1 thread)",
        "jax (float64, 2 threads)",
        "numpy (float64, 2 threads)",
    ]
    assert list(series_labels(d.iloc[[1, 2]])) == ["jax", "numpy"]
    assert list(series_labels(d, with_device=True))[0] == "jax (cpu, float32, 1 thread)"


def test_fastest_compares_cells_of_one_dtype_and_thread_count():
    from numbench.analyse.findings import Winner, fastest

    def row(lib, dtype, threads, median):
        return {
            "library": lib,
            "device": "cpu",
            "operation": "matmul",
            "size": 100,
            "dtype": dtype,
            "threads": threads,
            "status": "ok",
            "median_s": median,
            "ci_low_s": median * 0.99,
            "ci_high_s": median * 1.01,
        }

    # jax in float32 is fastest overall, but numpy wins among float64 cells
    bench = pd.DataFrame(
        [
            row("jax", "float32", 1, 1.0),
            row("numpy", "float32", 1, 3.0),
            row("jax", "float64", 1, 4.0),
            row("numpy", "float64", 1, 2.0),
        ]
    )
    facts = fastest(bench, margin=1.1)
    assert [(f.setting, f.fastest.library) for f in facts] == [
        ("float32", "jax"),
        ("float64", "numpy"),
    ]
    assert all(isinstance(f, Winner) for f in facts)
    assert facts[1].lead == pytest.approx(2.0)
    # one dtype, one thread count: one unnamed comparison, as before
    only64 = fastest(bench[bench["dtype"] == "float64"], margin=1.1)
    assert [(f.setting, f.fastest.library) for f in only64] == [("", "numpy")]
