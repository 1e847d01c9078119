"""Making an environment of the config's ``environments``: a virtual environment whose own
packages (its pins) come before the base environment's.

``python -m venv`` makes it from the base interpreter; a ``.pth`` file in its site-packages
adds the base environment's site-packages *behind* its own (``site.addsitedir``, so the base
environment's own ``.pth`` files, numbench's editable install among them, work there too);
then ``pip install`` installs the pins into it. pip sees the base packages as installed: a
pin they already satisfy installs nothing, and one they do not is installed into the new
environment alone ("not uninstalling ... outside environment"), the base one untouched.
What the pins need beyond the base set comes with them.

The environment is checked before it is called made: every pin's package must be importable
metadata whose version the pin allows, and the worker's module must import. The file
``READY_FILE`` is written last, with the versions found, so a half-made environment is never
taken for a made one. Everything pip says goes to the job's log.
"""

from __future__ import annotations

import json
import shutil
import site
import subprocess
import sys
from pathlib import Path

from numbench.contract import write_text_atomic

#: the file in the environment's site-packages that adds the base environment's behind it
BASE_PTH = "numbench-base.pth"

CHECK = """
import importlib.metadata as md, json, sys
from packaging.requirements import Requirement
found = {}
for pin in json.loads(sys.argv[1]):
    req = Requirement(pin)
    try:
        version = md.version(req.name)
    except md.PackageNotFoundError:
        sys.exit(f"{req.name} is not installed in the environment")
    if req.specifier and not req.specifier.contains(version, prereleases=True):
        sys.exit(f"{req.name} {version} is installed, which {pin!r} does not allow")
    found[req.name] = version
import numbench.measure.worker
print(json.dumps(found))
"""


class EnvironmentBuildError(RuntimeError):
    """An environment that could not be made; the message says which and why."""


def site_packages(python: Path) -> Path:
    """The site-packages folder of the interpreter ``python``."""
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


def base_site_packages() -> list[str]:
    """The base environment's site-packages folders (this interpreter's)."""
    return [p for p in site.getsitepackages() if Path(p).is_dir()]


def _run(cmd: list[str], what: str, log=sys.stdout) -> subprocess.CompletedProcess:
    print("$ " + " ".join(cmd), file=log, flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True)
    log.write(done.stdout)
    log.write(done.stderr)
    log.flush()
    if done.returncode != 0:
        last = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
        raise EnvironmentBuildError(f"{what} failed (exit {done.returncode}): {last}")
    return done


def build(name: str, pins: list[str], folder: str | Path, ready: str | Path, src: Path) -> dict:
    """Make environment ``name`` in ``folder`` with ``pins``; write ``ready`` last. ``src``:
    the folder numbench is imported from (the worker's ``PYTHONPATH``)."""
    folder = Path(folder)
    if folder.exists():
        shutil.rmtree(folder)
    _run([sys.executable, "-m", "venv", str(folder)], f"environment {name}: python -m venv")
    python = folder / "bin" / "python"
    lines = [f"import site; site.addsitedir({p!r})" for p in base_site_packages()]
    (site_packages(python) / BASE_PTH).write_text("\n".join(lines) + "\n", encoding="utf-8")
    _run(
        [str(python), "-m", "pip", "install", "--disable-pip-version-check", *pins],
        f"environment {name}: pip install {' '.join(pins)}",
    )
    env_check = _run(
        [str(python), "-c", CHECK, json.dumps(pins)],
        f"environment {name}: checking its pins",
    )
    # the worker imports numbench from src as well; the check above used the base's install
    _run(
        [
            str(python),
            "-c",
            f"import sys; sys.path.insert(0, {str(src)!r}); import numbench.measure.worker",
        ],
        f"environment {name}: importing numbench's worker",
    )
    record = {
        "name": name,
        "pins": list(pins),
        "versions": json.loads(env_check.stdout.strip().splitlines()[-1]),
        "python": str(python),
        "base": base_site_packages(),
    }
    write_text_atomic(json.dumps(record, indent=2, sort_keys=True) + "\n", ready)
    return record
