"""The versions table (results/versions.parquet): its columns, the changes a cell of an
environment can show, and its reader. analyse writes it (``numbench.analyse.versions``),
report draws and words it; ``compare`` judges two result sets with the same changes.
"""

from __future__ import annotations

import os

import pandas as pd
import pyarrow as pa

from numbench.contract import KEY_FIELDS

#: ``ok`` in old, another status in new: a regression, whatever the times say
BROKEN = "broken"
#: neither side ``ok``, or only new: no ratio, and nothing lost
NOT_COMPARABLE = "not comparable"

VERSIONS_SCHEMA = pa.schema(
    [
        # the environment's name in the config (the cell's folder ``LIBRARY@NAME``)
        pa.field("environment", pa.string()),
        *KEY_FIELDS,
        pa.field("threads", pa.int64()),
        pa.field("host", pa.string()),
        # the environment's status, or the base's where the base processes did not measure
        pa.field("status", pa.string()),
        # the base environment's processes' status (null: unknown)
        pa.field("base_status", pa.string()),
        # the environment cell's error, if any (a failed pairing's reason included)
        pa.field("error", pa.string()),
        # library_version of the environment's processes and of the base's
        pa.field("version", pa.string()),
        pa.field("base_version", pa.string()),
        pa.field("median_s", pa.float64()),
        pa.field("base_median_s", pa.float64()),
        # environment median / base median: above 1, the environment is slower
        pa.field("ratio", pa.float64()),
        pa.field("ratio_ci_low", pa.float64()),
        pa.field("ratio_ci_high", pa.float64()),
        # the environment's processes (one per round)
        pa.field("rounds", pa.int64()),
        # true when the interval drew the same rounds on both sides
        pa.field("paired", pa.bool_()),
        pa.field("ci_floor", pa.float64()),
        pa.field("floored", pa.bool_()),
        # slower / faster / same / broken / not comparable
        pa.field("change", pa.string()),
        pa.field("margin", pa.float64()),
        pa.field("settled", pa.bool_()),
    ]
)
VERSIONS_COLUMNS = VERSIONS_SCHEMA.names


def read_versions(path: str | os.PathLike) -> pd.DataFrame:
    """results/versions.parquet, every column of VERSIONS_SCHEMA present (ValueError if not)."""
    table = pd.read_parquet(path)
    missing = [c for c in VERSIONS_COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"{path} lacks the columns {missing}: remake it (rule versions)")
    return table
