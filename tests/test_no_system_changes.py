"""The test suite changes nothing on the machine it runs on: no system package is installed
by a test or by ``make test`` (Slurm, munge and Chromium are ``.ci/run``'s to install)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE_MANAGERS = ("apt-get", "apt ", "dpkg -i", "yum ", "dnf ")


def _places() -> list[Path]:
    return [*sorted((REPO / "tests").glob("*.py")), REPO / "Makefile"]


@pytest.mark.parametrize("path", _places(), ids=lambda p: p.name)
def test_no_test_and_no_make_target_calls_a_package_manager(path):
    if path == Path(__file__).resolve():
        return
    text = path.read_text()
    found = [word.strip() for word in PACKAGE_MANAGERS if word in text]
    assert not found, f"{path.name} calls {found}: tests must skip with the reason instead"
