"""The findings table (results/findings.parquet): what analyse concluded, for report to word.

One row per fact (``numbench.contract.facts``), in the order the summary tells them. ``topic`` names the
part of the findings it belongs to (a field of ``Findings``: ``fastest``, ``crossovers``,
``warnings``, ``roofline``...; ``run`` for the one row of the run's own facts: baseline,
margin, whether several devices ran and which dimensions were compared), ``fact`` the kind of
fact (``winner``, ``noisy_cell``...). The cell key columns (``numbench.cells.KEY_WITH_HOST``: the
key and the host) hold the fact's fields of those names, null where it has none; ``detail`` its
other fields as a JSON object (nested facts as nested objects).

``findings_table`` makes the table of a ``Findings``, ``write_findings`` writes it and
``read_findings`` reads it back as the same ``Findings``: a file that cannot be read, lacks a
column or holds a fact it does not know stops the report with a ``CorruptFile`` naming it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import types
import typing

import pyarrow as pa
import pyarrow.parquet as pq

from numbench.cells import KEY_WITH_HOST
from numbench.contract import facts as F
from numbench.contract import key_fields, write_atomic
from numbench.errors import corrupt

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
