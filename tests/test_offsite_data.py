"""A user's data files (``operations.NAME.inputs``) carried offsite: the plan names each by its
place in the bundle, with its SHA-256 and size; ``run`` reads the bundle's copy once it hashes
as planned, ``import`` refuses a file here that no longer does, and the archive carries no
data back."""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, copy_workflow, snakemake
from test_offsite import job_counts, offsite, remote_run

from numbench.offsite import (
    OffsiteError,
    check_plan,
    compare_inputs,
    load_config,
    make_plan,
    plan_hash,
    run_plan,
    write_plan,
)
from numbench.offsite import plan as offsite_plan

CELL = "results/cells/numpy/cpu/float64/t1/sort/100.parquet"
PLACE = "data/sort/sort_100.npz"
FAST = """\
timing: {min_sample_time_s: 0.002, min_samples: 3, max_samples: 3, budget_s: 0.01}
replicates: {min: 1, max: 1, early_rounds: 0, max_cpu_taken: null}
cell_timeout_s: 120
roofs: false
"""


def data_file(folder: Path, name: str = "a_100.npz", seed: int = 3) -> Path:
    """A tiny .npz of sort's one input at size 100."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    np.savez(path, a=np.random.default_rng(seed).standard_normal(100))
    return path


def data_config(where: Path, pattern: str) -> Path:
    """A config of NumPy's sort at size 100, its inputs read from ``pattern``."""
    config = where / "data.yaml"
    config.write_text(
        f'libraries: [numpy]\noperations:\n  sort: {{sizes: [100], inputs: "{pattern}"}}\n' + FAST
    )
    return config


def plan_of(tmp_path: Path, pattern: str) -> tuple[dict, dict]:
    """(resolved config, plan) of ``data_config``."""
    cfg = load_config(REPO, [str(data_config(tmp_path, pattern))])
    return cfg, make_plan(cfg)


def replanned(plan: dict) -> dict:
    """The plan read back as from its file, its hash made again after an edit."""
    plan = json.loads(json.dumps(plan))
    plan["plan_hash"] = plan_hash(plan)
    return plan


# -- plan ------------------------------------------------------------------------------------------
def test_the_plan_names_the_data_by_its_place_with_its_hash_and_size(tmp_path):
    here = data_file(tmp_path / "my data")
    cfg, plan = plan_of(tmp_path, str(tmp_path / "my data" / "a_{size}.npz"))
    [item] = plan["inputs"]
    content = here.read_bytes()
    assert item["data"] == {
        "file": PLACE,
        "sha256": hashlib.sha256(content).hexdigest(),
        "bytes": len(content),
    }
    [cell] = plan["cells"]
    assert cell["spec"]["inputs_from"] == PLACE and cell["spec"]["seed"] is None
    assert plan["config"]["operations"]["sort"]["inputs"] == "data/sort/sort_{size}.npz"
    assert "my data" not in json.dumps(plan)  # this host's path is nowhere in the plan
    assert check_plan(json.loads(json.dumps(plan)), "the plan")["plan_hash"] == plan["plan_hash"]

    # the same bytes elsewhere, under another name: the same plan
    shutil.copy(here, tmp_path / "b-100.npz")
    _, moved = plan_of(tmp_path, str(tmp_path / "b-{size}.npz"))
    assert moved["plan_hash"] == plan["plan_hash"] and moved["inputs"] == plan["inputs"]

    # one byte changed: another plan, whose cells are the same
    changed = bytearray(content)
    changed[-1] ^= 1
    here.write_bytes(bytes(changed))
    _, edited = plan_of(tmp_path, str(tmp_path / "my data" / "a_{size}.npz"))
    assert edited["plan_hash"] != plan["plan_hash"]
    assert edited["inputs"][0]["data"]["sha256"] == hashlib.sha256(changed).hexdigest()
    assert edited["cells"][0]["spec"] == cell["spec"]


def test_one_file_for_every_size_is_one_place_in_the_bundle(tmp_path):
    data_file(tmp_path, "same.npz")
    config = tmp_path / "data.yaml"
    same = tmp_path / "same.npz"
    config.write_text(
        f'libraries: [numpy]\noperations:\n  sort: {{sizes: [100, 200], inputs: "{same}"}}\n'
    )
    plan = make_plan(load_config(REPO, [str(config)]))
    assert [i["data"]["file"] for i in plan["inputs"]] == ["data/sort/sort.npz"] * 2
    assert {c["spec"]["inputs_from"] for c in plan["cells"]} == {"data/sort/sort.npz"}


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda p: p["inputs"][0]["data"].update(file="../../etc/a.npz"),
            "names the data file '../../etc/a.npz' for sort n=100, whose data file is one of "
            "data/sort/sort.npz, data/sort/sort.parquet, data/sort/sort_100.npz, "
            "data/sort/sort_100.parquet beside the plan",
        ),
        (
            lambda p: p["inputs"][0]["data"].update(sha256="not a hash"),
            "the data file data/sort/sort_100.npz has no SHA-256: 'not a hash'",
        ),
        (
            lambda p: p["inputs"][0]["data"].update(bytes=-1),
            "the data file data/sort/sort_100.npz has no size: -1",
        ),
        (
            lambda p: p["cells"][0]["spec"].update(inputs_from="/home/someone/a.npz"),
            f"the cell {CELL} names '/home/someone/a.npz' as the file its inputs are read from, "
            "not 'data/sort/sort_100.npz'",
        ),
        (
            lambda p: p["inputs"][0].pop("data"),
            f"the cell {CELL} names 'data/sort/sort_100.npz' as the file its inputs are read "
            "from, not None",
        ),
    ],
    ids=["elsewhere", "no-hash", "no-size", "cell-elsewhere", "no-data"],
)
def test_a_plan_naming_other_data_is_refused(tmp_path, edit, message):
    data_file(tmp_path)
    _, plan = plan_of(tmp_path, str(tmp_path / "a_{size}.npz"))
    plan = json.loads(json.dumps(plan))
    edit(plan)
    with pytest.raises(OffsiteError) as info:
        check_plan(replanned(plan), "the plan")
    assert message in str(info.value)


def test_the_bundle_carries_the_data_and_a_large_file_is_named_in_a_warning(tmp_path, monkeypatch):
    here = data_file(tmp_path / "data")
    config = data_config(tmp_path, str(tmp_path / "data" / "a_{size}.npz"))
    said: list[str] = []
    write_plan(REPO, tmp_path / "p.json", [str(config)], bundle=tmp_path / "b.tgz", say=said.append)
    assert said == []
    with tarfile.open(tmp_path / "b.tgz") as tar:
        assert tar.extractfile(PLACE).read() == here.read_bytes()
        assert "p.json" in tar.getnames()

    monkeypatch.setattr(offsite_plan, "LARGE_DATA_BYTES", 100)
    write_plan(REPO, tmp_path / "p.json", [str(config)], bundle=tmp_path / "b.tgz", say=said.append)
    [warning] = said
    size = here.stat().st_size / 2**20
    assert warning.startswith(f"warning: the data file {here} is {size:.1f} MiB, more than ")
    assert f"it goes into the bundle whole (as {PLACE})" in warning
    with tarfile.open(tmp_path / "b.tgz") as tar:  # carried all the same
        assert tar.extractfile(PLACE).read() == here.read_bytes()


# -- run -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("damage", ["tampered", "missing"])
def test_run_refuses_a_bundled_data_file_that_does_not_hash_as_planned(tmp_path, damage):
    data_file(tmp_path / "data")
    config = data_config(tmp_path, str(tmp_path / "data" / "a_{size}.npz"))
    plan = write_plan(
        REPO, tmp_path / "plan.json", [str(config)], bundle=tmp_path / "b.tgz", say=print
    )
    there = tmp_path / "there"
    with tarfile.open(tmp_path / "b.tgz") as tar:
        tar.extractall(there, filter="data")
    bundled = there / PLACE
    expected = plan["inputs"][0]["data"]["sha256"]
    if damage == "tampered":
        np.savez(bundled, a=np.zeros(100))
        found = f"found SHA-256 {hashlib.sha256(bundled.read_bytes()).hexdigest()}"
    else:
        bundled.unlink()
        found = "found no file"
    with pytest.raises(OffsiteError) as info:
        run_plan(there / "plan.json", there / "cells.tar.gz", say=lambda _: None)
    message = str(info.value)
    assert message.startswith(f"the plan's data file {PLACE} (operations.sort.inputs at size 100)")
    assert f"the plan expects SHA-256 {expected}, {found}." in message
    assert "nothing was measured" in message
    assert not (there / "cells.work").exists() and not (there / "cells.tar.gz").exists()


# -- import ----------------------------------------------------------------------------------------
def test_import_refuses_a_data_file_here_that_changed_since_the_plan(tmp_path):
    from numbench.offsite.plan import check_data_here

    here = data_file(tmp_path)
    cfg, plan = plan_of(tmp_path, str(tmp_path / "a_{size}.npz"))
    check_data_here(plan, make_plan(cfg), cfg)  # unchanged: no complaint
    data_file(tmp_path, seed=4)
    cfg, local = plan_of(tmp_path, str(tmp_path / "a_{size}.npz"))
    with pytest.raises(OffsiteError) as info:
        check_data_here(plan, local, cfg)
    assert str(info.value).startswith(
        f"{here} (operations.sort.inputs at size 100) has SHA-256 "
        f"{local['inputs'][0]['data']['sha256']} here, but the archive's cells were measured "
        f"on data of SHA-256 {plan['inputs'][0]['data']['sha256']}"
    )


def test_the_arrays_are_compared_but_not_the_path_they_were_read_from():
    a = {"crc32": 1, "bytes": 800}
    here = {"a": a, "inputs_from": {"crc32": 7, "bytes": 180}}
    there = {"a": a, "inputs_from": {"crc32": 9, "bytes": 150}}
    assert compare_inputs(here, there) == ([], [])
    problems, _ = compare_inputs({**here, "a": {"crc32": 2, "bytes": 800}}, there)
    assert problems == [
        "array a: CRC 00000002 (800 bytes) here, 00000001 (800 bytes) on the host that ran "
        "the cells"
    ]


# -- end to end ------------------------------------------------------------------------------------
@pytest.mark.e2e
def test_a_data_file_goes_offsite_in_the_bundle_and_comes_back_checked(tmp_path):
    wf = copy_workflow(tmp_path / "here")
    here = data_file(tmp_path / "my data")
    data_config(wf, str(tmp_path / "my data" / "a_{size}.npz"))
    bundle = tmp_path / "bundle.tar.gz"
    proc = offsite(
        wf, "plan", "--configfile", "data.yaml", "--output", "plan.json", "--bundle", str(bundle)
    )
    assert proc.returncode == 0, proc.stderr
    there = tmp_path / "there"
    with tarfile.open(bundle) as tar:
        tar.extractall(there, filter="data")
    run = remote_run(there, "plan.json", "--output", "cells.tar.gz")
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"[1/1] {CELL}  ok  " in run.stdout, run.stdout
    archive = there / "cells.tar.gz"
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert CELL in names and not any(n.startswith("data/") or n.endswith(".npz") for n in names)

    original = here.read_bytes()
    data_file(tmp_path / "my data", seed=4)  # other data here than the cells were measured on
    proc = offsite(wf, "import", str(archive), "--configfile", "data.yaml")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{here} (operations.sort.inputs at size 100) has SHA-256 " in proc.stderr
    assert "they were measured on other data" in proc.stderr
    assert not (wf / "results" / "cells").exists()

    here.write_bytes(original)
    proc = offsite(wf, "import", str(archive), "--configfile", "data.yaml")
    assert proc.returncode == 0, proc.stderr
    assert "1 inputs files made here" in proc.stdout
    cell = pd.read_parquet(wf / CELL)
    assert list(cell["status"].unique()) == ["ok"]
    assert list(cell["inputs_from"].unique()) == [PLACE] and cell["seed"].isna().all()
    with np.load(wf / "results" / "inputs" / "sort" / "100.npz") as made, np.load(here) as data:
        np.testing.assert_array_equal(made["a"], data["a"])

    dry = snakemake(wf, "-n", "--cores", "1", "--configfile", "data.yaml")
    assert dry.returncode == 0, dry.stderr[-3000:]
    jobs = job_counts(dry)
    assert "cell" not in jobs and "inputs" not in jobs and jobs.get("aggregate") == 1, jobs
