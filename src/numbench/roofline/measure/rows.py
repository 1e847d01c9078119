"""The rows of the roofs table (``numbench.roofline.contract.ROOFS_SCHEMA``): the working sets a
roof is measured at, the cache a working set fits in, and how a roof worker's timings become
rows (bandwidth, compute, a GPU's, and the host's columns). Pure functions: the tests drive
them with synthetic timings.

A bandwidth roof is labelled by the working set it was measured at against the caches'
sizes read from the system (``plan_working_sets``, ``resident_level``), never by the order or
the number of plateaus its timings show: on a machine where the L3 runs no faster than
DRAM the ``l3`` row still says ``l3`` (and its note says no plateau shows), and a noisy
sweep that shows a plateau too many names nothing.
"""

from __future__ import annotations

import json

from numbench import libraries
from numbench.roofline.contract import (
    BANDWIDTH_ROOFS,
    COMPUTE_ROOF,
    ITEMSIZE,
    TRANSFER_ROOFS,
)
from numbench.roofline.measure import HostFacts, peak_check, theoretical_peak
from numbench.roofline.measure.kernels import (
    STREAM_ARRAYS,
    WRITE_ALLOCATE_ARRAYS,
    peak_bandwidth_gb_per_s,
)

#: share of its cache a cache-resident triad fills (the rest: code, stack, the other data)
CACHE_FILL = 0.5
#: an L3-resident working set must be at least this many times the threads' L2s, or it
#: would partly sit in them (the L3 roof is then left out, with the reason)
LEVEL_GAP = 2.0
#: each array of the DRAM triad is at least this many times the last-level cache (STREAM)
DRAM_ARRAY_FACTOR = 4
#: the last-level cache assumed where the system names none (not Linux): large, so the DRAM
#: triad stays out of any cache of its time
UNKNOWN_LLC_BYTES = 256 * 2**20
#: the DRAM triad's working set at most (its three arrays; the roofs process holds about that
#: much, and no cell's worker should be outgrown by it): a virtual machine may name its
#: host's whole L3, and four times that per array would take gigabytes. Where the cap binds,
#: the DRAM row's note says how far its arrays fall short of STREAM's rule.
DRAM_WORKING_SET_MAX = 2**30
BYTES_COUNTED = "stream"
#: the kernel a CPU bandwidth roof is (``level_row``); the copy is kept beside it
ROOF_KERNEL = "triad"
KERNEL_WAYS = {"numba": "Numba, explicit loops", "numpy": "NumPy, in place (out=)"}


def last_level(cache_bytes: dict[str, int]) -> str | None:
    """The highest cache level the system names (``l3``, else ``l2``...)."""
    levels = sorted((k for k in cache_bytes if k.startswith("l")), key=lambda k: int(k[1:]))
    return levels[-1] if levels else None


def plan_working_sets(cache_bytes: dict[str, int]) -> tuple[dict[str, int], dict[str, str]]:
    """The triad's working set (bytes of its three arrays) for each bandwidth roof, from the
    caches' sizes, and why a roof has none here (or, for a capped DRAM roof, what its
    working set lacks)."""
    plan: dict[str, int] = {}
    reasons: dict[str, str] = {}
    l2, l3 = cache_bytes.get("l2"), cache_bytes.get("l3")
    if l2:
        plan["l2"] = int(l2 * CACHE_FILL)
    else:
        reasons["l2"] = "the system names no L2 cache"
    if not l3:
        reasons["l3"] = "the system names no L3 cache"
    elif l2 and l3 * CACHE_FILL < LEVEL_GAP * l2:
        reasons["l3"] = (
            f"the L3 ({l3 / 2**20:.3g} MiB) is not {LEVEL_GAP / CACHE_FILL:g}x the threads' "
            f"L2s ({l2 / 2**20:.3g} MiB): no working set fits it without sitting in the L2s"
        )
    else:
        plan["l3"] = int(l3 * CACHE_FILL)
    top = last_level(cache_bytes)
    llc = cache_bytes[top] if top else UNKNOWN_LLC_BYTES
    plan["dram"] = min(3 * DRAM_ARRAY_FACTOR * llc, DRAM_WORKING_SET_MAX)
    if plan["dram"] < 3 * DRAM_ARRAY_FACTOR * llc:
        array = plan["dram"] / 3
        reasons["dram"] = (
            f"each array {array / 2**20:.0f} MiB, {array / llc:.2f}x the last-level cache "
            f"({llc / 2**20:.3g} MiB), not the {DRAM_ARRAY_FACTOR}x STREAM asks: the working "
            f"set is capped at {DRAM_WORKING_SET_MAX / 2**30:g} GiB to keep the roofs' memory "
            "small, so part of it may sit in that cache"
        )
    return plan, reasons


def _gb_per_s(result: dict) -> tuple[float, float]:
    """(STREAM-counted, write-allocate-counted) GB/s of one timed kernel."""
    itemsize = ITEMSIZE[result["dtype"]]
    elements, kernel = result["elements"], result["kernel"]
    stream = STREAM_ARRAYS[kernel] * elements * itemsize / result["seconds"] / 1e9
    return stream, stream * WRITE_ALLOCATE_ARRAYS[kernel] / STREAM_ARRAYS[kernel]


def _failed_rows(dtypes, roofs, status: str, error: str | None, unit: str) -> list[dict]:
    return [
        {"device": None, "dtype": d, "roof": r, "status": status, "error": error, "unit": unit}
        for d in dtypes
        for r in roofs
    ]


def bandwidth_rows(dtypes, memory: dict, plan: dict[str, int], reasons: dict[str, str]):
    """The CPU's bandwidth roofs of each dtype from a memory job's timings: for each level,
    the fastest triad over the ways (``level_row``); labelled by the planned working set,
    whatever the values."""
    if "results" not in memory:
        status, error = memory.get("status", "failed"), memory.get("error")
        rows = _failed_rows(dtypes, BANDWIDTH_ROOFS, status, error, "GB/s")
        return [{**r, "device": "cpu"} for r in rows]
    rows = []
    for dtype in dtypes:
        by_level = {}
        for level in BANDWIDTH_ROOFS:
            row = {"device": "cpu", "dtype": dtype, "roof": level, "unit": "GB/s"}
            if level not in plan:
                by_level[level] = {**row, "status": "unsupported", "error": reasons.get(level)}
                continue
            timed = [
                r
                for r in memory["results"]
                if r["dtype"] == dtype and r["level"] == level and "kernel" in r
            ]
            by_level[level] = {**row, **level_row(timed, memory)}
            if reasons.get(level) and by_level[level]["status"] == "ok":
                by_level[level]["note"] = reasons[level]  # planned, with a caveat
        touch = [
            r for r in memory["results"] if r["dtype"] == dtype and r["level"] == "first_touch"
        ]
        if touch and by_level["dram"].get("status") == "ok":
            by_level["dram"].update(first_touch_columns(touch[0]))
        note_missing_plateaus(by_level)
        rows.extend(by_level[level] for level in BANDWIDTH_ROOFS)
    return rows


def _fastest(timed: list[dict], kernel: str) -> tuple[float, dict] | None:
    """(STREAM-counted GB/s, result) of the fastest way of ``kernel``; None if none ran."""
    rates = [(_gb_per_s(r)[0], r) for r in timed if r["kernel"] == kernel]
    return max(rates, key=lambda rate: rate[0]) if rates else None


def level_row(timed: list[dict], memory: dict) -> dict:
    """One level's roof from its timed kernels: the fastest **triad** over the ways (Numba,
    NumPy), every way's figure in ``candidates`` and the fastest copy's in ``copy_value``.

    Not the copy, though it may reach more: a large copy may store past the cache (glibc's
    ``memcpy`` uses non-temporal stores, with no write-allocate read), which no cell that
    writes through the cache can do, so a roof set by it would understate every cell's share
    of it. The triad is also STREAM's most quoted figure."""
    candidates = {f"{lib} (import)": why for lib, why in memory.get("errors", {}).items()}
    for result in timed:
        candidates[f"{result['library']} {result['kernel']}"] = _gb_per_s(result)[0]
    copy = _fastest(timed, "copy")
    best = _fastest(timed, ROOF_KERNEL)
    if best is None:
        said = "no triad was timed" + (f" (only {sorted(candidates)})" if candidates else "")
        return {"status": "failed", "error": said, "candidates": _json(candidates)}
    value, result = best
    return {
        "status": "ok",
        "value": value,
        "kernel": f"{result['kernel']} ({KERNEL_WAYS[result['library']]})",
        "library": result["library"],
        "library_version": memory.get("versions", {}).get(result["library"]),
        "working_set_bytes": result["working_set_bytes"],
        "trials": result["trials"],
        "bytes_counted": BYTES_COUNTED,
        "value_write_allocate": _gb_per_s(result)[1],
        "copy_value": copy[0] if copy else None,
        "candidates": _json(candidates),
        "threads_used": memory.get("threads_used"),
        "cpu_taken": memory.get("cpu_taken"),
        "set_aside": memory.get("set_aside"),
    }


def _json(candidates: dict) -> str | None:
    return json.dumps(candidates, sort_keys=True) if candidates else None


def first_touch_columns(touch: dict) -> dict:
    """Seconds per GB that writing into fresh memory costs beyond writing into reused
    memory, and the page faults per MiB it takes."""
    gigabytes = touch["bytes"] / 1e9
    return {
        "first_touch_s_per_gb": max(0.0, touch["fresh_s"] - touch["reused_s"]) / gigabytes,
        "first_touch_faults_per_mib": touch["page_faults"] / (touch["bytes"] / 2**20),
    }


def note_missing_plateaus(by_level: dict[str, dict]) -> None:
    """A cache roof no faster than the next level's says so: the roof keeps its label (its
    working set fits that cache), but no plateau shows there on this machine."""
    ordered = [by_level[level] for level in BANDWIDTH_ROOFS]
    for faster, slower in zip(ordered, ordered[1:], strict=False):
        if faster.get("status") == "ok" and slower.get("status") == "ok":
            if faster["value"] <= slower["value"]:
                faster["note"] = (
                    f"no faster than the {slower['roof']} roof: no {faster['roof']} plateau "
                    "shows here (noise, or a cache that does not help this kernel)"
                )


def gpu_rows(dtypes, gpu: dict, gemms: dict[str, dict[str, dict]]) -> list[dict]:
    """A GPU's roofs of each dtype: the copies and the fastest GEMM or FMA kernel, with the
    memory's peak from NVML and the clocks; ``unavailable`` rows where there is no GPU."""
    roofs = ("dram", *TRANSFER_ROOFS)
    if gpu.get("status") != "ok":
        status, error = gpu.get("status", "failed"), gpu.get("error")
        rows = _failed_rows(dtypes, roofs, status, error, "GB/s")
        rows += _failed_rows(dtypes, [COMPUTE_ROOF], status, error, "GFLOP/s")
        return [{**r, "device": "gpu"} for r in rows]
    nvml = gpu.get("nvml") or {}
    clocks = json.dumps(nvml, sort_keys=True) if nvml else None
    peak = peak_bandwidth_gb_per_s(nvml)
    copies = gpu.get("copies")
    rows = []
    for dtype in dtypes:
        base = {"device": "gpu", "dtype": dtype, "clocks": clocks}
        for roof in roofs:
            row = {**base, "roof": roof, "unit": "GB/s"}
            if not copies:
                rows.append({**row, "status": "failed", "error": gpu["errors"].get("copies")})
                continue
            part = copies[roof]
            rows.append(
                {
                    **row,
                    "status": "ok",
                    "value": part["bytes"] / part["seconds"] / 1e9,
                    "kernel": part["kernel"],
                    "library": copies["library"],
                    "library_version": copies.get("version"),
                    "device_name": copies.get("device_name"),
                    "working_set_bytes": part["bytes"],
                    "trials": gpu.get("trials"),
                    "cpu_taken": gpu.get("cpu_taken"),
                    "set_aside": gpu.get("set_aside"),
                    "bytes_counted": BYTES_COUNTED if roof == "dram" else None,
                    "theoretical_value": peak if roof == "dram" else None,
                    "theoretical_note": _peak_note(nvml) if roof == "dram" else None,
                }
            )
        rows.append(gpu_compute_row(base, dtype, gpu, gemms.get(dtype, {})))
    return rows


def _peak_note(nvml: dict) -> str:
    if not nvml.get("max_memory_clock_mhz") or not nvml.get("memory_bus_bits"):
        return "NVML gave no memory clock or bus width"
    return (
        f"{nvml['max_memory_clock_mhz']} MHz (NVML's maximum memory clock) x 2 transfers x "
        f"{nvml['memory_bus_bits']}-bit bus / 8"
    )


def gpu_compute_row(base: dict, dtype: str, gpu: dict, gemms: dict[str, dict]) -> dict:
    """The fastest of the libraries' GEMMs (TF32 off) and CuPy's FMA kernel."""
    candidates: dict[str, float | str] = {}
    tf32: dict[str, str] = {}
    best = None
    for library, result in sorted(gemms.items()):
        if result.get("status") != "ok":
            candidates[f"{library} matmul"] = f"{result.get('status')}: {result.get('error')}"
            continue
        tf32.update(result.get("tf32") or {})
        value = 2.0 * result["n"] ** 3 / result["seconds"] / 1e9
        candidates[f"{library} matmul"] = value
        if best is None or value > best[0]:
            best = (value, f"matmul n={result['n']} ({library}, TF32 off)", library, result)
    fma = (gpu.get("fma") or {}).get(dtype)
    if fma:
        value = fma["flops"] / fma["seconds"] / 1e9
        candidates["cupy fma"] = value
        if best is None or value > best[0]:
            best = (value, "FMA-bound kernel (CuPy)", "cupy", fma)
    row = {
        **base,
        "roof": COMPUTE_ROOF,
        "unit": "GFLOP/s",
        "candidates": json.dumps(candidates, sort_keys=True),
        "tf32": json.dumps(tf32, sort_keys=True) if tf32 else None,
        "theoretical_note": "not formed for a GPU (SMs x per-architecture FMA rates)",
    }
    if best is None:
        return {**row, "status": "failed", "error": "neither a GEMM nor the FMA kernel ran"}
    value, kernel, library, result = best
    return {
        **row,
        "status": "ok",
        "value": value,
        "kernel": kernel,
        "library": library,
        "library_version": result.get("version"),
        "trials": result.get("trials"),
        "cpu_taken": result.get("cpu_taken"),
        "set_aside": result.get("set_aside"),
    }


def host_columns(host: str, facts: HostFacts | None, threads: int) -> dict:
    """What every row of one thread count records about the host (``HostFacts``; a GPU's
    rows have none but the CPU's model)."""
    caches = facts.cache_bytes if facts else {}
    return {
        "host": host,
        "threads": threads,
        "cpu_model": facts.cpu_model if facts else libraries.cpu_model(),
        "cpu_flags": facts.cpu_flags if facts else None,
        "l1_bytes": caches.get("l1"),
        "l2_bytes": caches.get("l2"),
        "l3_bytes": caches.get("l3"),
        "caches": facts.caches_json if facts else None,
        "affinity": ",".join(map(str, facts.cpus)) if facts else None,
        "clock_ghz": facts.clock.ghz if facts else None,
        "clock_source": facts.clock.source if facts else None,
    }


def cpu_rows(
    dtypes, memory: dict, gemms: dict[str, dict[str, dict]], facts: HostFacts, plan, reasons
) -> list[dict]:
    """The CPU's rows for one thread count: the bandwidth roofs (``bandwidth_rows``) and, per
    dtype, the fastest GEMM beside the theoretical peak."""
    rows = bandwidth_rows(dtypes, memory, plan, reasons)
    for dtype in dtypes:
        rows.append(compute_row(dtype, gemms.get(dtype, {}), facts, len(facts.cpus)))
    return rows


def compute_row(dtype: str, gemms: dict[str, dict], facts: HostFacts, cores: int) -> dict:
    """The compute roof of one dtype: the fastest library's GEMM, every library's in
    ``candidates``, the theoretical peak beside it (and a note where it would be passed)."""
    candidates: dict[str, float | str] = {}
    best = None
    for library, result in sorted(gemms.items()):
        if result.get("status") != "ok":
            candidates[library] = f"{result.get('status')}: {result.get('error')}"
            continue
        gflops = 2.0 * result["n"] ** 3 / result["seconds"] / 1e9
        candidates[library] = gflops
        if best is None or gflops > best[0]:
            best = (gflops, library, result)
    peak = theoretical_peak(cores, facts.cpu_flags.split(), dtype, facts.clock)
    row = {
        "device": "cpu",
        "dtype": dtype,
        "roof": "compute",
        "unit": "GFLOP/s",
        "candidates": json.dumps(candidates, sort_keys=True),
        "theoretical_value": peak.gflop_per_s,
        "theoretical_note": peak.note,
    }
    if best is None:
        return {**row, "status": "failed", "error": "no library's GEMM ran: " + str(candidates)}
    value, library, result = best
    blas = {lib: r["blas"] for lib, r in gemms.items() if r.get("blas")}
    return {
        **row,
        "status": "ok",
        "value": value,
        "kernel": f"matmul n={result['n']} ({library})",
        "library": library,
        "library_version": result.get("version"),
        "blas": json.dumps(blas, sort_keys=True) if blas else None,
        "threads_used": result.get("threads_used"),
        "working_set_bytes": 3 * result["n"] ** 2 * (4 if dtype == "float32" else 8),
        "trials": result.get("trials"),
        "cpu_taken": result.get("cpu_taken"),
        "set_aside": sum(r.get("set_aside") or 0 for r in gemms.values()),
        "note": peak_check(value, peak, facts.clock),
    }
