"""The roofs: caches read from the system, working sets planned from them, roofs labelled by
those sizes (synthetic timings), the theoretical peak, the GPU's rows on a host without one,
and the measurement under the host's timing lock."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from numbench.measure import process
from numbench.measure.quiet import CPU_TAKEN_RETRIES
from numbench.roofline import contract as roofs_table
from numbench.roofline import measure as roofs
from numbench.roofline.measure import Clock, HostFacts, RoofJobs
from numbench.roofline.measure import kernels as roof_kernels
from numbench.roofline.measure import rows as roof_rows

MIB = 2**20


def fake_sysfs(root: Path, cpus: int, l2_kib: int, l3_kib: int) -> Path:
    """A /sys/devices/system/cpu tree: a private L1d, L1i and L2 per CPU, one shared L3."""
    everyone = f"0-{cpus - 1}"
    for cpu in range(cpus):
        caches = [
            (1, "Data", "48K", str(cpu)),
            (1, "Instruction", "32K", str(cpu)),
            (2, "Unified", f"{l2_kib}K", str(cpu)),
            (3, "Unified", f"{l3_kib}K", everyone),
        ]
        for i, (level, kind, size, shared) in enumerate(caches):
            folder = root / f"cpu{cpu}" / "cache" / f"index{i}"
            folder.mkdir(parents=True)
            (folder / "level").write_text(f"{level}\n")
            (folder / "type").write_text(f"{kind}\n")
            (folder / "size").write_text(f"{size}\n")
            (folder / "shared_cpu_list").write_text(f"{shared}\n")
    return root


def test_caches_are_read_per_instance_for_the_cpus_the_threads_run_on(tmp_path):
    root = fake_sysfs(tmp_path, cpus=4, l2_kib=1024, l3_kib=32 * 1024)
    one = roofs.capacities(roofs.read_caches([0], root))
    two = roofs.capacities(roofs.read_caches([0, 1], root))
    # private L2s add up; the one shared L3 counts once; instruction caches are left out
    assert one == {"l1": 48 * 1024, "l2": MIB, "l3": 32 * MIB}
    assert two == {"l1": 96 * 1024, "l2": 2 * MIB, "l3": 32 * MIB}
    assert roofs.parse_cpu_list("0-3,8") == {0, 1, 2, 3, 8}
    assert roofs.parse_cache_size("2M") == 2 * MIB
    assert roofs.parse_cache_size("huge") is None


def test_working_sets_are_planned_from_the_cache_sizes():
    plan, reasons = roof_rows.plan_working_sets({"l2": MIB, "l3": 32 * MIB})
    assert plan == {"l2": MIB // 2, "l3": 16 * MIB, "dram": 3 * 4 * 32 * MIB}
    assert reasons == {}
    # every DRAM array (a third of the triad's working set) is 4x the last-level cache
    assert plan["dram"] / 3 >= 4 * 32 * MIB
    # an L3 barely larger than the L2s has no working set of its own: no L3 roof, a reason
    plan, reasons = roof_rows.plan_working_sets({"l2": 8 * MIB, "l3": 16 * MIB})
    assert "l3" not in plan and "L2s" in reasons["l3"]
    assert plan["dram"] == 3 * 4 * 16 * MIB


def test_a_dram_working_set_past_the_cap_is_capped_and_its_row_says_by_how_much():
    """A virtual machine naming a 480 MiB L3: four times that per array would be 5.6 GiB of
    arrays; the plan holds 1 GiB (three arrays of 341 MiB, 0.71x the L3), and the DRAM row
    measured at it carries the note."""
    plan, reasons = roof_rows.plan_working_sets({"l2": 4 * MIB, "l3": 480 * MIB})
    assert plan["dram"] == 1024 * MIB
    assert reasons["dram"].startswith("each array 341 MiB, 0.71x the last-level cache (480 MiB)")
    assert "not the 4x STREAM asks" in reasons["dram"]
    results = [timed("float64", lv, "numba", "triad", plan[lv] // 24, 16.0) for lv in plan]
    rows = roof_rows.bandwidth_rows(["float64"], {"results": results}, plan, reasons)
    dram = next(r for r in rows if r["roof"] == "dram")
    assert dram["status"] == "ok" and dram["note"] == reasons["dram"]
    # under the cap nothing is noted
    plan, reasons = roof_rows.plan_working_sets({"l2": 4 * MIB, "l3": 16 * MIB})
    assert plan["dram"] == 3 * 4 * 16 * MIB and "dram" not in reasons


def test_the_memory_job_never_holds_more_than_the_triad_s_three_arrays():
    """The DRAM level's first-touch copy runs after the triad's other two arrays are let go:
    the job's peak resident memory grows from its resident memory before by about the
    working set (three arrays), not five. The peak is the process's own high-water mark
    (VmHWM, Linux): ``ru_maxrss`` carries the parent's peak across a vfork and exec."""
    code = (
        "import sys\n"
        "from numbench.roofline.measure import kernels\n"
        "kernels._numba_kernels()\n"
        "import numpy as np\n"
        "np.ones(1).sum()\n"
        "def status(key):\n"
        "    line = next(x for x in open('/proc/self/status') if x.startswith(key + ':'))\n"
        "    return int(line.split()[1])  # KiB\n"
        "before = status('VmRSS')\n"
        "ws = 300 * 2**20\n"
        "kernels.measure_memory({'threads': 1, 'dtypes': ['float64'], 'working_sets': {'dram': ws}})\n"
        "grew = status('VmHWM') - before\n"
        "print(grew * 1024 / ws)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    grew = float(out.stdout.strip().splitlines()[-1])
    assert 0.9 < grew < 1.3  # five arrays would be 1.67


@pytest.mark.parametrize(
    "working_set, level",
    [(512 * 1024, "l2"), (MIB, "l2"), (MIB + 1, "l3"), (32 * MIB, "l3"), (40 * MIB, "dram")],
)
def test_a_working_set_is_placed_by_the_cache_it_fits_in(working_set, level):
    assert roofs_table.resident_level(working_set, {"l2": MIB, "l3": 32 * MIB}) == level


def timed(dtype, level, library, kernel, elements, gb_per_s):
    """A memory job's result for one kernel that ran at ``gb_per_s`` (STREAM's count)."""
    arrays = roof_rows.STREAM_ARRAYS[kernel]
    seconds = arrays * elements * 8 / (gb_per_s * 1e9)
    return {
        "dtype": dtype,
        "level": level,
        "library": library,
        "kernel": kernel,
        "elements": elements,
        "working_set_bytes": arrays * elements * 8,
        "seconds": seconds,
        "trials": 10,
    }


def test_plateaus_are_labelled_by_cache_size_not_by_their_timings():
    """Synthetic timings in which the L3 runs no faster than DRAM (no plateau shows) and the
    results come in shuffled: each roof keeps the label of the cache its working set fits,
    the fastest triad at each level counts (a faster copy is kept beside it), and the
    missing plateau is noted."""
    plan = {"l2": MIB // 2, "l3": 16 * MIB, "dram": 384 * MIB}
    results = [
        timed("float64", "dram", "numba", "triad", plan["dram"] // 24, 40.0),
        timed("float64", "l3", "numpy", "copy", plan["l3"] // 24, 39.0),
        timed("float64", "l2", "numba", "triad", plan["l2"] // 24, 250.0),
        timed("float64", "l3", "numba", "triad", plan["l3"] // 24, 38.0),
        timed("float64", "dram", "numpy", "copy", plan["dram"] // 24, 41.0),
        timed("float64", "l2", "numpy", "triad", plan["l2"] // 24, 120.0),
    ]
    rows = roof_rows.bandwidth_rows(["float64"], {"results": results}, plan, {})
    by_roof = {r["roof"]: r for r in rows}
    assert [r["roof"] for r in rows] == ["l2", "l3", "dram"]
    assert by_roof["l2"]["value"] == pytest.approx(250.0)
    assert by_roof["l2"]["library"] == "numba" and by_roof["l2"]["kernel"].startswith("triad")
    assert by_roof["dram"]["value"] == pytest.approx(40.0)
    assert by_roof["dram"]["kernel"].startswith("triad (Numba")
    assert by_roof["dram"]["copy_value"] == pytest.approx(41.0)
    assert by_roof["l3"]["value"] == pytest.approx(38.0)
    assert by_roof["l3"]["copy_value"] == pytest.approx(39.0)
    assert "no l3 plateau" in by_roof["l3"]["note"]
    assert by_roof["l2"].get("note") is None and by_roof["l2"]["copy_value"] is None
    # STREAM's count is the value; the write-allocate count adds a read per stored line
    assert by_roof["l2"]["value_write_allocate"] == pytest.approx(250.0 * 4 / 3)
    assert by_roof["dram"]["value_write_allocate"] == pytest.approx(40.0 * 4 / 3)
    assert json.loads(by_roof["l2"]["candidates"]) == pytest.approx(
        {"numba triad": 250.0, "numpy triad": 120.0}
    )


def test_a_roof_without_a_working_set_says_why_and_a_failed_job_says_so():
    plan = {"l2": MIB // 2, "dram": 384 * MIB}
    results = [timed("float32", lv, "numba", "triad", 1000, 10.0) for lv in ("l2", "dram")]
    rows = roof_rows.bandwidth_rows(["float32"], {"results": results}, plan, {"l3": "too small"})
    l3 = next(r for r in rows if r["roof"] == "l3")
    assert l3["status"] == "unsupported" and l3["error"] == "too small"
    failed = roof_rows.bandwidth_rows(["float64"], {"status": "timeout", "error": "slow"}, plan, {})
    assert {(r["roof"], r["status"]) for r in failed} == {
        ("l2", "timeout"),
        ("l3", "timeout"),
        ("dram", "timeout"),
    }


def test_first_touch_is_the_extra_time_of_fresh_memory_per_gigabyte():
    touch = {"bytes": 2**30, "fresh_s": 0.35, "reused_s": 0.03, "page_faults": 262144}
    columns = roof_rows.first_touch_columns(touch)
    assert columns["first_touch_s_per_gb"] == pytest.approx(0.32 / (2**30 / 1e9))
    assert columns["first_touch_faults_per_mib"] == pytest.approx(256.0)


AVX512 = "fpu sse sse2 avx fma avx2 avx512f".split()


def test_theoretical_peak_is_cores_times_flops_per_cycle_times_clock():
    assert roofs.flops_per_cycle(AVX512, "float64") == 32
    assert roofs.flops_per_cycle(AVX512, "float32") == 64
    assert roofs.flops_per_cycle("sse sse2 avx".split(), "float64") == 16
    assert roofs.flops_per_cycle(["fpu"], "float64") is None
    boost = Clock(3.5, "cpufreq cpuinfo_max_freq", True)
    peak = roofs.theoretical_peak(2, AVX512, "float64", boost)
    assert peak.gflop_per_s == pytest.approx(2 * 32 * 3.5)
    assert roofs.peak_check(200.0, peak, boost) is None
    # past a peak formed from the maximum clock: something is wrong, and the note says so
    assert "is wrong" in roofs.peak_check(250.0, peak, boost)
    # past a peak formed from the nominal clock: the cores boosted, and by how much at least
    nominal = Clock(2.5, "/proc/cpuinfo cpu MHz (nominal)", False)
    peak = roofs.theoretical_peak(1, AVX512, "float64", nominal)
    assert peak.gflop_per_s == pytest.approx(80.0) and "no maximum clock" in peak.note
    assert "3.44 GHz" in roofs.peak_check(110.0, peak, nominal)


def test_the_clock_is_read_from_cpufreq_where_there_is_one(tmp_path):
    folder = tmp_path / "cpu0" / "cpufreq"
    folder.mkdir(parents=True)
    (folder / "cpuinfo_max_freq").write_text("3700000\n")
    clock = roofs.read_clock(0, tmp_path, {"cpu mhz": "2000.0"})
    assert clock.ghz == pytest.approx(3.7) and clock.is_maximum
    clock = roofs.read_clock(1, tmp_path, {"cpu mhz": "2000.0"})
    assert clock.ghz == pytest.approx(2.0) and not clock.is_maximum


def test_the_gpu_peak_comes_from_the_memory_clock_and_bus_width():
    # an H100 SXM as NVML reports it: 2619 MHz, a 5120-bit bus: 3.35 TB/s
    facts = {"max_memory_clock_mhz": 2619, "memory_bus_bits": 5120}
    assert roof_kernels.peak_bandwidth_gb_per_s(facts) == pytest.approx(3352.3, rel=1e-3)
    assert roof_kernels.peak_bandwidth_gb_per_s({}) is None


def gpu_present() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


@pytest.mark.skipif(
    gpu_present(),
    reason="this host has a GPU, so its roofs are not unavailable; no test here measures them",
)
def test_on_a_host_without_a_gpu_the_gpu_roofs_are_unavailable_with_the_reason():
    measured = roof_kernels.measure_gpu({"dtypes": ["float32"], "bytes": 1024, "trials": 1})
    assert measured["status"] == "unavailable"
    assert measured["error"]
    rows = roof_rows.gpu_rows(["float32"], measured, {})
    assert {r["roof"] for r in rows} == {"dram", "h2d", "d2h", "compute"}
    assert {r["status"] for r in rows} == {"unavailable"}
    assert all(r["device"] == "gpu" and r["error"] for r in rows)


def test_gpu_rows_from_measurements_hold_the_peak_the_clocks_and_tf32_modes():
    gpu = {
        "status": "ok",
        "trials": 10,
        "errors": {},
        "nvml": {"max_memory_clock_mhz": 2619, "memory_bus_bits": 5120, "sm_clock_mhz": 1980},
        "copies": {
            "library": "torch",
            "device_name": "Test GPU",
            "dram": {"seconds": 1e-3, "bytes": 2 * 10**9 * 1.5, "kernel": "device-to-device copy"},
            "h2d": {"seconds": 0.02, "bytes": 5 * 10**8, "kernel": "pinned host-to-device copy"},
            "d2h": {"seconds": 0.025, "bytes": 5 * 10**8, "kernel": "device-to-pinned-host copy"},
        },
        "fma": {"float32": {"seconds": 1e-3, "flops": 1e10, "library": "cupy"}},
    }
    gemm = {"status": "ok", "n": 8192, "seconds": 0.04, "tf32": {"tensorflow": "on"}}
    rows = {
        r["roof"]: r
        for r in roof_rows.gpu_rows(["float32"], gpu, {"float32": {"tensorflow": gemm}})
    }
    assert rows["dram"]["value"] == pytest.approx(3000.0)
    assert rows["dram"]["theoretical_value"] == pytest.approx(3352.3, rel=1e-3)
    assert rows["h2d"]["value"] == pytest.approx(25.0) and rows["d2h"]["value"] == pytest.approx(
        20.0
    )
    assert json.loads(rows["dram"]["clocks"])["sm_clock_mhz"] == 1980
    # the GEMM (TF32 off) beats the FMA kernel here; each library's TF32 mode is kept
    assert rows["compute"]["value"] == pytest.approx(2 * 8192**3 / 0.04 / 1e9)
    assert rows["compute"]["library"] == "tensorflow"
    assert json.loads(rows["compute"]["tf32"]) == {"tensorflow": "on"}


def fake_facts(threads: int) -> HostFacts:
    return HostFacts(
        cpu_model="Test CPU",
        cpu_flags=" ".join(AVX512),
        cache_bytes={"l2": MIB * threads, "l3": 32 * MIB},
        caches_json="[]",
        cpus=list(range(threads)),
        clock=Clock(3.0, "cpufreq cpuinfo_max_freq", True),
    )


def fake_runner(lock: Path, jobs: list):
    """A roof worker that records its jobs, checks that the host's timing lock is held
    while it runs, and returns synthetic timings (or no GPU)."""

    def run(worker: process.WorkerJob) -> dict:
        job, env = json.loads(worker.job_text), process.job_environment(worker)
        assert worker.module == "numbench.roofline.measure.kernels"
        with open(lock, "a+") as fh:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        jobs.append((job, env))
        if job["kind"] == "gemm":
            n = max(job["sizes"])
            return {"status": "ok", "n": n, "seconds": 2 * n**3 / 50e9, "trials": 3}
        if job["kind"] == "gpu":
            return {"status": "unavailable", "error": "no CUDA device (test)"}
        results = []
        for dtype in job["dtypes"]:
            for level, ws in job["working_sets"].items():
                results.append(timed(dtype, level, "numba", "triad", ws // 24, 100.0))
        return {"results": results, "threads_used": job["threads"]}

    return run


def test_roofs_are_measured_per_device_dtype_and_threads_under_the_timing_lock(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(roofs, "host_facts", fake_facts)
    lock, jobs = tmp_path / "timing.lock", []
    out = tmp_path / "roofs.parquet"
    dims = [("cpu", "float64", 1), ("cpu", "float32", 2), ("gpu", "float32", 1)]
    # device: gpu's grid: NumPy (the baseline) on the CPU, PyTorch on the GPU
    libs = {"cpu": ["numba", "numpy"], "gpu": ["torch"]}
    roofs.measure_roofs(
        dims,
        libs,
        "steady",
        out,
        lock=str(lock),
        runner=fake_runner(lock, jobs),
        say=lambda _: None,
    )
    table = pq.read_table(out).to_pandas()
    assert list(table.columns) == roofs_table.ROOFS_SCHEMA.names
    got = {(r.device, r.dtype, r.threads, r.roof, r.status) for r in table.itertuples()}
    for dtype, threads in (("float64", 1), ("float32", 2)):
        for roof in ("l2", "l3", "dram", "compute"):
            assert ("cpu", dtype, threads, roof, "ok") in got
    for roof in ("dram", "h2d", "d2h", "compute"):
        assert ("gpu", "float32", 1, roof, "unavailable") in got
    compute = table[(table["roof"] == "compute") & (table["device"] == "cpu")]
    assert compute["value"].tolist() == pytest.approx([50.0, 50.0])
    assert (compute["value"] <= compute["theoretical_value"]).all()
    # each GEMM ran in its library's environment, with the cell's thread limits
    gemm_envs = [env for job, env in jobs if job["kind"] == "gemm"]
    assert {env["OMP_NUM_THREADS"] for env in gemm_envs} == {"1", "2"}
    gemm_libs = {(job["device"], job["library"]) for job, _ in jobs if job["kind"] == "gemm"}
    # PyTorch's cells are all on the GPU: its CPU GEMM would set no cell's roof
    assert gemm_libs == {("cpu", "numpy"), ("gpu", "torch")}
    assert table["locked_from_unix"].notna().all()


def test_the_roofs_measured_again_at_the_end_keep_the_start_s_rows_and_say_their_round(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(roofs, "host_facts", fake_facts)
    lock, jobs = tmp_path / "timing.lock", []
    start, end = tmp_path / "start.parquet", tmp_path / "roofs.parquet"
    dims, libs = [("cpu", "float64", 1)], {"cpu": ["numpy"]}
    common = {"lock": str(lock), "runner": fake_runner(lock, jobs), "say": lambda _: None}
    roofs.measure_roofs(dims, libs, "steady", start, **common)
    roofs.measure_roofs(dims, libs, "steady", end, round_name="end", earlier=start, **common)
    table = pq.read_table(end).to_pandas()
    assert list(table.columns) == roofs_table.ROOFS_SCHEMA.names
    assert table["round"].value_counts().to_dict() == {"start": 4, "end": 4}
    assert table[table["round"] == "start"].index.max() < table[table["round"] == "end"].index.min()
    assert pq.read_table(start).to_pandas()["round"].tolist() == ["start"] * 4
    with pytest.raises(ValueError, match="not 'middle'"):
        roofs.measure_roofs(dims, libs, "steady", end, round_name="middle", **common)


def test_the_roofs_job_takes_snakemake_s_cpus_back_once_it_holds_the_lock(tmp_path, monkeypatch):
    """A roofs job Snakemake started while a cell had it moved inherited the narrowed CPUs:
    as a cell's job does, it takes Snakemake's back with the lock held, before any worker."""
    monkeypatch.setattr(roofs, "host_facts", fake_facts)
    lock, jobs, taken = tmp_path / "timing.lock", [], []

    def take(pids):
        with open(lock, "a+") as fh, pytest.raises(BlockingIOError):
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the lock is held
        taken.append((pids, len(jobs)))

    monkeypatch.setattr(roofs, "workflow_pids", lambda parent: [parent, 42])
    monkeypatch.setattr(roofs, "take_workflow_affinity", take)
    dims, out = [("cpu", "float64", 1)], tmp_path / "roofs.parquet"
    runner = fake_runner(lock, jobs)
    roofs.measure_roofs(
        dims, {"cpu": ["numpy"]}, "steady", out, lock=str(lock), runner=runner, say=lambda _: None
    )
    assert taken == [([os.getppid(), 42], 0)] and jobs  # once, before the first worker


def test_a_roofs_table_from_before_the_rounds_reads_with_its_round_unknown(tmp_path):
    path = tmp_path / "old.parquet"
    old = pa.schema([f for f in roofs_table.ROOFS_SCHEMA if f.name != "round"])
    pq.write_table(pa.Table.from_pylist([{"roof": "dram", "value": 1.0}], schema=old), path)
    table = roofs_table.read_roofs(path)
    assert table.column_names == roofs_table.ROOFS_SCHEMA.names
    assert table.column("round").to_pylist() == [None]


def test_a_job_other_programs_disturbed_is_measured_again_and_the_quietest_kept():
    taken = iter([0.45, 0.30, 0.05, 0.0])
    attempts, said = [], []

    def runner(worker):
        attempts.append(json.loads(worker.job_text))
        return {"status": "ok", "cpu_taken": next(taken), "attempt": len(attempts)}

    jobs = RoofJobs("steady", 0.1, said.append, runner)
    kept = jobs.measure({"kind": "gemm", "threads": 1})
    assert len(attempts) == 3 and kept["attempt"] == 3 and kept["set_aside"] == 2
    assert said[0] == "roofs: other programs took 45% of the CPUs during gemm: again"
    # never more than CPU_TAKEN_RETRIES again: the least disturbed of them is kept
    taken = iter([0.5, 0.2, 0.4])
    attempts.clear()
    kept = jobs.measure({"kind": "gemm", "threads": 1})
    assert len(attempts) == 1 + CPU_TAKEN_RETRIES and kept["cpu_taken"] == 0.2
    # no limit (max_cpu_taken: null): measured once
    taken = iter([0.9])
    attempts.clear()
    once = RoofJobs("steady", None, said.append, runner).measure({"kind": "gemm", "threads": 1})
    assert once["set_aside"] == 0 and len(attempts) == 1


def test_a_roof_job_is_kept_as_measured_while_others_still_take_the_cpus():
    """The roofs follow the cells' rule: a look at the machine before a retry that finds
    others still busy keeps the job as measured, none set aside."""
    taken = iter([0.45, 0.0])
    attempts, said = [], []

    def runner(worker):
        attempts.append(worker)
        return {"status": "ok", "cpu_taken": next(taken)}

    looked = []  # the look is for the job's threads
    jobs = RoofJobs("steady", 0.1, said.append, runner, lambda n: looked.append(n) or 0.6)
    kept = jobs.measure({"kind": "memory", "threads": 3})
    assert len(attempts) == 1 and kept == {"status": "ok", "cpu_taken": 0.45, "set_aside": 0}
    assert looked == [3]
    assert said == [
        "roofs: other programs took 45% of the CPUs during memory and would still take 60% of "
        "the worker's CPUs: a retry would time them too; kept as measured"
    ]


def test_the_compute_roof_is_the_fastest_gemm_over_its_sizes(monkeypatch):
    """A BLAS peaks at a size of its own: the GEMM job measures every size and reports the
    fastest, so no cell of another size lies above a roof measured at one size only."""
    rate_by_n = {16: 10e9, 32: 40e9, 64: 20e9}  # flop/s: the middle size is fastest

    def best_seconds(call, trials):
        call()
        n = call.__defaults__[0].shape[0]  # the size of the call's first matrix
        return 2.0 * n**3 / rate_by_n[n]

    monkeypatch.setattr(roof_kernels, "_best_seconds", best_seconds)
    out = roof_kernels.measure_gemm(
        {
            "library": "numpy",
            "device": "cpu",
            "dtype": "float64",
            "threads": 1,
            "sizes": (16, 32, 64),
        }
    )
    assert out["status"] == "ok" and out["n"] == 32
    assert {int(k): round(v) for k, v in out["gflop_per_s_by_n"].items()} == {
        16: 10,
        32: 40,
        64: 20,
    }


def test_a_test_run_plans_from_the_cache_sizes_it_names_and_no_other_run_does():
    from numbench.roofline.measure import TEST_CACHES_ENV, named_caches

    found = {"l1": 32 * 1024, "l2": 2 * MIB, "l3": 480 * MIB}
    named = {"NUMBENCH_TEST_ADAPTERS": "1", TEST_CACHES_ENV: "l2=1, l3=4"}
    assert named_caches(found, named) == {"l1": 32 * 1024, "l2": MIB, "l3": 4 * MIB}
    # outside the tests (no NUMBENCH_TEST_ADAPTERS=1) the variable changes nothing
    assert named_caches(found, {TEST_CACHES_ENV: "l3=4"}) == found
    assert named_caches(found, {"NUMBENCH_TEST_ADAPTERS": "1"}) == found
    with pytest.raises(ValueError, match=TEST_CACHES_ENV):
        named_caches(found, {**named, TEST_CACHES_ENV: "l3=big"})


def test_a_test_run_measures_the_gemms_at_the_sizes_it_names_and_no_other_run_does():
    named = {"NUMBENCH_TEST_ADAPTERS": "1", roofs.TEST_GEMM_ENV: "128, 256"}
    assert roofs.gemm_sizes("cpu", named) == (128, 256)
    assert roofs.gemm_sizes("gpu", named) == (128, 256)
    # outside the tests (no NUMBENCH_TEST_ADAPTERS=1) the variable changes nothing
    assert roofs.gemm_sizes("cpu", {roofs.TEST_GEMM_ENV: "128"}) == roofs.GEMM_SIZES["cpu"]
    assert roofs.gemm_sizes("gpu", {"NUMBENCH_TEST_ADAPTERS": "1"}) == roofs.GEMM_SIZES["gpu"]
    for bad in ("big", "128,", "0"):
        with pytest.raises(ValueError, match=roofs.TEST_GEMM_ENV):
            roofs.gemm_sizes("cpu", {**named, roofs.TEST_GEMM_ENV: bad})
