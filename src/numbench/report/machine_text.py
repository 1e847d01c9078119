"""The summary's first line: how quiet the machine was, with the figures behind it and what
it means for the verdicts (``numbench.contract.machine.MachineQuality``, decided by analyse)."""

from __future__ import annotations

from numbench.contract.machine import BUSY_MACHINE_SHARE, BUSY_RUN_FRACTION, MachineQuality


def _share(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.0%}"


def _figures(m: MachineQuality) -> str:
    return (
        f"while the cells measured, other processes took {_share(m.other_cpu_share)} of the "
        f"CPUs' time and the hypervisor (steal) {_share(m.steal_share)} (medians over "
        f"{m.watched} cells); {m.busy_cells} of the {m.watched} cells were measured busy "
        f"(others above {BUSY_MACHINE_SHARE:.0%} of the CPUs' time; a run is busy past "
        f"{BUSY_RUN_FRACTION:.0%} of its cells), the busiest at {_share(m.busiest_share)}"
    )


def _verdicts(m: MachineQuality) -> str:
    text = f"{m.unstable_cells} of {m.ok_cells} cells unstable"
    if m.watched:
        text += f" ({m.busy_unstable} of them measured busy)"
    text += f"; {m.in_doubt} of {m.verdicts} verdicts in doubt"
    if m.watched and m.in_doubt:
        busy = "none" if not m.busy_in_doubt else str(m.busy_in_doubt)
        text += f", {busy} of them measured while the machine was busy"
    return text


def machine_line(m: MachineQuality) -> str:
    """One line: quiet, busy, or not watched, with its figures."""
    if m.quiet is None:
        return (
            "**Machine not watched**: the cells did not record what the machine did while they "
            "measured (cells from before contract 7, or no `/proc`); "
            f"{_verdicts(m)}."
        )
    if m.quiet:
        return f"**Quiet machine**: {_figures(m)}; {_verdicts(m)}."
    return (
        f"**Busy machine**: {_figures(m)}; {_verdicts(m)}. The verdicts measured busy are the least firm: `numbench system` "
        "says what disturbs this machine, and a rerun on a quieter one settles them."
    )
