"""The docs: the README stays short and the mkdocs site builds with --strict (every page in
the nav, every link and anchor resolving)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO

README_MAX_LINES = 200


def test_readme_stays_short():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"


def test_the_docs_site_builds_strictly(tmp_path: Path):
    mkdocs = Path(sys.executable).with_name("mkdocs")
    proc = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (tmp_path / "site" / "security" / "index.html").exists()
