"""Two machines with one host name: an import of an archive whose host is named like this
machine but is another one warns, naming both fingerprints and what is at stake."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from numbench.offsite import common

GPU_HOST = {"cpu_model": "Intel(R) Xeon(R) Platinum 8480+", "cpu_count": 16, "ram_gb": 135.1}
THIS_VM = {"cpu_model": "AMD EPYC 7763 64-Core Processor", "cpu_count": 2, "ram_gb": 8.3}


def test_a_host_of_this_name_with_another_fingerprint_is_warned_of():
    warning = common.same_name_warning("vm", GPU_HOST, THIS_VM, name_here="vm")
    assert warning is not None and warning.startswith("warning:")
    for said in (
        "named 'vm', like this machine, but on another machine",
        "there: Intel(R) Xeon(R) Platinum 8480+, 16 logical CPUs, 135.1 GB memory",
        "here: AMD EPYC 7763 64-Core Processor, 2 logical CPUs, 8.3 GB memory",
        "share one key",
        "a roofs run here (rules roofs, roofs_at_end) replaces them",
        "take both machines' cells as one host's",
        "different host names",
    ):
        assert said in warning, (said, warning)
    # any one field tells two machines apart
    for name, other in (("cpu_model", "another CPU"), ("cpu_count", 4), ("ram_gb", 16.0)):
        there = {**THIS_VM, name: other}
        assert common.differences(there, THIS_VM) == [name]
        assert common.same_name_warning("vm", there, THIS_VM, name_here="vm")


def test_the_same_machine_or_another_name_is_no_warning():
    # this very machine (an offsite run here): the memory the kernel reports moves a little
    same = {**THIS_VM, "ram_gb": THIS_VM["ram_gb"] * 1.01}
    assert common.same_name_warning("vm", same, THIS_VM, name_here="vm") is None
    # another name: the rows have keys of their own
    assert common.same_name_warning("gpu-node", GPU_HOST, THIS_VM, name_here="vm") is None
    # a field the archive's cells do not record tells nothing
    unknown = {**THIS_VM, "cpu_count": None}
    assert common.differences(unknown, THIS_VM) == []
    assert common.same_name_warning("vm", dict.fromkeys(common.MACHINE), THIS_VM, "vm") is None


def write_cell(path, fingerprint: dict | None) -> None:
    columns = {"host": ["vm"], "status": ["ok"]}
    if fingerprint is not None:
        columns.update({k: [v] for k, v in fingerprint.items()})
    pq.write_table(pa.table(columns), path)


def test_the_archive_s_fingerprint_is_read_from_its_cells(tmp_path):
    unreadable, bare, cell = tmp_path / "a.parquet", tmp_path / "b.parquet", tmp_path / "c.parquet"
    unreadable.write_bytes(b"not parquet")
    write_cell(bare, None)  # a cell of a numbench that recorded no fingerprint
    write_cell(cell, GPU_HOST)
    assert common.fingerprint_of_cells([unreadable, bare, cell]) == GPU_HOST
    assert common.fingerprint_of_cells([bare]) == dict.fromkeys(common.MACHINE)


def test_the_import_warns_where_the_names_match_and_the_machines_differ(tmp_path, monkeypatch):
    cell = tmp_path / "cell.parquet"
    write_cell(cell, GPU_HOST)
    monkeypatch.setattr(common.socket, "gethostname", lambda: "vm")
    monkeypatch.setattr(common, "fingerprint_here", lambda: THIS_VM)
    said: list[str] = []
    common.warn_if_same_name("vm", [cell], said.append)
    assert len(said) == 1 and "there: Intel(R) Xeon(R) Platinum 8480+" in said[0]
    said.clear()
    common.warn_if_same_name("gpu-node", [cell], said.append)
    monkeypatch.setattr(common, "fingerprint_here", lambda: GPU_HOST)
    common.warn_if_same_name("vm", [cell], said.append)
    assert said == []


def proc_facts() -> dict:
    """This machine's logical CPUs and memory as Linux's /proc tells them, read apart from
    numbench; empty where there is no /proc."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        meminfo = Path("/proc/meminfo").read_text()
    except OSError:
        return {}
    kib = int(re.search(r"^MemTotal:\s+(\d+) kB", meminfo, re.M)[1])
    return {
        "cpu_count": len(re.findall(r"^processor\s*:", cpuinfo, re.M)),
        "ram_gb": kib * 1024 / 1e9,
    }


def test_this_machine_s_fingerprint_is_what_its_cells_record(tmp_path):
    """A cell measured here records the fingerprint an import here compares an archive's
    with, and that fingerprint is this machine's."""
    from conftest import make_spec

    from numbench import inputs_file as inputs
    from numbench.measure.supervisor import run_cell

    path = tmp_path / "sort-1000.npz"
    inputs.write("sort", 1000, 3, path)
    timing = {"min_sample_time_s": 0.001, "min_samples": 2, "max_samples": 2, "budget_s": 0.01}
    out = tmp_path / "cell.parquet"
    run_cell(make_spec("numpy", "cpu", "sort", 1000, str(path), timing), out)
    recorded = common.fingerprint_of_cells([out])
    here = common.fingerprint_here()
    assert set(recorded) == set(here) == set(common.MACHINE)
    assert None not in recorded.values() and recorded["cpu_model"], recorded
    assert common.differences(recorded, here) == [], (recorded, here)
    facts = proc_facts()
    if facts:
        assert recorded["cpu_count"] == facts["cpu_count"], (recorded, facts)
        assert recorded["ram_gb"] == pytest.approx(facts["ram_gb"], rel=1e-3), (recorded, facts)
