"""The grid's dimensions besides its operations and sizes: the libraries (numbench's, and
the config's variants of them with their compile options), the precision and parallelism
(``dtype`` and ``threads`` lists), and what the host that runs the cells can give them (CPUs,
memory). ``ConfigError``, which every check of the config raises, is defined here.

Both ``dtype`` and ``threads`` take one value or a list. ``threads: all`` is this host's CPUs
a cell may use (its affinity mask), resolved to the number when the config is validated.

The host checks (a thread count above this host's CPUs, a size whose cells cannot hold their
inputs in this host's memory) and ``threads: all`` speak of *this* host, so they apply only
where the cells run here. When they run on other hosts (cluster nodes through a non-local
Snakemake executor, or the jobs of such a run on a node), this host knows neither their CPUs
nor their memory: counts are passed on as given (each cell asks the scheduler for that many
CPUs and records the threads it really got, ``threads_used``), sizes are not weighed against
memory here, and ``threads: all`` is refused, since the cell's path must name a number before
any node is chosen.

``variants: {NAME: {library: LIB, options: {...}}}`` runs the library ``LIB`` again under
other compile options, as a library of its own name: ``numba-parallel: {library: numba,
options: {parallel: true}}`` beside ``numba`` in ``libraries`` gives each operation's Numba
cells twice, serial and parallel, each with its own name in the cells' paths, every table
and every chart, as any library has. ``operations.NAME.options: {LIB: {...}}`` sets one
operation's compile options for a library (and its variants), over the operation's own
(``Operation.options``). A cell's spec carries the adapter a variant runs and the options
the config gives (``CellSpec.adapter``, ``CellSpec.options``); the worker puts them over the
operation's own (``numbench.operations.kernels.library_options``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from numbench import libraries
from numbench.cells import FIELD_PATTERNS

DTYPES = ("float32", "float64")
#: ``threads: all``: every CPU a cell may use on this host
ALL_THREADS = "all"
BYTES_PER_GIB = 2**30
#: Memory limits of this process's control group (v2, then v1), when the host sets one: a
#: container's cells are killed at its limit, whatever the machine has.
CGROUP_MEMORY_LIMITS = (
    Path("/sys/fs/cgroup/memory.max"),
    Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
)


class ConfigError(ValueError):
    """A bad configuration value; the message is meant to be shown as it is."""


def host_cpus() -> int:
    """The CPUs a cell may use on this host (what ``threads: all`` means)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def host_memory_bytes() -> int:
    """The memory the cells may use on this host: its physical memory, or its control
    group's limit where that is lower (cgroup v1 writes a huge number for "no limit")."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit_file in CGROUP_MEMORY_LIMITS:
        try:
            text = limit_file.read_text(encoding="ascii").strip()
        except OSError:
            continue
        if text.isdigit():
            memory = min(memory, int(text))
    return memory


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


def resolve_threads(cfg: dict, cells_run_here: bool = True) -> None:
    """Check ``threads`` and replace ``all`` by this host's CPU count, in place; where the
    cells run on other hosts, refuse ``all`` and take any count (module docstring)."""
    cpus, resolved = host_cpus(), []
    for i, value in enumerate(cfg["threads"]):
        where = _where(cfg, "threads", i)
        if isinstance(value, str) and value.strip().lower() == ALL_THREADS:
            if not cells_run_here:
                raise ConfigError(
                    f"{where} = {ALL_THREADS!r} means every CPU of the host that runs a cell, "
                    "and here the cells run on other hosts (a cluster executor), whose CPUs "
                    "this host cannot know when it names the cells; give the counts the "
                    "nodes should run, e.g. threads: [1, 16]"
                )
            resolved.append(cpus)
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(
                f"{where} = {value!r} is not a thread count; give a whole number >= 1 or "
                f"{ALL_THREADS!r}"
            )
        if value < 1:
            raise ConfigError(f"{where} = {value!r} is out of range; it must be >= 1")
        if value > cpus and cells_run_here:
            raise ConfigError(
                f"{where} = {value!r} is more than the {cpus} CPU(s) a cell may use on this "
                f"host; give at most {cpus}, or {ALL_THREADS!r}"
            )
        resolved.append(value)
    cfg["threads"] = sorted(set(resolved))


def check_memory(cfg: dict, floor_bytes: Callable[[str, int, str], int | None]) -> None:
    """Refuse a size whose cells cannot hold their arrays in this host's memory.

    ``floor_bytes(operation, size, dtype)`` is the least memory one cell holds at once
    (``Operation.memory_floor_bytes``: the float64 inputs and reference, and the output in
    the cell's dtype), None where the operation cannot tell. A size is refused only when
    that floor, at the widest dtype of the grid, is above the host's memory: such a cell
    cannot run, and would otherwise be found only when its inputs job or its worker dies.
    """
    memory = host_memory_bytes()
    for name, entry in cfg["operations"].items():
        for i, size in enumerate(entry["sizes"]):
            floors = [(floor_bytes(name, size, dtype), dtype) for dtype in cfg["dtype"]]
            known = [(floor, dtype) for floor, dtype in floors if floor is not None]
            if not known:
                continue
            floor, dtype = max(known)
            if floor > memory:
                raise ConfigError(
                    f"operations.{name}.sizes[{i}] = {size}: its cells hold at least "
                    f"{floor / BYTES_PER_GIB:.1f} GiB at once (the float64 inputs and "
                    f"reference, and the {dtype} output), more than the "
                    f"{memory / BYTES_PER_GIB:.1f} GiB of memory of this host; give a "
                    "smaller size"
                )


# -- library variants and compile options --------------------------------------------------
#: what a variant's name may be: a library's name in a cell's path, no adapter's own
VARIANT_PATTERN = r"[a-z][a-z0-9-]*"


def check_variants(cfg: dict) -> None:
    """ConfigError naming the key where a variant's name or library is no usable one."""
    for name, entry in (cfg.get("variants") or {}).items():
        where = f"variants.{name}"
        if not re.fullmatch(VARIANT_PATTERN, name) or not re.fullmatch(
            FIELD_PATTERNS["library"], name
        ):
            raise ConfigError(
                f"{where}: {name!r} is no library name: lower-case letters, digits and -, "
                "first a letter (it names a folder of every cell's path)"
            )
        if name in libraries.ADAPTERS:
            raise ConfigError(f"{where}: {name} is a library of numbench's; give it another name")
        if entry["library"] not in libraries.ADAPTERS:
            raise ConfigError(
                f"{where}.library = {entry['library']!r} is not a known library; allowed: "
                + ", ".join(libraries.ADAPTERS)
            )
        if not entry["options"]:
            raise ConfigError(f"{where}.options is empty: a variant runs other options")


def known_libraries(cfg: dict) -> list[str]:
    """The names ``libraries`` may hold: numbench's and the config's variants."""
    return list(libraries.ADAPTERS) + list(cfg.get("variants") or {})


def adapter_of(cfg: dict, library: str) -> str:
    """The adapter that runs ``library``: a variant's library, else itself."""
    variant = (cfg.get("variants") or {}).get(library)
    return library if variant is None else variant["library"]


def cell_options(cfg: dict, operation: str, library: str) -> dict[str, Any]:
    """The compile options the config gives a cell of ``library`` and ``operation``: the
    operation's entry's for the adapter, then for the library's own name, then the
    variant's."""
    given = (cfg["operations"][operation] or {}).get("options") or {}
    adapter = adapter_of(cfg, library)
    variant = (cfg.get("variants") or {}).get(library) or {}
    return {
        **given.get(adapter, {}),
        **(given.get(library, {}) if library != adapter else {}),
        **variant.get("options", {}),
    }
