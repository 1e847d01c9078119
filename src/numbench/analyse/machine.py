"""How quiet the machine was while the run measured, from the cells' own records: the run's
headline (``numbench.contract.machine``, where the rule and its thresholds are).

Every figure comes from benchmarks.parquet (each cell's ``other_cpu_share``, ``steal_share``
and ``unstable``) and speedups.parquet (each verdict's ``settled``): nothing is measured here.
"""

from __future__ import annotations

import pandas as pd

from numbench.cells import KEY_WITH_HOST
from numbench.contract.machine import BUSY_MACHINE_SHARE, BUSY_RUN_FRACTION, MachineQuality
from numbench.contract.speedups import in_doubt


def disturbance(bench: pd.DataFrame) -> pd.Series:
    """Per cell, the share of all CPUs' time others took meanwhile (other processes and
    steal; NaN where the cell did not record the machine)."""
    if "other_cpu_share" not in bench:
        return pd.Series(float("nan"), index=bench.index)
    other = pd.to_numeric(bench["other_cpu_share"], errors="coerce")
    if "steal_share" not in bench:
        return other
    return other + pd.to_numeric(bench["steal_share"], errors="coerce").fillna(0.0)


def _median(frame: pd.DataFrame, column: str) -> float | None:
    if column not in frame:
        return None
    values = pd.to_numeric(frame[column], errors="coerce").dropna()
    return None if values.empty else float(values.median())


def machine_quality(bench: pd.DataFrame, speedups: pd.DataFrame) -> MachineQuality:
    """The run's ``MachineQuality``: its ok cells' records, and its verdicts in doubt."""
    ok = bench[bench["status"] == "ok"].copy()
    ok["_taken"] = disturbance(ok)
    ok["_busy"] = ok["_taken"] > BUSY_MACHINE_SHARE
    watched = ok[ok["_taken"].notna()]
    unstable = ok["unstable"].fillna(False).astype(bool)
    quiet = None
    if not watched.empty:
        quiet = bool(watched["_busy"].sum() <= BUSY_RUN_FRACTION * len(watched))
    measured = speedups[speedups["speedup"].notna()]
    doubtful = measured[in_doubt(measured)]
    key = list(KEY_WITH_HOST)
    busy_keys = {tuple(r) for r in ok.loc[ok["_busy"], key].itertuples(index=False)}
    busy_doubt = sum(tuple(r) in busy_keys for r in doubtful[key].itertuples(index=False))
    return MachineQuality(
        quiet=quiet,
        watched=len(watched),
        busy_cells=int(watched["_busy"].sum()),
        other_cpu_share=_median(watched, "other_cpu_share"),
        steal_share=_median(watched, "steal_share"),
        busiest_share=None if watched.empty else float(watched["_taken"].max()),
        ok_cells=len(ok),
        unstable_cells=int(unstable.sum()),
        busy_unstable=int((unstable & ok["_busy"]).sum()),
        verdicts=len(measured),
        in_doubt=len(doubtful),
        busy_in_doubt=int(busy_doubt),
    )
