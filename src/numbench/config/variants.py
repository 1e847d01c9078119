"""Library variants and compile options of the config.

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

import re
from typing import Any

from numbench import libraries
from numbench.cells import FIELD_PATTERNS
from numbench.config.dims import ConfigError

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
