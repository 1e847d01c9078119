"""What analyse concludes, as the tables the stages after it read: the findings
(results/findings.parquet), the versions table (results/versions.parquet), the columns of
the precision and scaling tables, and how the speedups and crossovers are read. analyse
writes each; report words and draws them, ``compare`` and the history judge with them, and
each reads them through here alone, so no stage imports another. Kept apart from
``numbench.contract`` itself (the cell files, benchmarks, speedups and crossovers columns,
the atomic writes), which the cell's supervisor imports and which holds no pandas.

The findings: one row per fact (``numbench.contract.facts``), in the order the summary tells
them. ``topic`` names the part of the findings it belongs to (a field of ``Findings``:
``fastest``, ``crossovers``, ``warnings``, ``roofline``...; ``run`` for the one row of the
run's own facts: baseline, margin, whether several devices ran and which dimensions were
compared), ``fact`` the kind of fact (``winner``, ``noisy_cell``...). The cell key columns
(``numbench.cells.KEY_WITH_HOST``: the key and the host) hold the fact's fields of those
names, null where it has none; ``detail`` its other fields as a JSON object (nested facts as
nested objects). ``findings_table`` makes the table of a ``Findings``, ``write_findings``
writes it and ``read_findings`` reads it back as the same ``Findings``: a file that cannot be
read, lacks a column or holds a fact it does not know stops the report with a
``CorruptFile`` naming it.

The speedups and crossovers (``SPEEDUPS_SCHEMA`` and ``CROSSOVERS_SCHEMA``,
``numbench.contract``) are read the same way in every stage: which verdicts are in doubt,
and whether the tables were computed against the baseline a report is about to name.

The precision and scaling tables: their columns, in their order
(``numbench.analyse.dimensions`` writes them; the charts draw an empty frame of them).

The versions table: its columns, the changes a cell of an environment can show, and its
reader. analyse writes it (``numbench.analyse.versions``), report draws and words it;
``compare`` judges two result sets with the same changes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import types
import typing

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from numbench.cells import KEY_WITH_HOST
from numbench.contract import KEY_FIELDS, key_fields, write_atomic
from numbench.contract import facts as F
from numbench.errors import corrupt

# -- the findings table --------------------------------------------------------------------
FINDINGS_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("fact", pa.string()),
        *key_fields(KEY_WITH_HOST),
        pa.field("detail", pa.string()),
    ]
)
FINDINGS_COLUMNS = FINDINGS_SCHEMA.names
#: the row of the run's own facts
RUN = "run"
#: the fields of ``Findings`` that hold one fact, or none
SINGLE_TOPICS = ("machine", "run_time", "gpu_notice", "firmness")
#: the fields of ``Findings`` that hold a tuple of facts (None for a dimension not compared)
MANY_TOPICS = (
    "fastest",
    "speedups",
    "slowdowns",
    "crossovers",
    "warnings",
    "precision",
    "scaling",
    "pipeline_gaps",
    "queued_same_speed",
    "synchronous",
    "roofline",
)
RUN_FIELDS = ("baseline_library", "baseline_device", "margin", "multi_device")
#: the dimensions the run row says were compared (an empty tuple differs from None)
COMPARED = ("precision", "scaling")


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


#: every fact a row may hold, by its ``fact`` name
FACTS = {
    _snake(cls.__name__): cls
    for cls in vars(F).values()
    if isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls is not F.Findings
}


def _plain(value):
    """A value JSON holds as it was: numpy scalars as Python's, facts as objects."""
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str):
        return value.item()  # a numpy scalar
    return value


def _row(topic: str, fact, detail: dict | None = None) -> dict:
    row = dict.fromkeys(FINDINGS_COLUMNS)
    row.update(topic=topic, fact=fact if isinstance(fact, str) else _snake(type(fact).__name__))
    if detail is None:
        detail = {}
        for field in dataclasses.fields(fact):
            value = _plain(getattr(fact, field.name))
            if field.name in KEY_WITH_HOST:
                row[field.name] = value
            else:
                detail[field.name] = value
    row["detail"] = json.dumps(detail, ensure_ascii=False)
    return row


def findings_rows(findings: F.Findings) -> list[dict]:
    """The rows of ``findings``, in the order they are told."""
    run = {name: _plain(getattr(findings, name)) for name in RUN_FIELDS}
    run.update({f"{name}_compared": getattr(findings, name) is not None for name in COMPARED})
    rows = [_row(RUN, RUN, run)]
    for topic in SINGLE_TOPICS:
        fact = getattr(findings, topic)
        rows += [] if fact is None else [_row(topic, fact)]
    for topic in MANY_TOPICS:
        rows += [_row(topic, fact) for fact in getattr(findings, topic) or ()]
    return rows


def findings_table(findings: F.Findings) -> pa.Table:
    return pa.Table.from_pylist(findings_rows(findings), schema=FINDINGS_SCHEMA)


def write_findings(findings: F.Findings, path: str | os.PathLike) -> None:
    """Write results/findings.parquet whole or not at all."""
    write_atomic(findings_table(findings), path)


# -- reading back --------------------------------------------------------------------------
def _decode(value, hint):
    """``value`` (from JSON or a key column) as the type ``hint`` says: facts and tuples
    made again, numbers left as they were written."""
    if value is None:
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        chosen = [a for a in args if a is not type(None)]
        return _decode(value, chosen[0]) if len(chosen) == 1 else value
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(v, args[0]) for v in value)
        return tuple(_decode(v, a) for v, a in zip(value, args, strict=True))
    if dataclasses.is_dataclass(hint):
        return _make(hint, value)
    if hint is float and isinstance(value, str):  # NaN and infinities, if ever written so
        return float(value)
    return value


def _make(cls, values: dict):
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(values) - names
    if unknown:
        raise ValueError(f"{cls.__name__} has no fields {sorted(unknown)}")
    return cls(**{name: _decode(value, hints[name]) for name, value in values.items()})


def _fact(row: dict):
    cls = FACTS.get(row["fact"])
    if cls is None:
        raise ValueError(f"unknown fact {row['fact']!r}")
    values = json.loads(row["detail"] or "{}")
    names = {f.name for f in dataclasses.fields(cls)}
    values.update({k: row[k] for k in KEY_WITH_HOST if k in names})
    return _make(cls, values)


def findings_from_rows(rows: list[dict]) -> F.Findings:
    """The ``Findings`` of the table's rows (``findings_rows``); ValueError if they are not
    a findings table's."""
    runs = [r for r in rows if r["topic"] == RUN]
    if len(runs) != 1:
        raise ValueError(f"{len(runs)} rows of topic {RUN!r}, not one")
    run = json.loads(runs[0]["detail"])
    known = {RUN, *SINGLE_TOPICS, *MANY_TOPICS}
    strange = sorted({r["topic"] for r in rows} - known)
    if strange:
        raise ValueError(f"unknown topics {strange}")
    by_topic: dict[str, list] = {}
    for r in rows:
        if r["topic"] != RUN:
            by_topic.setdefault(r["topic"], []).append(_fact(r))
    values = {name: run[name] for name in RUN_FIELDS}
    values.update({t: (by_topic.get(t) or [None])[0] for t in SINGLE_TOPICS})
    values.update({t: tuple(by_topic.get(t, ())) for t in MANY_TOPICS})
    for name in COMPARED:
        if not run.get(f"{name}_compared"):
            values[name] = None
    return F.Findings(**values)


def read_findings(path: str | os.PathLike) -> F.Findings:
    """results/findings.parquet as ``Findings``; a ``CorruptFile`` naming the file and the
    command that remakes it when it cannot be read, lacks a column or holds what no
    findings table holds."""
    try:
        table = pq.read_table(path)
    except Exception as exc:  # noqa: BLE001 - any reader error means the file is unusable
        raise corrupt("findings", path, f"{type(exc).__name__}: {exc}") from exc
    missing = [name for name in FINDINGS_COLUMNS if name not in table.column_names]
    if missing:
        raise corrupt("findings", path, f"it lacks the columns {missing}")
    try:
        rows = table.select(FINDINGS_COLUMNS).cast(FINDINGS_SCHEMA).to_pylist()
        return findings_from_rows(rows)
    except Exception as exc:  # noqa: BLE001 - wrong types, unknown facts: unusable as well
        raise corrupt("findings", path, f"{type(exc).__name__}: {exc}") from exc


# -- the speedups and crossovers, read alike -----------------------------------------------
def in_doubt(speedups: pd.DataFrame) -> pd.Series:
    """Per row, whether its verdict is in doubt (``settled`` false); nothing is in doubt in
    speedups from before the ``settled`` column, which have nothing to say either way."""
    if "settled" not in speedups:
        return pd.Series(False, index=speedups.index)
    return ~speedups["settled"].astype(bool)


def check_baseline(baseline_library: str, baseline_device: str, *tables: pd.DataFrame) -> None:
    """Raise ValueError unless every row of ``tables`` (speedups, crossovers) was computed
    against this baseline: a report must not name one baseline and show another's numbers."""
    found = set()
    for table in tables:
        found |= set(zip(table["baseline_library"], table["baseline_device"], strict=True))
    if found - {(baseline_library, baseline_device)}:
        against = ", ".join(f"{lib} on {dev}" for lib, dev in sorted(found))
        raise ValueError(
            f"the tables were computed against {against}, not the baseline given "
            f"({baseline_library} on {baseline_device}): recompute them"
        )


# -- the precision and scaling tables ------------------------------------------------------
PRECISION_COLUMNS = [
    "library",
    "device",
    "threads",
    "operation",
    "size",
    "host",
    "ratio",
    "ci_low",
    "ci_high",
    "verdict",
    "margin",
]
SCALING_COLUMNS = [
    "library",
    "device",
    "dtype",
    "operation",
    "size",
    "host",
    "threads",
    "speedup",
    "ci_low",
    "ci_high",
    "efficiency",
    "verdict",
    "margin",
]


# -- the versions table --------------------------------------------------------------------
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
