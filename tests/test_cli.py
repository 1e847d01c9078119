"""The ``numbench`` command: its subcommands, as a user types them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO

ENV = {**os.environ, "PYTHONPATH": str(REPO / "src")}


def numbench(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "numbench", *args],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_help_lists_every_command():
    proc = numbench("--help")
    assert proc.returncode == 0, proc.stderr
    for command in ("compare", "offsite", "unlock", "history", "site"):
        assert command in proc.stdout
    steps = numbench("offsite", "--help")
    assert steps.returncode == 0 and all(s in steps.stdout for s in ("plan", "run", "import"))


def test_the_installed_console_script_is_the_same_command():
    """``make`` installs numbench into the environment: the ``numbench`` script beside this
    interpreter answers as ``python -m numbench`` does."""
    script = Path(sys.executable).with_name("numbench")
    assert script.exists() or shutil.which("numbench"), "numbench is not installed (make venv)"
    proc = subprocess.run(
        [str(script), "--help"], capture_output=True, text=True, env=ENV, timeout=120
    )
    assert proc.returncode == 0 and "compare" in proc.stdout, proc.stderr


def test_unlock_without_a_lock_says_so(tmp_path):
    proc = numbench("unlock", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "resume: no lock"


def test_an_unknown_command_is_a_usage_error_naming_it():
    proc = numbench("benchmark")
    assert proc.returncode == 2
    assert "invalid choice: 'benchmark'" in proc.stderr
