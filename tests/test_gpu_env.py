"""benchmarks/gpu_env.sh, the environment carried to a lent GPU host: what can be checked
without an index, a GPU or a venv made.

Nothing here downloads or installs: the script's ``pins`` reads envs/requirements-cpu.txt (and,
given a wheelhouse, a Snakemake wheel's metadata), and its usage errors return before pip runs.
Every call runs with ``PIP_NO_INDEX=1`` all the same. The wheelhouse itself (``make
gpu-wheelhouse``, git-ignored) is checked where one has been made here, and skipped otherwise:
CI makes none. The download, the offline install and a run are docs/running.md's to record.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "gpu_env.sh"
CPU_SET = REPO / "envs" / "requirements-cpu.txt"
WHEELHOUSE = REPO / ".gpu-wheels"
#: what a call may carry to the host, in all (docs/running.md)
CARRY_MIB = 64


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def cpu_pins() -> dict[str, str]:
    pins = {}
    for line in CPU_SET.read_text().splitlines():
        name, sep, version = line.split("#")[0].strip().partition("==")
        if sep:
            pins[norm(name)] = version
    return pins


def gpu_env(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable, "PIP_NO_INDEX": "1"}
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def pinned(output: str) -> dict[str, str]:
    """NAME==VERSION lines of ``pins`` -> {normalised name: version}."""
    found = {}
    for line in output.splitlines():
        name, sep, version = line.partition("==")
        if sep and " " not in name:
            found[norm(name)] = version
    return found


def test_the_pins_are_the_cpu_sets():
    done = gpu_env("pins")
    assert done.returncode == 0, done.stderr
    pins, cpu = pinned(done.stdout), cpu_pins()
    assert pins["snakemake"] == cpu["snakemake"]
    assert pins["numpy"] == cpu["numpy"]
    assert pins["connection-pool"] == cpu["connection-pool"]
    assert "left out: pulp" in done.stdout


def test_the_numpy_pin_is_below_2_5_for_numba_cuda():
    major, minor = (int(p) for p in pinned(gpu_env("pins").stdout)["numpy"].split(".")[:2])
    assert (major, minor) < (2, 5)


def test_snakemakes_requirements_are_read_from_its_wheel_without_pulp_and_extras(tmp_path):
    version = cpu_pins()["snakemake"]
    metadata = "\n".join(
        [
            "Metadata-Version: 2.4",
            "Name: snakemake",
            f"Version: {version}",
            "Requires-Dist: pyyaml",
            "Requires-Dist: pulp<3.4,>=2.3.1",
            "Requires-Dist: docutils<0.23,>=0.20",
            'Requires-Dist: eido; extra == "pep"',
        ]
    )
    wheel = tmp_path / f"snakemake-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(f"snakemake-{version}.dist-info/METADATA", metadata)
    done = gpu_env("pins", str(tmp_path))
    assert done.returncode == 0, done.stderr
    required = [line for line in done.stdout.splitlines() if line.startswith("requires: ")]
    assert required == ["requires: pyyaml", "requires: docutils<0.23,>=0.20"]


@pytest.mark.parametrize(
    "args",
    [
        (),
        ("install",),
        ("pins", "a", "b"),
        ("download", "a", "b"),
        ("setup", "a", "b", "c"),
        ("run", "x"),
    ],
    ids=lambda a: " ".join(a) or "nothing",
)
def test_a_wrong_call_is_a_usage_error(args):
    done = gpu_env(*args)
    assert done.returncode == 2
    assert "usage: gpu_env.sh" in done.stderr


def test_setup_without_a_wheelhouse_says_so_and_makes_no_venv(tmp_path):
    done = gpu_env("setup", str(tmp_path / "none"), str(tmp_path / "venv"), cwd=tmp_path)
    assert done.returncode == 2
    assert "no wheelhouse" in done.stderr
    assert not (tmp_path / "venv").exists()


def test_setup_with_a_wheelhouse_without_snakemake_says_so(tmp_path):
    done = gpu_env("setup", str(tmp_path), str(tmp_path / "venv"), cwd=tmp_path)
    assert done.returncode == 2
    assert "no Snakemake wheel" in done.stderr
    assert not (tmp_path / "venv").exists()


def test_run_needs_a_config_file_and_a_venv(tmp_path):
    done = gpu_env("run", str(tmp_path / "missing.yaml"), str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 2
    assert "no config file" in done.stderr
    config = tmp_path / "grid.yaml"
    config.write_text("operations: {elementwise: {sizes: [1000]}}\n")
    done = gpu_env("run", str(config), str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 2
    assert "no venv" in done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(not WHEELHOUSE.is_dir(), reason="no wheelhouse here (make gpu-wheelhouse)")
def test_the_wheelhouse_made_here_fits_the_carry_and_holds_the_pins():
    wheels = sorted(WHEELHOUSE.glob("*.whl"))
    cpu = cpu_pins()
    versions = {norm(w.name.split("-")[0]): w.name.split("-")[1] for w in wheels}
    assert versions["snakemake"] == cpu["snakemake"]
    assert versions["numpy"] == cpu["numpy"]
    assert "pulp" not in versions
    assert {n: v for n, v in versions.items() if cpu.get(n) != v} == {}
    size_mib = sum(w.stat().st_size for w in wheels) / 2**20
    assert size_mib < CARRY_MIB / 2, f"{size_mib:.1f} MiB"
