"""The notes of benchmarks.parquet's ``roof_note`` column, and the noise they are judged by:
analyse writes them (``numbench.analyse.roofline``), report explains them; and the roofline's
facts (``RoofFinding``), which ``numbench.contract.facts`` tells with the others."""

from __future__ import annotations

from dataclasses import dataclass

from numbench.contract.roofs import COMPUTE_ROOF

#: how far past its roof a cell may be before it is called a cost-model error (or, for an
#: operation whose flop count is exact, a roof measured low)
ROOF_NOISE_FACTOR = 1.1
CACHE_RESIDENT = "cache-resident"
WITHIN_NOISE = "within noise"
#: past its roof further than noise explains, where the cost model can be wrong (its flops
#: an estimate: ``Operation.flops_exact`` false)
COST_MODEL_ERROR = "cost-model error"
#: past its roof further than noise explains, where the cost model cannot be wrong (its
#: flops are the arithmetic every implementation does: matmul's 2 n^3): the roof was
#: measured below what the machine can do (a disturbed moment, a kernel slower than the
#: library's)
ROOF_MEASURED_LOW = "roof measured low"
#: past a bandwidth roof (the best triad) further than noise explains, but within noise of
#: the copy measured beside it (the roofs' ``copy_value``): the cell moves its bytes as a
#: large copy does, storing past the cache without the write-allocate read a triad's cached
#: stores pay, so it may pass the triad; neither the roof nor the cost model is wrong
STREAMS_LIKE_COPY = "streams like a copy"
#: an operation that gives bytes but no flop count (sort's work is comparisons): held
#: against the bandwidth roof of its working set by its GB/s, and left off the charts,
#: whose axis is flops per byte
PLACED_BY_BYTES = "placed by its bytes (no flop count)"


# -- the roofline ------------------------------------------------------------------------------
#: a memory-bound cell below this share of the DRAM roof gets the first-touch estimate
LOW_DRAM_SHARE = 0.6


@dataclass(frozen=True)
class FirstTouch:
    """Touching a fresh output, as the roofs rule measured it on the cell's host."""

    output_bytes: float
    seconds: float
    s_per_gb: float
    faults_per_mib: float | None
    share_of_time: float
    fraction_without: float


@dataclass(frozen=True)
class RoofFinding:
    """The fastest library of one (host, device, dtype, threads) and operation at the largest
    size placed on the roofline: its share of the roof it was held against (placed by its
    bytes: no ``gflop_per_s``, a ``gb_per_s``); ``roof_spread``: the roof's best over worst;
    ``copy_share``: its share of the copy's bandwidth at that roof."""

    host: str
    device: str
    dtype: str
    threads: int
    operation: str
    size: int
    library: str
    median_s: float
    gflop_per_s: float | None
    roof: str
    roof_fraction: float
    roof_note: str | None
    first_touch: FirstTouch | None
    roof_spread: float | None = None
    gb_per_s: float | None = None
    #: what it reached over what the copy beside its bandwidth roof allows (``copy_value``);
    #: None where that roof has no copy (the compute roof, a GPU's, an older roofs table)
    copy_share: float | None = None

    @property
    def bound(self) -> str | None:  # None: placed by its bytes, no intensity to say
        if self.gflop_per_s is None:
            return None
        return "arithmetic" if self.roof == COMPUTE_ROOF else "memory"
