"""Running the cells on another host: plan here, run there (no Snakemake, PyYAML, jsonschema
or pandas), import here, and Snakemake then runs the analysis rules only."""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import os
import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from conftest import REPO, copy_workflow, snakemake

from numbench.cells import Cell
from numbench.offsite import (
    TRANSFER_LIMIT_BYTES,
    compare_inputs,
    load_config,
    make_plan,
    plan_hash,
)

TINY = """\
libraries: [numpy, torch]
operations:
  elementwise: {sizes: [1000]}
  sort: {sizes: [1000]}
timing: {min_sample_time_s: 0.002, min_samples: 3, max_samples: 3, budget_s: 0.01}
replicates: {min: 1, max: 2, max_cpu_taken: null}
cell_timeout_s: 120
"""
CELLS = [
    f"results/cells/{lib}/cpu/float64/t1/{op}/1000.parquet"
    for lib in ("numpy", "torch")
    for op in ("elementwise", "sort")
]
ANALYSIS_RULES = ("aggregate", "speedups", "crossovers", "charts", "summary")

# Runs `python -m numbench ARGS` in a Python where the workflow's own needs cannot be
# imported, as on a host that has the numerical libraries but not the workflow's environment.
WITHOUT_WORKFLOW_ENV = """
import importlib.abc, runpy, sys
BLOCKED = {"snakemake", "yaml", "jsonschema", "pandas"}
class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (not on this host)", name=name)
sys.meta_path.insert(0, NotInstalled())
sys.argv = ["numbench", *sys.argv[1:]]
runpy.run_module("numbench", run_name="__main__", alter_sys=True)
"""


def offsite(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """`numbench offsite ARGS` in a workflow folder (its own sources first on the path), in
    the full environment."""
    env = {**os.environ, "NUMBENCH_TIMING_LOCK": str(cwd / ".timing.lock")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(cwd / "src")
    return subprocess.run(
        [sys.executable, "-m", "numbench", "offsite", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def remote_run(there: Path, *args: str) -> subprocess.CompletedProcess:
    """`PYTHONPATH=src python -m numbench offsite run ...` on the 'other host': only the
    bundle's src on the path, and Snakemake, PyYAML, jsonschema and pandas unimportable."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(there / "src")
    env["NUMBENCH_TIMING_LOCK"] = str(there / ".timing.lock")
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_WORKFLOW_ENV, "offsite", "run", *args],
        cwd=there,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def job_counts(proc: subprocess.CompletedProcess) -> dict[str, int]:
    found = re.findall(r"^(\w+)\s+(\d+)$", proc.stdout + proc.stderr, flags=re.M)
    return {k: int(v) for k, v in found}


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder``'s results/ and logs/, and any leftover at its top."""
    out = {}
    for sub in ("results", "logs"):
        for p in sorted((folder / sub).rglob("*")):
            if p.is_file():
                out[str(p.relative_to(folder))] = p.read_bytes()
    out.update({p.name: b"" for p in folder.glob(".offsite-import-*")})
    return out


def repack(src: Path, dst: Path, change: dict[str, bytes | None]) -> Path:
    """A copy of an archive with members replaced (bytes), dropped (None) or added."""
    with tarfile.open(src, "r:gz") as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}
    for name, data in change.items():
        if data is None:
            members.pop(name, None)
        else:
            members[name] = data
    with tarfile.open(dst, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return dst


def archive_json(path: Path, name: str) -> dict:
    with tarfile.open(path, "r:gz") as tar:
        return json.loads(tar.extractfile(name).read())


def make_remote(tmp_path_factory) -> dict:
    """plan (here) -> bundle -> run on the 'other host': conftest's session fixture
    ``remote``, one run shared by the tests below and test_offsite_security's. They leave its
    archive and plan as made (the resume test measures one cell again in the run's work
    folder and writes another archive beside it)."""
    base = tmp_path_factory.mktemp("offsite")
    here = copy_workflow(base / "here")
    (here / "tiny.yaml").write_text(TINY)
    proc = offsite(
        here,
        "plan",
        "--configfile",
        "tiny.yaml",
        "--output",
        "plan.json",
        "--bundle",
        str(base / "bundle.tar.gz"),
    )
    assert proc.returncode == 0, proc.stderr
    there = base / "there"
    there.mkdir()
    with tarfile.open(base / "bundle.tar.gz") as tar:
        tar.extractall(there, filter="data")
    run = remote_run(there, "plan.json", "--output", "cells.tar.gz")
    assert run.returncode == 0, run.stdout + run.stderr
    return {
        "base": base,
        "here": here,
        "there": there,
        "archive": there / "cells.tar.gz",
        "run": run,
    }


def fresh_workflow(remote, name: str) -> Path:
    wf = copy_workflow(remote["base"] / name)
    (wf / "tiny.yaml").write_text(TINY)
    return wf


def assert_clean_error(proc: subprocess.CompletedProcess, *phrases: str) -> None:
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "offsite import: error:" in proc.stderr, proc.stderr
    for phrase in phrases:
        assert phrase in proc.stderr, proc.stderr


# -- plan ----------------------------------------------------------------------------------------
def test_plan_lists_the_grid_in_the_workflow_s_seeded_order():
    from numbench.config import JobOrder, grid

    cfg = load_config(REPO)  # the default grid: 225 cells
    first, again = make_plan(cfg), make_plan(cfg)
    paths = [c["path"] for c in first["cells"]]
    assert paths == [c["path"] for c in again["cells"]]
    assert sorted(paths) == sorted(c.path for c in grid(cfg)) and len(set(paths)) == len(paths)
    assert paths != sorted(paths)
    # the order the workflow's priorities run the cells' jobs in: each below the one before
    order = JobOrder.of(cfg, grid(cfg))
    priorities = [order.cell_priority(Cell.from_path(p)) for p in paths]
    assert all(a > b for a, b in itertools.pairwise(priorities))
    # the libraries are spread over the run: none has its cells all in one stretch
    first_quarter = {p.split("/")[2] for p in paths[: len(paths) // 4]}
    assert first_quarter == set(cfg["libraries"]) - {"cupy"}

    other = make_plan({**cfg, "seed": cfg["seed"] + 1})
    assert [c["path"] for c in other["cells"]] != paths
    assert first["plan_hash"] == plan_hash({**first, "cells": first["cells"][::-1]})
    assert other["plan_hash"] != first["plan_hash"]  # the seed is part of the config


def test_plan_validates_the_config_like_the_workflow(tmp_path):
    wf = copy_workflow(tmp_path / "wf")
    (wf / "bad.yaml").write_text("libraries: [numpy, nosuchlib]\n")
    proc = offsite(wf, "plan", "--configfile", "bad.yaml", "--output", "plan.json")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "libraries[1] = 'nosuchlib' is not a known library" in proc.stderr
    assert not (wf / "plan.json").exists()
    # an operations mapping in the file replaces the default set, as in the workflow
    (wf / "ops.yaml").write_text("operations:\n  sort: {sizes: [10]}\n")
    proc = offsite(
        wf, "plan", "--configfile", "ops.yaml", "--config", "libraries=numpy", "--output", "p.json"
    )
    assert proc.returncode == 0, proc.stderr
    plan = json.loads((wf / "p.json").read_text())
    assert [c["path"] for c in plan["cells"]] == [
        "results/cells/numpy/cpu/float64/t1/sort/10.parquet"
    ]
    assert plan["inputs"][0]["seed"] == plan["config"]["seed"]


# -- run (there) ---------------------------------------------------------------------------------
def test_run_needs_no_workflow_environment_and_packs_one_archive(remote):
    out = remote["run"].stdout
    for i, path in enumerate(CELLS):
        assert re.search(rf"^\[\d/4\] {re.escape(path)}  ok  [\d.]+ s$", out, flags=re.M), out
        assert f"[{i + 1}/4]" in out
    archive = remote["archive"]
    assert 0 < archive.stat().st_size < TRANSFER_LIMIT_BYTES
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    assert set(CELLS) <= names and {"manifest.json", "plan.json"} <= names
    assert {c.replace("results/", "logs/").replace(".parquet", ".log") for c in CELLS} <= names
    manifest = archive_json(archive, "manifest.json")
    assert (
        manifest["plan_hash"]
        == json.loads((remote["there"] / "plan.json").read_text())["plan_hash"]
    )
    assert manifest["statuses"] == {"ok": 4}
    assert set(manifest["cells"]) == set(CELLS)
    arrays = manifest["inputs"]["results/inputs/sort/1000.npz"]["arrays"]
    assert {"a", "ref_0", "seed"} <= set(arrays) and "norm" in arrays["ref_0"]
    for key in ("host", "python", "started_at", "finished_at"):
        assert manifest[key]


def test_run_measures_rounds_and_cells_in_the_order_of_the_workflow_s_priorities(remote):
    """Each early round, then each cell's own job, in the order the workflow's priorities
    would run their jobs on one core: every step's priority below the one before it."""
    from numbench.config import JobOrder

    plan = json.loads((remote["there"] / "plan.json").read_text())
    cells = [Cell.from_path(c["path"]) for c in plan["cells"]]
    order = JobOrder.of(plan["config"], cells)
    assert order.early_rounds >= 1  # TINY keeps the default's early rounds
    steps = re.findall(
        r"^(?:round (\d+)|\[\d+/\d+\]) (results/\S+)  ", remote["run"].stdout, flags=re.M
    )
    assert len(steps) == len(cells) * (order.early_rounds + 1), remote["run"].stdout
    priorities = [
        order.round_priority(Cell.from_path(path), int(k))
        if k
        else order.cell_priority(Cell.from_path(path))
        for k, path in steps
    ]
    assert all(a > b for a, b in itertools.pairwise(priorities)), steps


def test_run_resumes_without_measuring_again(remote):
    there = remote["there"]
    proc = remote_run(there, "plan.json", "--output", "cells.tar.gz")
    assert proc.returncode == 1 and "pass --resume" in proc.stderr
    proc = remote_run(there, "plan.json", "--output", "again.tar.gz", "--workdir", "cells.work")
    assert proc.returncode == 1
    lost = CELLS[1]  # numpy's sort cell: as if the run had stopped before it
    (there / "cells.work" / lost).unlink()
    proc = remote_run(
        there, "plan.json", "--output", "again.tar.gz", "--workdir", "cells.work", "--resume"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("ok (kept)") == 3
    assert re.search(rf"^\[\d/4\] {re.escape(lost)}  ok  [\d.]+ s$", proc.stdout, flags=re.M)
    again = archive_json(there / "again.tar.gz", "manifest.json")["cells"]
    first = archive_json(remote["archive"], "manifest.json")["cells"]
    assert set(again) == set(first)
    for name in set(CELLS) - {lost}:
        assert again[name]["sha256"] == first[name]["sha256"]
    assert again[lost]["sha256"] != first[lost]["sha256"]  # measured anew


# -- import (here) -------------------------------------------------------------------------------
def test_import_then_snakemake_runs_only_the_analysis(remote):
    wf = fresh_workflow(remote, "import-ok")
    proc = offsite(wf, "import", str(remote["archive"]), "--configfile", "tiny.yaml")
    assert proc.returncode == 0, proc.stderr
    assert "imported 4 cells" in proc.stdout and "2 inputs files made here" in proc.stdout
    manifest = archive_json(remote["archive"], "manifest.json")
    for path in CELLS:
        operation = path.split("/")[6]
        made = wf / "results" / "inputs" / operation / "1000.npz"
        assert (wf / path).stat().st_mtime_ns > made.stat().st_mtime_ns
        assert (wf / path.replace("results/", "logs/").replace(".parquet", ".log")).exists()

    run = snakemake(wf, "--cores", "1", "--configfile", "tiny.yaml")
    assert run.returncode == 0, run.stderr[-3000:]
    jobs = job_counts(run)
    assert "cell" not in jobs and "inputs" not in jobs, jobs
    assert all(jobs.get(rule) == 1 for rule in ANALYSIS_RULES), jobs
    bench = pd.read_parquet(wf / "results" / "benchmarks.parquet")
    statuses = {
        f"results/cells/{r.library}/{r.device}/{r.dtype}/t{r.threads}/{r.operation}/{r.size}.parquet": r.status
        for r in bench.itertuples()
    }
    assert statuses == {k: v["status"] for k, v in manifest["cells"].items()}
    assert set(bench["host"]) == {manifest["host"]}
    assert (wf / "results" / "summary.md").exists()
    # importing the same archive again changes nothing and is no conflict
    again = offsite(wf, "import", str(remote["archive"]), "--configfile", "tiny.yaml")
    assert again.returncode == 0, again.stderr
    assert "0 inputs files made here, 2 already here" in again.stdout


def test_import_over_an_earlier_local_run_forgets_its_records(remote):
    """Cells made here before, with other timing settings, have Snakemake records naming
    other params: imported with --force, they must not be rerun for that."""
    wf = fresh_workflow(remote, "import-over-local")
    (wf / "local.yaml").write_text(TINY.replace("libraries: [numpy, torch]", "libraries: [numpy]"))
    (wf / "local.yaml").write_text(
        (wf / "local.yaml").read_text().replace("max_samples: 3", "max_samples: 4")
    )
    target = "results/cells/numpy/cpu/float64/t1/sort/1000.parquet"
    local = snakemake(wf, target, "--cores", "1", "--configfile", "local.yaml")
    assert local.returncode == 0, local.stderr[-3000:]

    refused = offsite(wf, "import", str(remote["archive"]), "--configfile", "tiny.yaml")
    assert_clean_error(refused, "differ from the archive's", target, "--force")
    forced = offsite(wf, "import", str(remote["archive"]), "--configfile", "tiny.yaml", "--force")
    assert forced.returncode == 0, forced.stderr
    assert "1 cell files replaced" in forced.stdout
    dry = snakemake(wf, "-n", "--cores", "1", "--configfile", "tiny.yaml")
    assert dry.returncode == 0, dry.stderr[-3000:]
    jobs = job_counts(dry)
    assert "cell" not in jobs and "inputs" not in jobs, jobs


@pytest.mark.parametrize(
    "damage", ["truncated", "not-gzip", "cell-changed", "cell-missing", "foreign-member"]
)
def test_a_damaged_archive_is_refused_and_results_stay(remote, damage):
    wf = fresh_workflow(remote, f"damaged-{damage}")
    earlier = wf / "results" / "benchmarks.parquet"
    earlier.parent.mkdir(parents=True)
    earlier.write_bytes(b"an earlier run's table")
    before = snapshot(wf)
    data = remote["archive"].read_bytes()
    bad = remote["base"] / f"{damage}.tar.gz"
    if damage == "truncated":
        bad.write_bytes(data[: len(data) // 2])
        phrase = "not a readable archive"
    elif damage == "not-gzip":
        bad.write_bytes(b"PK\x03\x04 this is no tar.gz at all")
        phrase = "not a readable archive"
    elif damage == "cell-changed":
        cell = CELLS[0]
        with tarfile.open(remote["archive"]) as tar:
            content = bytearray(tar.extractfile(cell).read())
        content[len(content) // 2] ^= 0xFF
        repack(remote["archive"], bad, {cell: bytes(content)})
        phrase = f"{cell} in the archive does not match its checksum in the manifest"
    elif damage == "cell-missing":
        repack(remote["archive"], bad, {CELLS[2]: None})
        phrase = (
            "lacks 1 of its plan's 4 cells (first: results/cells/torch/cpu/float64/t1/elementwise"
        )
    else:
        repack(remote["archive"], bad, {"../outside.txt": b"x"})
        phrase = "unexpected member '../outside.txt'"
    proc = offsite(wf, "import", str(bad), "--configfile", "tiny.yaml")
    assert_clean_error(proc, phrase)
    assert snapshot(wf) == before
    assert not (wf.parent / "outside.txt").exists()


def test_an_archive_of_another_config_is_refused(remote):
    wf = fresh_workflow(remote, "other-config")
    before = snapshot(wf)
    proc = offsite(
        wf, "import", str(remote["archive"]), "--configfile", "tiny.yaml", "--config", "threads=2"
    )
    assert_clean_error(
        proc, "planned with another config", "threads = [2] here, [1] in the archive"
    )
    assert "--configfile tiny.yaml" in proc.stderr  # how the plan was made
    proc = offsite(wf, "import", str(remote["archive"]))  # the default grid here
    assert_clean_error(proc, "planned with another config", "libraries")
    assert snapshot(wf) == before

    # a manifest that belongs to another plan
    manifest = archive_json(remote["archive"], "manifest.json")
    manifest["plan_hash"] = "0" * 64
    bad = repack(
        remote["archive"],
        remote["base"] / "other-manifest.tar.gz",
        {"manifest.json": json.dumps(manifest).encode()},
    )
    proc = offsite(wf, "import", str(bad), "--configfile", "tiny.yaml")
    assert_clean_error(proc, "the manifest belongs to another plan")
    assert snapshot(wf) == before


def test_inputs_that_differ_from_the_measured_ones_are_refused(remote):
    from numbench import inputs_file as inputs

    # an inputs file here made with another seed
    wf = fresh_workflow(remote, "inputs-here")
    made_here = wf / "results" / "inputs" / "sort" / "1000.npz"
    inputs.write("sort", 1000, 12345, made_here)
    before = snapshot(wf)
    proc = offsite(wf, "import", str(remote["archive"]), "--configfile", "tiny.yaml")
    assert_clean_error(
        proc,
        "results/inputs/sort/1000.npz: the inputs file here differs from the one the cells were "
        "measured on",
        "array a: CRC",
        "move it away and import again",
    )
    assert "make_inputs" not in proc.stderr  # not a maker's rounding: a file made otherwise
    assert snapshot(wf) == before

    # inputs made here with the seed of the plan, but not what the other host recorded
    wf = fresh_workflow(remote, "inputs-made")
    before = snapshot(wf)
    manifest = archive_json(remote["archive"], "manifest.json")
    manifest["inputs"]["results/inputs/elementwise/1000.npz"]["arrays"]["b"]["crc32"] ^= 1
    bad = repack(
        remote["archive"],
        remote["base"] / "other-inputs.tar.gz",
        {"manifest.json": json.dumps(manifest).encode()},
    )
    proc = offsite(wf, "import", str(bad), "--configfile", "tiny.yaml")
    assert_clean_error(
        proc,
        "results/inputs/elementwise/1000.npz: the inputs file made here with the same seed",
        # the likely cause and both remedies
        "a matrix product, a reduction",
        "fixed-order elementwise arithmetic",
        "operations.elementwise.inputs, carried in the bundle",
    )
    assert snapshot(wf) == before


def test_a_reference_may_differ_in_its_last_bits_but_inputs_may_not():
    here = {
        "a": {"crc32": 1, "bytes": 80},
        "ref_0": {"crc32": 2, "bytes": 80, "norm": 1.0},
    }
    rounding = {**here, "ref_0": {"crc32": 3, "bytes": 80, "norm": 1.0 + 2e-16}}
    problems, notes = compare_inputs(here, rounding)
    assert problems == [] and len(notes) == 1 and "last bits" in notes[0]
    other = {**here, "ref_0": {"crc32": 3, "bytes": 80, "norm": 1.1}}
    assert compare_inputs(here, other)[0]
    other_input = {**here, "a": {"crc32": 9, "bytes": 80}}
    assert compare_inputs(here, other_input)[0] == [
        "array a: CRC 00000001 (80 bytes) here, 00000009 (80 bytes) on the host that ran the cells"
    ]


# -- roofs: measured there, carried, merged here --------------------------------------------------
def archive_roofs(path: Path) -> pd.DataFrame:
    with tarfile.open(path, "r:gz") as tar:
        return pd.read_parquet(io.BytesIO(tar.extractfile("results/roofs.parquet").read()))


def test_run_measures_the_hosts_roofs_into_the_archive(remote):
    archive = remote["archive"]
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
        data = tar.extractfile("results/roofs.parquet").read()
    assert {"results/roofs.parquet", "logs/roofs.log"} <= names
    manifest = archive_json(archive, "manifest.json")
    assert manifest["roofs"]["sha256"] == hashlib.sha256(data).hexdigest()
    roofs = archive_roofs(archive)
    assert set(roofs["host"]) == {manifest["host"]}
    assert set(roofs["round"]) == {"end"}  # once, after the cells
    ok = roofs[roofs["status"] == "ok"]
    assert {"l2", "dram", "compute"} <= set(ok["roof"])
    assert set(zip(roofs["device"], roofs["dtype"], roofs["threads"])) == {("cpu", "float64", 1)}
    assert set(ok.loc[ok["roof"] == "compute", "library"]) <= {"numpy", "torch"}


def test_import_merges_the_roofs_and_places_the_cells_on_them(remote):
    """The archive's host's roofs replace that host's rows here; another host's stay; the
    roofs are not measured again here, and every ok cell gets its place on the roofline."""
    from numbench.contract import write_atomic
    from numbench.roofline.contract import ROOFS_SCHEMA

    wf = fresh_workflow(remote, "import-roofs")
    theirs = archive_roofs(remote["archive"])
    other = theirs.head(1).assign(host="some-other-host")
    stale = theirs.head(1).assign(value=1e-6)  # this host's older, wrong roof: replaced
    here = pa.Table.from_pandas(
        pd.concat([other, stale]), schema=ROOFS_SCHEMA, preserve_index=False
    )
    write_atomic(here, wf / "results" / "roofs.parquet")
    proc = offsite(wf, "import", str(remote["archive"]), "--configfile", "tiny.yaml")
    assert proc.returncode == 0, proc.stderr
    merged = pd.read_parquet(wf / "results" / "roofs.parquet")
    assert len(merged) == len(theirs) + 1
    assert set(merged["host"]) == set(theirs["host"]) | {"some-other-host"}
    assert 1e-6 not in set(merged["value"])
    assert (wf / "logs" / "roofs.log").exists()
    # up to the cells' table (aggregate reads the roofs for each cell's place on them; the
    # analysis after it is test_import_then_snakemake_runs_only_the_analysis')
    table = "results/benchmarks.parquet"
    run = snakemake(wf, table, "--cores", "1", "--configfile", "tiny.yaml")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "roofs" not in job_counts(run) and job_counts(run).get("aggregate") == 1
    bench = pd.read_parquet(wf / table)
    ok = bench[bench["status"] == "ok"]
    assert ok["roof"].notna().all() and (ok["roof_fraction"] > 0).all()


def test_the_import_dates_the_cells_after_the_inputs_and_the_roofs_after_the_cells(tmp_path):
    """As the workflow would have made them: inputs, then cells, then the start's roofs, then
    results/roofs.parquet (rule roofs_at_end reads the other two). Before, the roofs merged
    here kept the time of the merge, older than the cells dated after it, and the next run
    measured this host's roofs over the imported ones."""
    from numbench.offsite.common import ROOFS_MEMBER, ROOFS_START_FILE
    from numbench.offsite.importer import _stamp_imported

    inputs, cells = "results/inputs/sort/1000.npz", CELLS[:2]
    roof_files = [ROOFS_START_FILE, ROOFS_MEMBER]
    for name in [inputs, *cells, *roof_files]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    future = time.time_ns() + 3_600 * 10**9  # an inputs file newer than the clock
    os.utime(tmp_path / inputs, ns=(future, future))
    plan = {"cells": [{"path": c} for c in cells], "inputs": [{"path": inputs}]}
    _stamp_imported(plan, lambda name: tmp_path / name, future, roof_files)
    times = {name: (tmp_path / name).stat().st_mtime_ns for name in [inputs, *cells, *roof_files]}
    assert times[cells[0]] == times[cells[1]]
    assert times[inputs] < times[cells[0]] < times[ROOFS_START_FILE] < times[ROOFS_MEMBER]
    # without roofs in the archive (an older numbench's), only the cells are dated
    before = (tmp_path / ROOFS_MEMBER).stat().st_mtime_ns
    _stamp_imported(plan, lambda name: tmp_path / name, future + 10**10, [])
    assert (tmp_path / cells[0]).stat().st_mtime_ns > before
    assert (tmp_path / ROOFS_MEMBER).stat().st_mtime_ns == before


def test_import_with_the_roofs_measured_at_the_end_here_measures_none_over_them(remote):
    """Under a config that measures the roofs again at the end (``roofs_at_end: true``, the
    default; off in a test's copy of the workflow) the import merges the archive's roofs into
    the start's file too, then into results/roofs.parquet, and dates both after the cells,
    so that the next run measures no roofs of its own over the imported ones (rule
    roofs_at_end would replace them) and no cell. The archive is the shared run's with its
    plan saying ``roofs_at_end: true``, as a plan made under that config does: the key
    reaches no cell's spec, and an offsite run measures its roofs once, after its cells,
    whatever it says."""
    from numbench.offsite.common import ROOFS_MEMBER, ROOFS_START_FILE, destinations_here

    assert destinations_here({"roofs": True, "roofs_at_end": False}) == [ROOFS_MEMBER]
    assert destinations_here({"roofs": False, "roofs_at_end": True}) == [ROOFS_MEMBER]
    on = destinations_here({"roofs": True, "roofs_at_end": True})
    assert on == [ROOFS_START_FILE, ROOFS_MEMBER]
    plan = archive_json(remote["archive"], "plan.json")
    manifest = archive_json(remote["archive"], "manifest.json")
    assert plan["config"]["roofs_at_end"] is False
    plan["config"]["roofs_at_end"] = True
    plan["plan_hash"] = manifest["plan_hash"] = plan_hash(plan)
    change = {
        "plan.json": json.dumps(plan).encode(),
        "manifest.json": json.dumps(manifest).encode(),
    }
    archive = repack(remote["archive"], remote["base"] / "roofs-at-end.tar.gz", change)
    wf = fresh_workflow(remote, "import-roofs-at-end")
    (wf / "at-end.yaml").write_text(TINY + "roofs_at_end: true\n")
    proc = offsite(wf, "import", str(archive), "--configfile", "at-end.yaml")
    assert proc.returncode == 0, proc.stderr
    times = {name: (wf / name).stat().st_mtime_ns for name in [*CELLS, *on]}
    assert max(times[c] for c in CELLS) < times[ROOFS_START_FILE] < times[ROOFS_MEMBER]
    dry = snakemake(wf, "-n", "--cores", "1", "--configfile", "at-end.yaml")
    assert dry.returncode == 0, dry.stderr[-3000:]
    jobs = job_counts(dry)
    assert "aggregate" in jobs, dry.stdout[-3000:]
    assert not {"roofs", "roofs_at_end", "cell", "inputs"} & set(jobs), dry.stdout[-3000:]


def test_roofs_of_another_host_in_an_archive_are_refused(remote):
    wf = fresh_workflow(remote, "foreign-roofs")
    before = snapshot(wf)
    roofs = archive_roofs(remote["archive"]).assign(host="someone-else")
    buffer = io.BytesIO()
    roofs.to_parquet(buffer)
    manifest = archive_json(remote["archive"], "manifest.json")
    manifest["roofs"]["sha256"] = hashlib.sha256(buffer.getvalue()).hexdigest()
    change = {
        "results/roofs.parquet": buffer.getvalue(),
        "manifest.json": json.dumps(manifest).encode(),
    }
    bad = repack(remote["archive"], remote["base"] / "foreign-roofs.tar.gz", change)
    proc = offsite(wf, "import", str(bad), "--configfile", "tiny.yaml")
    assert_clean_error(proc, "roofs of hosts other than the archive's")
    assert snapshot(wf) == before
