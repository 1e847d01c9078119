"""Two machines with one host name: the archive's host is named like this one but is another.

numbench keys a host's rows by its name (``socket.gethostname()``, the cells' and the roofs'
``host`` column): the import merges the archive's roofs over the rows of that name, a roofs
run here replaces the rows of its own name, and the tables key cells by host. Two machines
that share a name (both "vm", say) share one key, so the import warns where the archive's
host has this machine's name but not its fingerprint.

The fingerprint is the machine's part of the history's (``numbench.history.changes``,
``FINGERPRINT``): CPU model, logical CPUs and memory, as every cell records them. The
kernel, the frequency governor and the Python version, also there, change on one machine
and tell two apart by accident only.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from pathlib import Path

#: the columns of a cell that say which machine measured it
MACHINE = ("cpu_model", "cpu_count", "ram_gb")
#: memory that differs by less than this share is the same memory (the pages the kernel
#: keeps to itself vary a little between boots and kernels)
RAM_TOLERANCE = 0.05


def fingerprint_here() -> dict:
    """This machine's fingerprint, as its cells record it (the very function that fills
    their columns)."""
    from numbench.measure.supervisor import machine_fingerprint

    return machine_fingerprint()


def fingerprint_of_cells(paths: Iterable[Path]) -> dict:
    """The fingerprint the first of the cell files that records one holds (every cell of
    an archive was measured on its one host); None for a field none records."""
    import pyarrow.parquet as pq

    for path in paths:
        try:
            table = pq.read_table(path)
        except (OSError, ValueError):
            continue
        found = {
            name: table.column(name)[0].as_py() if name in table.column_names else None
            for name in MACHINE
        }
        if any(value is not None for value in found.values()):
            return found
    return dict.fromkeys(MACHINE)


def differences(there: dict, here: dict) -> list[str]:
    """The fields of two fingerprints that tell two machines apart (a field either lacks
    tells nothing)."""
    out = []
    for name in MACHINE:
        a, b = there.get(name), here.get(name)
        if a is None or b is None:
            continue
        if name == "ram_gb":
            if abs(float(a) - float(b)) > RAM_TOLERANCE * max(float(a), float(b)):
                out.append(name)
        elif a != b:
            out.append(name)
    return out


def describe(fingerprint: dict) -> str:
    ram = fingerprint.get("ram_gb")
    return (
        f"{fingerprint.get('cpu_model') or 'CPU unknown'}, "
        f"{fingerprint.get('cpu_count') or '?'} logical CPUs, "
        f"{'?' if ram is None else f'{float(ram):.1f}'} GB memory"
    )


def same_name_warning(host, there: dict, here: dict, name_here: str | None = None) -> str | None:
    """The warning where the archive's ``host`` is named like this machine (``name_here``,
    by default ``socket.gethostname()``) but its fingerprint ``there`` differs from this
    machine's ``here``; None otherwise."""
    name_here = socket.gethostname() if name_here is None else name_here
    if host != name_here or not differences(there, here):
        return None
    return (
        f"warning: the archive's cells were measured on a host named {host!r}, like this "
        f"machine, but on another machine (there: {describe(there)}; here: {describe(here)}). "
        "numbench keys roofs and cells by host name, so the two machines share one key: an "
        "archive's roofs replace the roofs here of host "
        f"{host!r} (this machine's own, if any), a roofs run here "
        "(rules roofs, roofs_at_end) replaces them in turn, and the tables (benchmarks, "
        "compare, history) take both machines' cells as one host's. Give the two machines "
        "different host names to keep them apart"
    )


def warn_if_same_name(host, cell_paths: Iterable[Path], say) -> None:
    """Say ``same_name_warning`` for an imported archive, whose cells are ``cell_paths``."""
    if host != socket.gethostname():
        return  # another name: nothing shared, and no need to read the cells
    warning = same_name_warning(host, fingerprint_of_cells(cell_paths), fingerprint_here())
    if warning:
        say(warning)
