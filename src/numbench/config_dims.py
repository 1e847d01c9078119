"""The grid's precision and parallelism dimensions: ``dtype`` and ``threads`` lists.

Both keys take one value or a list. ``threads: all`` is this host's CPUs a cell may use
(its affinity mask), resolved to the number when the config is validated.
"""

from __future__ import annotations

import os

DTYPES = ("float32", "float64")
#: ``threads: all``: every CPU a cell may use on this host
ALL_THREADS = "all"


class ConfigError(ValueError):
    """A bad configuration value; the message is meant to be shown as it is."""


def host_cpus() -> int:
    """The CPUs a cell may use on this host (what ``threads: all`` means)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def _where(cfg: dict, key: str, i: int) -> str:
    """``key`` for a single value, ``key[i]`` for an item of a longer list."""
    return key if len(cfg[key]) == 1 else f"{key}[{i}]"


def check_dtypes(cfg: dict) -> None:
    for i, dtype in enumerate(cfg["dtype"]):
        if dtype not in DTYPES:
            raise ConfigError(
                f"{_where(cfg, 'dtype', i)} = {dtype!r} is not allowed; allowed: {', '.join(DTYPES)}"
            )
    if len(set(cfg["dtype"])) != len(cfg["dtype"]):
        raise ConfigError(f"dtype = {cfg['dtype']!r} lists a dtype twice")


def resolve_threads(cfg: dict) -> None:
    """Check ``threads`` and replace ``all`` by this host's CPU count, in place."""
    cpus, resolved = host_cpus(), []
    for i, value in enumerate(cfg["threads"]):
        where = _where(cfg, "threads", i)
        if isinstance(value, str) and value.strip().lower() == ALL_THREADS:
            resolved.append(cpus)
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(
                f"{where} = {value!r} is not a thread count; give a whole number >= 1 or "
                f"{ALL_THREADS!r}"
            )
        if value < 1:
            raise ConfigError(f"{where} = {value!r} is out of range; it must be >= 1")
        if value > cpus:
            raise ConfigError(
                f"{where} = {value!r} is more than the {cpus} CPU(s) a cell may use on this "
                f"host; give at most {cpus}, or {ALL_THREADS!r}"
            )
        resolved.append(value)
    cfg["threads"] = sorted(set(resolved))
