"""Offsite plans and archives are trusted in nothing: crafted ones are refused, by a message
that names the member or the path, and nothing is written, inside the workflow or beside it.

The crafted archives start from a real one (the ``remote`` fixture of test_offsite.py: plan
here, run on the 'other host'), so that each is refused for the one thing crafted into it.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import stat
import tarfile
from pathlib import Path

import pytest
from conftest import copy_workflow
from test_offsite import CELLS, TINY, assert_clean_error, offsite, remote_run

from numbench.offsite import OffsiteError, archive, check_plan, plan_hash, unpack_archive

GIB = 2**30


# -- helpers -------------------------------------------------------------------------------------
def tree(folder: Path) -> dict[str, tuple]:
    """Every path under ``folder`` (files, folders, links) with its kind, size and mtime;
    Python's byte-code caches left out."""
    out = {}
    for path in sorted(folder.rglob("*")):
        if "__pycache__" in path.parts:
            continue
        st = path.lstat()
        out[str(path.relative_to(folder))] = (stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns)
    return out


def members_of(path: Path) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}


def write_archive(
    dst: Path,
    members: dict[str, bytes],
    extra: tuple[tarfile.TarInfo, ...] = (),
    declared_only: tarfile.TarInfo | None = None,
) -> Path:
    """A .tar.gz of ``members``, then ``extra`` members (links, devices, ...), then one header
    ``declared_only`` written with a short body: its size is what it claims, not what it has."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for info in extra:
            tar.addfile(info)
        if declared_only is not None:
            tar.fileobj.write(declared_only.tobuf(tar.format, tar.encoding, tar.errors))
            tar.fileobj.write(b"x" * tarfile.BLOCKSIZE)
    dst.write_bytes(gzip.compress(raw.getvalue()))
    return dst


def with_plan(members: dict[str, bytes], change) -> dict[str, bytes]:
    """The members with their plan changed by ``change(plan)``, the plan_hash recomputed (it is
    no signature) and the manifest's with it."""
    plan = json.loads(members["plan.json"])
    change(plan)
    plan["plan_hash"] = plan_hash(plan)
    manifest = json.loads(members["manifest.json"])
    manifest["plan_hash"] = plan["plan_hash"]
    return {
        **members,
        "plan.json": json.dumps(plan).encode(),
        "manifest.json": json.dumps(manifest).encode(),
    }


@pytest.fixture
def place(remote, tmp_path, monkeypatch):
    """A fresh workflow folder ``wf`` beside a folder ``outside`` holding one file."""
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    wf = copy_workflow(tmp_path / "wf")
    (wf / "tiny.yaml").write_text(TINY)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "mine.txt").write_text("the user's own file\n")
    return tmp_path, wf


def import_refused(place, bad: Path, *phrases: str) -> None:
    """`offsite import` of ``bad`` fails cleanly, saying ``phrases``, and writes nothing."""
    base, wf = place
    before = tree(base)
    proc = offsite(wf, "import", str(bad), "--configfile", "tiny.yaml")
    assert_clean_error(proc, *phrases)
    assert tree(base) == before


# -- import: member names, types and sizes -------------------------------------------------------
@pytest.mark.parametrize("log", ["logs/../../x", "logs/../../outside/planted.log"])
def test_a_climbing_log_is_refused(remote, place, log):
    """The plan names a cell's log climbing out with `..` (its plan_hash does not cover the
    logs) and the archive holds a member of that name."""
    base, _ = place
    members = members_of(remote["archive"])
    plan = json.loads(members["plan.json"])
    del members[plan["cells"][0]["log"]]  # the cell's own log, replaced by the planted one
    plan["cells"][0]["log"] = log
    assert plan_hash(plan) == plan["plan_hash"]  # the hash still matches
    members = {**members, "plan.json": json.dumps(plan).encode(), log: b"planted\n"}
    bad = write_archive(base / "climbing.tar.gz", members)
    import_refused(place, bad, f"member {log!r}")
    assert not (base / "x").exists() and not (base / "outside" / "planted.log").exists()


def test_an_absolute_log_is_refused(remote, place):
    base, _ = place
    target = base / "outside" / "absolute.log"
    log = f"logs/{target}"  # logs//tmp/...: joined to logs/, an absolute path wins
    assert log.startswith("logs//")
    members = members_of(remote["archive"])
    plan = json.loads(members["plan.json"])
    del members[plan["cells"][0]["log"]]
    plan["cells"][0]["log"] = log
    members = {**members, "plan.json": json.dumps(plan).encode(), log: b"planted\n"}
    bad = write_archive(base / "absolute.tar.gz", members)
    import_refused(place, bad, f"member {log!r}", "absolute")
    assert not target.exists()


def _link_or_device(kind: str, name: str, base: Path) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    if kind == "symlink":
        info.type, info.linkname = tarfile.SYMTYPE, str(base / "outside" / "mine.txt")
    elif kind == "hardlink":
        info.type, info.linkname = tarfile.LNKTYPE, str(base / "outside" / "mine.txt")
    elif kind == "fifo":
        info.type = tarfile.FIFOTYPE
    else:
        info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
    return info


@pytest.mark.parametrize(
    "kind, phrase",
    [
        ("symlink", "is a symbolic link"),
        ("hardlink", "is a hard link"),
        ("fifo", "is a fifo"),
        ("device", "is a device"),
    ],
)
def test_links_devices_and_fifos_are_refused(remote, place, kind, phrase):
    """A member under the name of a cell's own log (the name a run makes), but not a file."""
    base, _ = place
    name = CELLS[0].replace("results/", "logs/").replace(".parquet", ".log")
    members = {k: v for k, v in members_of(remote["archive"]).items() if k != name}
    bad = write_archive(base / f"{kind}.tar.gz", members, (_link_or_device(kind, name, base),))
    import_refused(place, bad, f"member {name!r} {phrase}")
    assert (base / "outside" / "mine.txt").read_text() == "the user's own file\n"


def test_a_member_declaring_a_gib_is_refused_from_its_header(remote, place):
    """The header says 1 GiB, the body holds 512 bytes: the size is read from the header and
    refused before any of the member is read (or the archive would read as truncated)."""
    base, _ = place
    name = CELLS[0]
    members = {k: v for k, v in members_of(remote["archive"]).items() if k != name}
    huge = tarfile.TarInfo(name)
    huge.size = GIB
    bad = write_archive(base / "huge.tar.gz", members, declared_only=huge)
    assert bad.stat().st_size < 1_000_000
    import_refused(
        place, bad, f"member {name!r} declares {GIB} bytes", "a member may hold at most 32 MiB"
    )


def test_the_archives_total_and_member_count_are_bounded(remote, tmp_path, monkeypatch):
    members = members_of(remote["archive"])
    good = write_archive(tmp_path / "good.tar.gz", members)
    names = list(members)

    def staging():
        folder = tmp_path / "staging"
        folder.mkdir()
        return folder

    monkeypatch.setattr(archive, "ARCHIVE_TOTAL_LIMIT_BYTES", sum(map(len, members.values())) - 1)
    with pytest.raises(OffsiteError, match=f"the members up to '{names[-1]}' declare"):
        unpack_archive(good, staging)
    monkeypatch.undo()
    monkeypatch.setattr(archive, "ARCHIVE_MEMBER_COUNT_LIMIT", len(members) - 1)
    with pytest.raises(OffsiteError, match=f"more than {len(members) - 1} members"):
        unpack_archive(good, staging)
    assert not (tmp_path / "staging").exists()  # refused from the headers: nothing made


def test_an_oversized_tar_header_record_is_refused(remote, tmp_path):
    """tarfile reads a pax header whole before the member is seen: its size is bounded too."""
    members = members_of(remote["archive"])
    big = tarfile.TarInfo(CELLS[0])
    big.pax_headers = {"comment": "x" * (2 * archive.TAR_HEADER_LIMIT_BYTES)}
    data = members.pop(CELLS[0])
    big.size = len(data)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(big, io.BytesIO(data))
    path = tmp_path / "pax.tar.gz"
    path.write_bytes(gzip.compress(raw.getvalue()))
    with pytest.raises(OffsiteError, match="a tar header record of .* bytes"):
        unpack_archive(path, lambda: tmp_path / "staging")
    assert not (tmp_path / "staging").exists()


def test_a_member_twice_is_refused(remote, tmp_path):
    members = members_of(remote["archive"])
    again = tarfile.TarInfo("plan.json")
    bad = write_archive(tmp_path / "twice.tar.gz", members, declared_only=again)
    with pytest.raises(OffsiteError, match="member 'plan.json' appears twice"):
        unpack_archive(bad, lambda: tmp_path / "staging")


def test_unpacked_members_get_the_mode_of_a_plain_write(remote, tmp_path):
    old = os.umask(0o027)
    try:
        staged = unpack_archive(remote["archive"], lambda: tmp_path / "staging")
    finally:
        os.umask(old)
    assert set(staged) == set(members_of(remote["archive"]))
    for member in staged.values():
        assert stat.S_IMODE(member.path.stat().st_mode) == 0o640
        assert member.path.is_relative_to(tmp_path / "staging")


# -- the plan: every path is the cell's own ------------------------------------------------------
def test_a_plan_naming_another_log_is_refused(remote):
    plan = json.loads((remote["there"] / "plan.json").read_text())
    check_plan(plan, "the plan")  # as made: accepted
    cell = plan["cells"][0]
    own = cell["log"]
    cell["log"] = "logs/../../elsewhere.log"
    with pytest.raises(OffsiteError, match=f"names the log '{cell['log']}'.*whose log is {own}"):
        check_plan(plan, "the plan")


def _crafted_plan(plan: dict, how: str, outside: Path) -> str:
    """Change ``plan`` as ``how`` says; return a phrase the refusal must hold."""
    cell = plan["cells"][0]
    if how == "cell-path":
        cell["path"] = "../../outside/evil.parquet"
        return "names the file '../../outside/evil.parquet'"
    if how == "cell-log":
        cell["log"] = "logs/../../../outside/evil.log"
        return "names the log 'logs/../../../outside/evil.log'"
    if how == "inputs-path":
        plan["inputs"][0]["path"] = str(outside / "inputs.npz")
        return f"names the inputs file '{outside / 'inputs.npz'}'"
    # a library that is a path: the cell's paths made of it would climb out
    cell["spec"]["library"] = "../../../outside"
    cell["path"] = (
        cell["path"]
        .replace("/numpy/", "/../../../outside/")
        .replace("/torch/", "/../../../outside/")
    )
    cell["log"] = cell["path"].replace("results/", "logs/").replace(".parquet", ".log")
    return "names no cell of numbench"


@pytest.mark.parametrize("how", ["cell-path", "cell-log", "inputs-path", "identity"])
def test_run_refuses_a_plan_whose_paths_escape(remote, tmp_path, monkeypatch, how):
    """The plan's hash is recomputed after the change, as anyone can: `run` still refuses it,
    before it makes its work folder."""
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    there, outside = tmp_path / "there", tmp_path / "outside"
    there.mkdir()
    outside.mkdir()
    with tarfile.open(remote["base"] / "bundle.tar.gz") as tar:
        tar.extractall(there, filter="data")
    plan = json.loads((there / "plan.json").read_text())
    phrase = _crafted_plan(plan, how, outside)
    plan["plan_hash"] = plan_hash(plan)
    (there / "plan.json").write_text(json.dumps(plan))
    before = tree(tmp_path)
    proc = remote_run(there, "plan.json", "--output", "cells.tar.gz")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "offsite run: error:" in proc.stderr and phrase in proc.stderr, proc.stderr
    assert tree(tmp_path) == before


def test_offsite_writes_files_with_the_mode_of_a_plain_write(tmp_path, monkeypatch):
    """`pack` and the plan's write go through ``numbench.contract.replacing``: the archive and
    the plan get 0666 less the umask, as a plain write gives, so a group sharing them can read
    (``mkstemp`` would give 0600)."""
    from numbench.contract import write_bytes_atomic
    from numbench.offsite.run import pack

    monkeypatch.chdir(tmp_path)
    old = os.umask(0o027)
    try:
        pack(tmp_path / "cells.tar.gz", {"plan_hash": "0"}, {"cells": {}}, [], [])
        write_bytes_atomic(b"{}", tmp_path / "plan.json")
    finally:
        os.umask(old)
    for name in ("cells.tar.gz", "plan.json"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o640, name


def test_run_stops_naming_the_cell_when_the_host_fails_it(remote, tmp_path):
    """A fault of the host (here: a lock file that is a link, refused) stops `offsite run`
    with the cell and its log named and no traceback; nothing is stored as the library's."""
    there = tmp_path / "there"
    there.mkdir()
    with tarfile.open(remote["base"] / "bundle.tar.gz") as tar:
        tar.extractall(there, filter="data")
    (there / ".timing.lock").symlink_to(tmp_path / "elsewhere")
    proc = remote_run(there, "plan.json", "--output", "cells.tar.gz")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "offsite run: error: results/cells/" in proc.stderr, proc.stderr
    assert "not of the library" in proc.stderr and "--resume" in proc.stderr
    assert not (tmp_path / "elsewhere").exists()
    assert not (there / "cells.tar.gz").exists()
