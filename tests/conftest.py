"""Shared fixtures. The package is imported from ./src (pytest's pythonpath setting)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def copy_workflow(dst: Path) -> Path:
    """Copy the workflow (no results, no logs) into ``dst``, to run Snakemake in."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in ("Snakefile", "config", "workflow", "scripts", "src", "profiles", "envs", "tests"):
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dst / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.exists():
            shutil.copy2(src, dst / name)
    return dst


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A fresh copy of the workflow in a temporary folder."""
    return copy_workflow(tmp_path / "wf")


def snakemake(workdir: Path, *args: str, timeout: float = 1800, env: dict | None = None):
    """Run Snakemake of this interpreter's environment in ``workdir``; return the process."""
    full_env = dict(os.environ)
    full_env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{full_env.get('PATH', '')}"
    # Cells of a test queue on their own lock, not on a concurrent real run's.
    full_env["NUMBENCH_TIMING_LOCK"] = str(workdir / ".timing.lock")
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args],
        cwd=workdir,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
