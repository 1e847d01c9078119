"""What the roofs are measured on: the CPU's caches, flags and clock, read from the system.

The cache sizes come from ``/sys/devices/system/cpu/cpuN/cache/index*`` (Linux), never from
counting plateaus in a bandwidth sweep: a plateau can be missing (an L3 barely larger than the
L2s, a virtual machine's noise) or doubled, while the kernel's own description of the caches
is what the hardware is. The capacity a run of ``threads`` threads has at one level is the
sum over the distinct cache instances of the CPUs it runs on (the first ``threads`` CPUs of
the affinity mask, as ``numbench.libraries.pin_cpus`` pins them): two threads on two cores
with private L2s have two L2s; on one shared L3 they have one.

The theoretical compute peak is ``cores x flops per cycle x clock``: flops per cycle from the
widest vector unit the flags name (AVX-512, AVX, SSE2; NEON on Arm), two fused multiply-adds
per cycle (``ASSUMED_FMA_UNITS``, the most x86 and Arm server cores issue, so the figure is an
upper bound), and the clock from cpufreq's ``cpuinfo_max_freq``, the highest clock the cores
may boost to. Where cpufreq is absent (most virtual machines), /proc/cpuinfo's ``cpu MHz`` is
the nominal clock, which boosting cores pass: no upper bound can be formed from it, so the
peak is left out and the note says what that clock would give.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from numbench.machine.system import cpu_info

SYS_CPU = Path("/sys/devices/system/cpu")
#: fused multiply-add units assumed per core: an upper bound (Zen 4 issues AVX-512 as two
#: 256-bit halves, so for it the bound is twice what the core can do)
ASSUMED_FMA_UNITS = 2
#: flops of one fused multiply-add
FLOPS_PER_FMA = 2
#: the widest vector registers a flag promises, in bits, widest first
VECTOR_FLAGS = (("avx512f", 512), ("avx", 256), ("sse2", 128), ("asimd", 128), ("neon", 128))
DTYPE_BITS = {"float32": 32, "float64": 64}
_SIZE = re.compile(r"^\s*(\d+)\s*([KMG]?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}


def parse_cache_size(text: str) -> int | None:
    """'1024K' -> 1048576 bytes; None for anything else."""
    match = _SIZE.match(text)
    if not match:
        return None
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


def parse_cpu_list(text: str) -> frozenset[int]:
    """'0-3,8' -> {0, 1, 2, 3, 8} (the kernel's CPU list format)."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(cpus)


@dataclass(frozen=True)
class CacheInstance:
    """One cache as the kernel describes it: level, size and the CPUs that share it."""

    level: int
    size_bytes: int
    shared_cpus: frozenset[int]


def read_caches(cpus: list[int], root: Path = SYS_CPU) -> list[CacheInstance]:
    """The data and unified caches of ``cpus`` (instruction caches left out), each distinct
    instance once."""
    found: dict[tuple[int, frozenset[int]], CacheInstance] = {}
    for cpu in cpus:
        for index in sorted((root / f"cpu{cpu}" / "cache").glob("index*")):
            try:
                kind = (index / "type").read_text().strip()
                level = int((index / "level").read_text())
                size = parse_cache_size((index / "size").read_text())
                shared = parse_cpu_list((index / "shared_cpu_list").read_text())
            except (OSError, ValueError):
                continue
            if kind == "Instruction" or size is None:
                continue
            found.setdefault((level, shared), CacheInstance(level, size, shared))
    return sorted(found.values(), key=lambda c: (c.level, min(c.shared_cpus, default=0)))


def capacities(caches: list[CacheInstance]) -> dict[str, int]:
    """Bytes of cache per level for the CPUs the caches were read for: ``{"l1": ...,
    "l2": ..., "l3": ...}``, the sum of the distinct instances at each level."""
    out: dict[str, int] = {}
    for cache in caches:
        key = f"l{cache.level}"
        out[key] = out.get(key, 0) + cache.size_bytes
    return out


def pinned_cpus(threads: int) -> list[int]:
    """The CPUs a run of ``threads`` threads is pinned to (``libraries.pin_cpus``'s choice)."""
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    return allowed[: max(1, threads)]


def cpu_flags(info: dict[str, str]) -> list[str]:
    """The CPU's flags (x86 ``flags``, Arm ``features``)."""
    return (info.get("flags") or info.get("features") or "").split()


def vector_bits(flags: list[str]) -> int | None:
    """The widest vector registers the flags promise, in bits."""
    have = set(flags)
    return next((bits for flag, bits in VECTOR_FLAGS if flag in have), None)


def flops_per_cycle(flags: list[str], dtype: str) -> int | None:
    """Floating-point operations one core may issue per cycle in ``dtype``: FMA units x
    2 x lanes of the widest vector (an upper bound, ``ASSUMED_FMA_UNITS``)."""
    bits = vector_bits(flags)
    if bits is None:
        return None
    return ASSUMED_FMA_UNITS * FLOPS_PER_FMA * (bits // DTYPE_BITS[dtype])


@dataclass(frozen=True)
class Clock:
    """The clock the theoretical peak uses, in GHz, and where it was read; ``is_maximum``
    is true only for a maximum (boost) clock, the one an upper bound can use."""

    ghz: float | None
    source: str
    is_maximum: bool


def read_clock(cpu: int = 0, root: Path = SYS_CPU, info: dict[str, str] | None = None) -> Clock:
    """cpufreq's ``cpuinfo_max_freq`` (kHz) where present; else /proc/cpuinfo's ``cpu MHz``,
    marked as not a maximum."""
    max_freq = root / f"cpu{cpu}" / "cpufreq" / "cpuinfo_max_freq"
    try:
        khz = int(max_freq.read_text().strip())
        return Clock(khz / 1e6, "cpufreq cpuinfo_max_freq", True)
    except (OSError, ValueError):
        pass
    mhz = (info if info is not None else cpu_info()).get("cpu mhz")
    try:
        return Clock(float(mhz) / 1e3, "/proc/cpuinfo cpu MHz (nominal)", False)
    except (TypeError, ValueError):
        return Clock(None, "no clock readable", False)


@dataclass(frozen=True)
class Peak:
    """The theoretical compute peak in GFLOP/s (None where no upper bound can be formed)
    and how it was formed."""

    gflop_per_s: float | None
    note: str


def theoretical_peak(cores: int, flags: list[str], dtype: str, clock: Clock) -> Peak:
    """``cores x flops per cycle x clock`` at the clock that could be read; the note gives
    the formula and says whether that clock is a maximum (an upper bound) or the nominal one
    (which boosting cores pass)."""
    per_cycle = flops_per_cycle(flags, dtype)
    if per_cycle is None:
        return Peak(None, "no vector unit named in the CPU's flags")
    if clock.ghz is None:
        return Peak(None, f"{cores} cores x {per_cycle} flops/cycle; {clock.source}")
    formula = (
        f"{cores} cores x {per_cycle} flops/cycle ({ASSUMED_FMA_UNITS} FMA units x "
        f"{vector_bits(flags)}-bit vectors) x {clock.ghz:.4g} GHz ({clock.source})"
    )
    if not clock.is_maximum:
        formula += "; no maximum clock readable here (no cpufreq), and boosting cores pass this one"
    return Peak(cores * per_cycle * clock.ghz, formula)


def peak_check(measured: float | None, peak: Peak, clock: Clock) -> str | None:
    """Why a measured compute roof cannot stand beside the theoretical peak, or None. It may
    never exceed a peak formed from a maximum clock; past one formed from the nominal clock,
    the cores ran faster than that clock, and the note says how fast at least."""
    if measured is None or peak.gflop_per_s is None or measured <= peak.gflop_per_s:
        return None
    if clock.is_maximum:
        return (
            f"the measured {measured:.4g} GFLOP/s exceeds the theoretical "
            f"{peak.gflop_per_s:.4g}: the flags, the clock or the GEMM's cost model is wrong"
        )
    implied = clock.ghz * measured / peak.gflop_per_s
    return (
        f"the measured {measured:.4g} GFLOP/s exceeds the peak at the nominal clock "
        f"({peak.gflop_per_s:.4g}): the cores ran at {implied:.3g} GHz or more"
    )


@dataclass
class HostFacts:
    """What every roof row of one thread count records about the host."""

    cpu_model: str
    cpu_flags: str
    cache_bytes: dict[str, int]
    caches_json: str
    cpus: list[int]
    clock: Clock
    extra: dict[str, str] = field(default_factory=dict)


#: The test suite sets this (beside ``NUMBENCH_TEST_ADAPTERS=1``, without which it is ignored)
#: to plan the roofs from smaller caches than the host names, e.g. ``l2=1,l3=4`` (MiB): on a
#: VM that names a 480 MiB L3, the DRAM triad moves 5.8 GB a pass and one setting's roofs take
#: a minute; the tests check how roofs are measured, labelled and used, not their values.
TEST_CACHES_ENV = "NUMBENCH_TEST_CACHES_MIB"


def named_caches(found: dict[str, int], environ=os.environ) -> dict[str, int]:
    """``found``, or the sizes ``TEST_CACHES_ENV`` names in a test run (a level it leaves out
    keeps its size). A malformed value is an error naming the variable."""
    from numbench.libraries import TEST_ADAPTERS_ENV

    text = environ.get(TEST_CACHES_ENV, "").strip()
    if not text or environ.get(TEST_ADAPTERS_ENV) != "1":
        return found
    sizes = dict(found)
    for part in text.split(","):
        level, _, mib = part.partition("=")
        try:
            sizes[level.strip()] = int(float(mib) * 2**20)
        except ValueError:
            raise ValueError(f"{TEST_CACHES_ENV}={text!r}: expected level=MiB pairs") from None
    return sizes


def host_facts(threads: int, root: Path = SYS_CPU) -> HostFacts:
    """The CPU's model, flags, caches (for the CPUs a run of ``threads`` is pinned to) and
    clock, read from the system."""
    from numbench.libraries import cpu_model

    info = cpu_info()
    cpus = pinned_cpus(threads)
    caches = read_caches(cpus, root)
    listed = [
        {"level": c.level, "bytes": c.size_bytes, "shared_cpus": sorted(c.shared_cpus)}
        for c in caches
    ]
    found = capacities(caches)
    cache_bytes = named_caches(found)
    if cache_bytes != found:
        listed = [
            {"level": int(k[1:]), "bytes": v, "test_size": True} for k, v in cache_bytes.items()
        ]
    return HostFacts(
        cpu_model=cpu_model(),
        cpu_flags=" ".join(cpu_flags(info)),
        cache_bytes=cache_bytes,
        caches_json=json.dumps(listed),
        cpus=cpus,
        clock=read_clock(cpus[0], root, info),
    )
