"""Shared by the benchmark scripts: the machine's description, each script's figures as a
Markdown section (its command, date and machine under it) for docs/history.md, and a scratch
copy of the workflow with Snakemake run in it."""

from __future__ import annotations

import datetime as dt
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
#: the tests' slowdown (every call stretched by ``NUMBENCH_TEST_SLOWDOWN``), registered where
#: ``NUMBENCH_ADAPTERS`` names this file
SLOWED = ROOT / "tests" / "adapters" / "slowed.py"
#: what a scratch copy of the workflow holds
PARTS = ("Snakefile", "config", "workflow", "scripts", "src", "profiles", "envs")


def machine() -> str:
    from numbench.libraries import cpu_model

    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{cpu_model()}, {os.cpu_count()} cores, {mem_gib:.0f} GiB RAM, "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}"
    )


def markdown_section(command: str, body: str) -> str:
    """``body`` with the command, the date and the machine that made it, as one Markdown
    section: a measured figure goes into the docs once, with its date and machine."""
    today = dt.date.today().isoformat()
    return f"{body.rstrip()}\n\nCommand: `{command}`  \nDate: {today}  \nMachine: {machine()}\n"


def publish(script: str, body: str, markdown: bool, configfile: str | None) -> None:
    """Print the figures; with ``--markdown``, as a section ready for docs/history.md."""
    if not markdown:
        print(body)
        return
    cmd = f"python benchmarks/{script}" + (f" --configfile {configfile}" if configfile else "")
    print(markdown_section(cmd, body))


def copy_workflow(dst: Path) -> Path:
    """The workflow's parts (``PARTS``) of this checkout copied into ``dst``."""
    dst.mkdir(parents=True)
    for name in PARTS:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dst / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dst / name)
    return dst


def snakemake_env(wd: Path) -> dict[str, str]:
    """The environment of a Snakemake run in the scratch copy ``wd``: this Python's tools
    first on PATH, and a timing lock of the copy's own."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["NUMBENCH_TIMING_LOCK"] = str(wd / ".timing.lock")
    return env


def snakemake(wd: Path, *args: str) -> float:
    """Run Snakemake in the scratch copy ``wd`` and return its wall time in seconds; stop
    with its error's end if it fails."""
    env = snakemake_env(wd)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", *args], cwd=wd, env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"snakemake {' '.join(args)} failed:\n{proc.stderr[-4000:]}")
    return wall


def workflow_spec(library, operation, size, inputs_path, timing: dict, threads: int = 1, own=None):
    """The spec of one cell as the workflow measures it: CPU, float64, the steady allocator,
    one process, unpaired. ``own``: (the file, the seed) of a user's operation with its own
    input maker (the example's ``eos``), else a built-in one."""
    file, seed = (str(own[0]), int(own[1])) if own else (None, None)
    from numbench import operations
    from numbench.spec import CELL_CONTRACT, CellSpec, ReplicateSettings
    from numbench.timing import TimingSettings

    return CellSpec(
        library=library,
        device="cpu",
        operation=operation,
        operation_file=file,
        operation_hash=operations.load(operation, file).sha256,
        size=int(size),
        dtype="float64",
        threads=threads,
        inputs=str(inputs_path),
        params={},
        timing=TimingSettings(**timing),
        timeout_s=600.0,
        memory_limit_mb=None,
        allocator="steady",
        replicates=ReplicateSettings(
            min=1,
            max=1,
            target_ci=1.0,
            stop_margin=1.1,
            early_rounds=0,
            round_sd=0.03,
            max_cpu_taken=0.1,
            lockstep=False,
            max_cell_s=None,
        ),
        paired_with=None,
        contract=CELL_CONTRACT,
        seed=seed,
    )


def cell_median(
    library, operation, size, inputs_path, out, timing: dict, threads: int = 1, own=None
):
    """Measure one cell the workflow's way (a supervised fresh worker process, one process,
    unpaired) into ``out`` and return its median latency per call in seconds (``own``: as
    ``workflow_spec``'s)."""
    import pandas as pd

    from numbench.measure.supervisor import run_cell

    spec = workflow_spec(library, operation, size, inputs_path, timing, threads, own)
    result = run_cell(spec, out, lock=str(Path(out).parent / "lock"))
    if result.status != "ok":
        cell = f"{library}:{operation}:{size}"
        raise RuntimeError(f"{cell} is {result.status}: {result.meta.error}")
    samples = pd.read_parquet(out)
    return float(samples.loc[samples["mode"] == "latency", "seconds"].median())
