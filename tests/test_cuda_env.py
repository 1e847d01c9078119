"""The pinned CUDA sets resolve, each with one CUDA major (``make check-cuda-env``).

The ``cuda_env`` tests run pip's resolver as a GPU host would (``pip install --dry-run
--ignore-installed --report``, no pip configuration file, pip's default index only) on
envs/requirements-cuda.txt and envs/requirements-cuda-tensorflow.txt. pip downloads the
wheels it needs metadata from, GBs for these sets where the index offers no separate metadata
files, so they take minutes: conftest.py leaves them out unless ``-m`` names ``cuda_env``.
They are skipped when the host is not Linux x86_64 (pip resolves the environment markers of
the host it runs on) or when no index answers. The unit tests of the report reading run always.

Reading pip's report and a requirements file lives here, beside the only check that needs it,
rather than in the package: numbench itself never resolves an environment.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
#: the CUDA major each set is documented for (its header and the README: driver >= 580 for 13)
SETS = {
    "envs/requirements-cuda.txt": 13,
    "envs/requirements-cuda-tensorflow.txt": 12,
}
#: packages that must carry that CUDA major in each set
EXPECTED = {
    "envs/requirements-cuda.txt": (
        "cuda-toolkit",  # torch's CUDA runtime
        "jax-cuda13-plugin",
        "cupy-cuda13x",
        "cuda-bindings",  # numba-cuda's
        "nvidia-cudnn-cu13",
    ),
    "envs/requirements-cuda-tensorflow.txt": ("nvidia-cudnn-cu12", "nvidia-cuda-runtime-cu12"),
}
PROBE_TIMEOUT_S = 60
RESOLVE_TIMEOUT_S = 1800


# -- reading a pip report and a requirements file (no network) ------------------------------------
#: ``-cu12`` / ``-cu13`` (nvidia-cudnn-cu13), ``cuda13`` (jax-cuda13-plugin), ``cuda13x``
#: (cupy-cuda13x) as one dash-separated part of a package name
_NAME_TAG = re.compile(r"(?:^|-)cu(?:da)?(\d{2,3})x?(?:-|$)")
#: ``+cu130`` (a PyTorch-index torch), ``+cuda12...`` (old jaxlib) in a local version
_LOCAL_TAG = re.compile(r"^cu(?:da)?(\d{2,3})")
#: packages whose version is the CUDA release itself (cuda-toolkit 13.0.3, nvidia-cuda-nvcc
#: 13.0.88); names starting with ``nvidia-cuda-`` count too. Others without a tag in the name
#: (nvidia-cufft 12.x, nvidia-curand 10.x) carry their own numbering and are not counted.
_VERSIONED_AS_CUDA = frozenset(
    {
        "cuda-toolkit",
        "cuda-bindings",
        "cuda-python",
        "nvidia-cublas",
        "nvidia-nvjitlink",
        "nvidia-nvvm",
        "nvidia-nvtx",
        "nvidia-nvfatbin",
        "nvidia-nvptxcompiler",
    }
)

#: pip settings that would add or replace an index (or a local wheel folder, or constraints);
#: dropped so that the resolve sees pip's default index only
_PIP_SOURCE_VARIABLES = (
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_FIND_LINKS",
    "PIP_NO_INDEX",
    "PIP_CONSTRAINT",
    "PIP_ONLY_BINARY",
    "PIP_NO_BINARY",
    "PIP_TARGET",
    "PIP_PREFIX",
    "PIP_USER",
)

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*==\s*([^\s;#]+)")


def normalize(name: str) -> str:
    """A package name as PEP 503 compares it (``tensorflow_cpu`` == ``tensorflow-cpu``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _major(digits: str) -> int:
    # cu12 / cuda13 -> 12 / 13; cu118 / cu130 -> 11 / 13 (the last digit is the minor)
    return int(digits if len(digits) == 2 else digits[:-1])


def cuda_major(name: str, version: str) -> int | None:
    """The CUDA major a package is built for, or None when its name and version do not say."""
    name = normalize(name)
    tag = _NAME_TAG.search(name)
    if tag:
        return _major(tag.group(1))
    public, _, local = version.partition("+")
    tag = _LOCAL_TAG.match(local)
    if tag:
        return _major(tag.group(1))
    if name in _VERSIONED_AS_CUDA or name.startswith("nvidia-cuda-"):
        first = public.split(".")[0]
        return int(first) if first.isdigit() else None
    return None


def resolved(report: Mapping) -> dict[str, str]:
    """Normalized name -> version of every package in a pip ``--report``."""
    return {
        normalize(item["metadata"]["name"]): item["metadata"]["version"]
        for item in report.get("install", [])
    }


def cuda_majors(report: Mapping) -> dict[int, list[str]]:
    """CUDA major -> the packages (``name==version``) of a pip ``--report`` built for it.

    One key is a coherent set; two or more mean two CUDA generations in one environment.
    """
    majors: dict[int, list[str]] = {}
    for name, version in sorted(resolved(report).items()):
        major = cuda_major(name, version)
        if major is not None:
            majors.setdefault(major, []).append(f"{name}=={version}")
    return dict(sorted(majors.items()))


def mixed_cuda(report: Mapping) -> str | None:
    """None for a report with at most one CUDA major; else a message naming them all."""
    majors = cuda_majors(report)
    if len(majors) <= 1:
        return None
    return "more than one CUDA major: " + "; ".join(
        f"CUDA {major}: {', '.join(names)}" for major, names in majors.items()
    )


def pins(path: str | os.PathLike) -> dict[str, str]:
    """Normalized name -> version of every ``name[extras]==version`` line of a requirements file."""
    found = {}
    for line in Path(path).read_text().splitlines():
        match = _PIN.match(line.strip())
        if match:
            found[normalize(match.group(1))] = match.group(3)
    return found


def pin_differences(path: str | os.PathLike, report: Mapping) -> list[str]:
    """What keeps a requirements file from pinning exactly the set pip resolved from it."""
    pinned, got = pins(path), resolved(report)
    problems = [f"{n}=={v} resolved but not pinned" for n, v in got.items() if n not in pinned]
    problems += [f"{n} pinned but not resolved" for n in pinned if n not in got]
    problems += [
        f"{n} pinned {pinned[n]} but resolved {v}"
        for n, v in got.items()
        if n in pinned and pinned[n] != v
    ]
    return sorted(problems)


def public_index_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a pip that sees its default index only.

    No pip configuration file (``PIP_CONFIG_FILE`` set to the null device) and no index, link
    or constraint variables; proxies, certificates and timeouts are kept.
    """
    env = dict(os.environ if environ is None else environ)
    for key in _PIP_SOURCE_VARIABLES:
        env.pop(key, None)
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


# -- unit tests of the reading (no network) -------------------------------------------------------
def _report(*packages: str) -> dict:
    """A pip ``--report`` with these ``name==version`` packages in ``install``."""
    items = []
    for spec in packages:
        name, version = spec.split("==")
        items.append({"metadata": {"name": name, "version": version}, "requested": False})
    return {"version": "1", "install": items}


@pytest.mark.parametrize(
    "name,version,major",
    [
        ("nvidia-cudnn-cu13", "9.20.0.48", 13),
        ("nvidia_nccl_cu12", "2.32.3", 12),
        ("jax-cuda13-plugin", "0.10.2", 13),
        ("jax-cuda12-pjrt", "0.10.2", 12),
        ("cupy-cuda12x", "14.2.0", 12),
        ("cupy-cuda13x", "14.2.0", 13),
        ("cuda-toolkit", "13.0.3.0", 13),
        ("cuda-bindings", "12.9.4", 12),
        ("nvidia-cuda-runtime", "13.0.96", 13),
        ("nvidia-cuda-nvcc", "13.0.88", 13),
        ("nvidia-cublas", "13.1.1.3", 13),
        ("torch", "2.13.0+cu130", 13),
        ("torch", "2.6.0+cu118", 11),
        ("jaxlib", "0.4.20+cuda12.cudnn89", 12),
        # no CUDA major in the name or the version
        ("torch", "2.13.0", None),
        ("nvidia-cufft", "12.0.0.61", None),
        ("nvidia-curand", "10.4.0.35", None),
        ("numba-cuda", "0.30.4", None),
        ("cuda-pathfinder", "1.9.0", None),
        ("numpy", "2.4.6", None),
    ],
)
def test_cuda_major_of_a_package(name, version, major):
    assert cuda_major(name, version) == major


def test_one_cuda_major_is_coherent():
    report = _report(
        "torch==2.13.0",
        "cuda-toolkit==13.0.3.0",
        "nvidia-cudnn-cu13==9.20.0.48",
        "jax-cuda13-plugin==0.10.2",
        "cupy-cuda13x==14.2.0",
        "nvidia-cufft==12.0.0.61",
        "numpy==2.4.6",
    )
    assert cuda_majors(report) == {
        13: [
            "cuda-toolkit==13.0.3.0",
            "cupy-cuda13x==14.2.0",
            "jax-cuda13-plugin==0.10.2",
            "nvidia-cudnn-cu13==9.20.0.48",
        ]
    }
    assert mixed_cuda(report) is None


def test_two_cuda_majors_are_flagged():
    # the set of issue 14: torch's CUDA 13 beside cupy-cuda12x[ctk] and TensorFlow's CUDA 12
    report = _report(
        "torch==2.13.0",
        "cuda-toolkit==13.0.3.0",
        "nvidia-cudnn-cu13==9.20.0.48",
        "cupy-cuda12x==14.2.0",
        "nvidia-cudnn-cu12==9.28.0.42",
        "tensorflow==2.21.0",
    )
    majors = cuda_majors(report)
    assert sorted(majors) == [12, 13]
    assert majors[12] == ["cupy-cuda12x==14.2.0", "nvidia-cudnn-cu12==9.28.0.42"]
    message = mixed_cuda(report)
    assert message is not None
    assert "CUDA 12: cupy-cuda12x==14.2.0" in message
    assert "CUDA 13: cuda-toolkit==13.0.3.0" in message


def test_no_cuda_at_all():
    report = _report("numpy==2.4.6", "tensorflow-cpu==2.21.0", "torch==2.13.0")
    assert cuda_majors(report) == {}
    assert mixed_cuda(report) is None


def test_pin_differences(tmp_path):
    req = tmp_path / "req.txt"
    req.write_text(
        "# a comment\n"
        "jax[cuda13]==0.10.2\n"
        "tensorflow_cpu==2.21.0  # a note\n"
        "numpy==2.4.5\n"
        "gone==1.0\n"
    )
    assert pins(req) == {
        "jax": "0.10.2",
        "tensorflow-cpu": "2.21.0",
        "numpy": "2.4.5",
        "gone": "1.0",
    }
    report = _report("jax==0.10.2", "tensorflow-cpu==2.21.0", "numpy==2.4.6", "extra-dep==3")
    assert pin_differences(req, report) == [
        "extra-dep==3 resolved but not pinned",
        "gone pinned but not resolved",
        "numpy pinned 2.4.5 but resolved 2.4.6",
    ]


def test_public_index_env_drops_local_sources():
    env = public_index_env(
        {
            "PATH": "/usr/bin",
            "PIP_FIND_LINKS": "/some/wheels",
            "PIP_EXTRA_INDEX_URL": "file:///some/index",
            "PIP_INDEX_URL": "https://mirror.invalid/simple",
            "PIP_CERT": "/some/ca.pem",
        }
    )
    assert "PIP_FIND_LINKS" not in env
    assert "PIP_EXTRA_INDEX_URL" not in env
    assert "PIP_INDEX_URL" not in env
    assert env["PIP_CERT"] == "/some/ca.pem"
    assert env["PATH"] == "/usr/bin"
    assert Path(env["PIP_CONFIG_FILE"]).name in ("null", "nul")


def test_the_sets_are_documented():
    # every set the check resolves is a full pin list, and its header names the driver
    for rel in SETS:
        text = (REPO / rel).read_text()
        assert "driver >= 580" in text or "driver >= 525" in text, rel
        assert len(pins(REPO / rel)) > 50, rel


# -- the resolve (network, minutes) ---------------------------------------------------------------
def _pip(*args: str, timeout: float, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pip", *args],
        env=public_index_env(),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def public_index(tmp_path_factory):
    """Skip unless this host is a Linux x86_64 one and pip's default index answers."""
    if sys.platform != "linux" or platform.machine() != "x86_64":
        pytest.skip(
            f"the CUDA sets are for Linux x86_64 and pip resolves this host's markers "
            f"({sys.platform} {platform.machine()})"
        )
    dest = tmp_path_factory.mktemp("probe")
    try:
        probe = _pip(
            "download",
            "--no-deps",
            "--no-cache-dir",
            "--only-binary=:all:",
            "--timeout",
            "10",
            "--retries",
            "0",
            "--dest",
            str(dest),
            "six",
            timeout=PROBE_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        pytest.skip(f"pip's default index did not answer within {PROBE_TIMEOUT_S} s")
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["no message"])[-1]
        pytest.skip(f"pip's default index cannot be reached: {last}")


@pytest.mark.cuda_env
@pytest.mark.parametrize("rel", list(SETS))
def test_set_resolves_with_one_cuda_major(rel, public_index, tmp_path):
    out = tmp_path / "report.json"
    proc = _pip(
        "install",
        "--dry-run",
        "--ignore-installed",
        "--progress-bar",
        "off",
        "--report",
        str(out),
        "-r",
        rel,
        cwd=REPO,
        timeout=RESOLVE_TIMEOUT_S,
    )
    assert proc.returncode == 0, f"pip cannot resolve {rel}:\n{proc.stderr[-4000:]}"
    report = json.loads(out.read_text())

    problem = mixed_cuda(report)
    assert problem is None, f"{rel}: {problem}"
    majors = cuda_majors(report)
    assert list(majors) == [SETS[rel]], f"{rel}: CUDA majors {majors}"
    for name in EXPECTED[rel]:
        assert any(p.startswith(f"{name}==") for p in majors[SETS[rel]]), (rel, name)
    assert pin_differences(REPO / rel, report) == [], rel
