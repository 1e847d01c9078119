"""Checks of the pinned CUDA sets (envs/requirements-cuda*.txt) against pip's resolver.

pip resolves a set in a dry run (``pip install --dry-run --ignore-installed --report``), and
the functions here read its report: which CUDA major each resolved package is built for, and
whether the file pins exactly the packages pip resolved. No network here; the resolve itself
is in tests/test_cuda_env.py (``make check-cuda-env``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

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
