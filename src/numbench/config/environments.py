"""``environments``: library versions (or settings) side by side, each in an environment of its own.

An environment is a list of requirement pins layered on the base set (the workflow's own
interpreter and its packages), and, if wanted, environment variables for its workers::

    environments:
      numpy-2.3: [numpy==2.3.*]            # pins only
      torch-2.12:
        pins: [torch==2.12.*]
        libraries: [torch]                 # whose cells it runs (default: see below)
        variables: {TORCH_LOGS: ""}        # set in its worker processes

A cell of an environment is a cell of the grid run under the environment's interpreter
(``Cell.environment``; its files are under ``LIBRARY@NAME``), measured in paired lockstep
rounds against the same library in the base environment, as a library is against the
baseline. Without the key the grid, its paths and its specs are what they were.

An environment with pins is a virtual environment in ``ENVS_DIR/NAME`` that sees the base
environment's packages behind its own (``build``, below), made once by the
workflow's ``environment`` job and reused by later runs. One without pins runs the base
interpreter, with its variables.

Its ``libraries`` default to the grid's libraries whose packages it pins (``jax`` for a pin
of ``jaxlib``, ``tensorflow`` for ``tensorflow-cpu``); where it pins none of them (a pin of
a dependency, or variables alone), to every library of the grid.

**Making one** (``build``, rule environment): a virtual environment whose own packages (its
pins) come before the base environment's.

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
import re
import shutil
import site
import subprocess
import sys
from pathlib import Path
from typing import Any

from numbench import libraries
from numbench.cells import ENVIRONMENT_PATTERN
from numbench.config import dims
from numbench.config.dims import ConfigError
from numbench.contract import write_text_atomic
from numbench.spec import SUPERVISOR_ENV, Environment

#: where the environments' virtual environments live, relative to the workflow's folder
ENVS_DIR = ".numbench/envs"
#: the file the ``environment`` job writes last, once the environment works
READY_FILE = "numbench-environment.json"
#: the name the base environment goes by in tables and the summary
BASE = "base"
#: the keys an environment's mapping may hold
KEYS = ("pins", "libraries", "variables")
#: distributions that belong to a library beside the one named after its module
EXTRA_DISTRIBUTIONS = {"jax": ("jaxlib",), "numba": ("llvmlite",)}
#: variables numbench sets in every worker itself: an environment may not change them
RESERVED = frozenset(
    {
        "PYTHONPATH",
        "PYTHONUNBUFFERED",
        "PYTHONHOME",
        "TMPDIR",
        SUPERVISOR_ENV,
        "NUMBENCH_TURNS",
        *libraries.thread_environment(1),
        *(k for name in libraries.ALLOCATORS for k in libraries.allocator_environment(name)),
    }
)
VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def python_of(name: str) -> str:
    """The interpreter of an environment with pins (relative to the workflow's folder)."""
    return f"{ENVS_DIR}/{name}/bin/python"


def ready_file(name: str) -> str:
    return f"{ENVS_DIR}/{name}/{READY_FILE}"


def distribution(pin: str) -> str:
    """The normalised distribution name a pin is for (PEP 503)."""
    from packaging.requirements import Requirement

    return re.sub(r"[-_.]+", "-", Requirement(pin).name).lower()


def library_distributions(library: str) -> set[str]:
    """The distributions whose pin makes an environment run ``library`` by default."""
    module = libraries.get(library).module.split(".")[0].lower()
    return {module, *EXTRA_DISTRIBUTIONS.get(module, ())}


def pinned_libraries(pins: list[str], grid_libraries: list[str], adapter_of=None) -> list[str]:
    """The grid's libraries whose distribution ``pins`` pin; ``adapter_of(library)``: the
    adapter a library (a variant's name) runs."""
    names = {distribution(p) for p in pins}

    def pinned(lib: str) -> bool:
        own = library_distributions(adapter_of(lib) if adapter_of else lib)
        return any(n in own or any(n.startswith(f"{d}-") for d in own) for n in names)

    return [lib for lib in grid_libraries if pinned(lib)]


def _normalise_one(name: str, entry: Any) -> dict:
    where = f"environments.{name}"
    if entry is None:
        entry = {}
    if isinstance(entry, str | list):
        entry = {"pins": entry}
    if not isinstance(entry, dict):
        raise ConfigError(
            f"{where} = {entry!r}: give a list of pins, or a mapping with {', '.join(KEYS)}"
        )
    unknown = sorted(set(entry) - set(KEYS))
    if unknown:
        raise ConfigError(
            f"unknown key {', '.join(map(repr, unknown))} under {where}; allowed keys: {', '.join(KEYS)}"
        )
    out = {}
    for key in ("pins", "libraries"):
        value = entry.get(key)
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if value is not None and not (
            isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value)
        ):
            raise ConfigError(f"{where}.{key} = {value!r} must be a list of strings")
        out[key] = None if value is None else [v.strip() for v in value]
    variables = entry.get("variables") or {}
    if not isinstance(variables, dict):
        raise ConfigError(f"{where}.variables = {variables!r} must be a mapping NAME: value")
    out["variables"] = {}
    for key, value in variables.items():
        if not isinstance(key, str) or not VARIABLE_NAME.fullmatch(key):
            raise ConfigError(f"{where}.variables: {key!r} is not a variable name")
        if key in RESERVED:
            raise ConfigError(
                f"{where}.variables.{key}: numbench sets {key} in every worker itself "
                "(threads, allocator, its own plumbing); use the config's keys for those"
            )
        if isinstance(value, dict | list) or value is None:
            raise ConfigError(f"{where}.variables.{key} = {value!r} must be a string or a number")
        out["variables"][key] = str(value).lower() if isinstance(value, bool) else str(value)
    out["pins"] = out["pins"] or []
    return out


def normalise_environments(value: Any) -> dict:
    """The ``environments`` mapping with every entry as {pins, libraries, variables}."""
    if value is None or value == "":
        return {}
    if not isinstance(value, dict):
        raise ConfigError(
            f"environments = {value!r} must be a mapping NAME: [pins] (config/README.md)"
        )
    return {str(name): _normalise_one(str(name), entry) for name, entry in value.items()}


def check_environments(cfg: dict) -> None:
    """Names, pins and libraries: each mistake named with its key. Fills each entry's
    default ``libraries``."""
    from packaging.requirements import InvalidRequirement

    for name, entry in cfg["environments"].items():
        where = f"environments.{name}"
        if not re.fullmatch(ENVIRONMENT_PATTERN, name) or name == BASE:
            raise ConfigError(
                f"{where}: {name!r} is not allowed as an environment's name; use letters, "
                f"digits, '.', '_' and '-', starting with a letter or digit, and not {BASE!r} "
                "(the base environment's)"
            )
        seen: dict[str, str] = {}
        for i, pin in enumerate(entry["pins"]):
            try:
                dist = distribution(pin)
            except InvalidRequirement as exc:
                raise ConfigError(
                    f"{where}.pins[{i}] = {pin!r} is not a requirement (like numpy==2.3.*): {exc}"
                ) from None
            if dist in seen:
                raise ConfigError(f"{where}.pins pins {dist} twice: {seen[dist]!r} and {pin!r}")
            seen[dist] = pin
        if entry["libraries"] is None:
            pinned = pinned_libraries(
                entry["pins"], cfg["libraries"], lambda lib: dims.adapter_of(cfg, lib)
            )
            entry["libraries"] = pinned or list(cfg["libraries"])
        for i, lib in enumerate(entry["libraries"]):
            if lib not in cfg["libraries"]:
                raise ConfigError(
                    f"{where}.libraries[{i}] = {lib!r} is not in the grid's libraries "
                    f"({', '.join(cfg['libraries'])}): an environment's cell is paired with "
                    "the same library in the base environment"
                )
        if not entry["pins"] and not entry["variables"]:
            raise ConfigError(
                f"{where} pins nothing and sets no variables: it would measure the base "
                "environment again; give it pins (or variables)"
            )


def environment(cfg: dict, name: str) -> Environment:
    """The ``Environment`` of a cell's spec."""
    entry = cfg["environments"][name]
    return Environment(
        name=name,
        pins=list(entry["pins"]),
        python=python_of(name) if entry["pins"] else None,
        variables=dict(entry["variables"]),
    )


def built_environments(cfg: dict) -> list[str]:
    """The environments with pins: each a virtual environment the workflow makes."""
    return [name for name, entry in cfg["environments"].items() if entry["pins"]]


# -- making an environment (rule environment) ------------------------------------------
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
