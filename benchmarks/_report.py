"""Shared by the benchmark scripts: the machine's description and docs/performance.md."""

from __future__ import annotations

import os
import platform
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
REPORT = ROOT / "docs" / "performance.md"
HEADER = """# Performance: accuracy of the timings and the workflow's own cost

Each section below is written by a script in `benchmarks/` (scripts that print figures, not
tests: these machines are shared and noisy, so compare ratios measured in one run). Rerun a
script to refresh its section; the command and the machine are given with each.
"""


def default_config() -> dict:
    """The default config (``config/config.yaml``), checked as the workflow checks it."""
    from numbench.config import load_file

    return load_file(ROOT / "config" / "config.yaml", ROOT / "workflow/schemas/config.schema.yaml")


def prepared_timer(library: str, operation: str, size: int, cfg: dict):
    """In a benchmark's child process: pin one CPU, load ``library``, make the seeded inputs
    of (operation, size), compile, make the first call and calibrate as a worker does
    (float64, one thread, the operation's default parameters). Returns (timer, loops)."""
    from numbench import inputs, operations
    from numbench.libraries import get, pin_cpus
    from numbench.timing import Timer

    pin_cpus(1)
    adapter = get(library)("cpu", "float64", 1)
    adapter.load()
    op = operations.get(operation)
    data = inputs.make(operation, size, cfg["seed"], None)
    args = tuple(adapter.to_device(data[name]) for name in op.input_names)
    fn = adapter.compile(op.build(adapter.family, adapter.xp, "float64", op.resolve_params(None)))
    timer = Timer(fn, args, adapter.sync)
    timer.first_call()
    return timer, timer.calibrate(cfg["timing"]["min_sample_time_s"])


def child_environment(allocator: str) -> dict[str, str]:
    """The environment of a benchmark's child process: one thread for every library, and
    the allocator's settings as a worker gets them (none inherited under ``system``)."""
    from numbench.libraries import STEADY_MALLOC, allocator_environment, thread_environment

    env = {k: v for k, v in os.environ.items() if k not in STEADY_MALLOC}
    env.update(thread_environment(1))
    env.update(allocator_environment(allocator))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    return env


def machine() -> str:
    from numbench.libraries import cpu_model

    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{cpu_model()}, {os.cpu_count()} cores, {mem_gib:.0f} GiB RAM, "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}"
    )


def write_section(name: str, command: str, body: str) -> None:
    """Replace (or append) the section called ``name`` in docs/performance.md."""
    text = REPORT.read_text(encoding="utf-8") if REPORT.exists() else HEADER
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    section = f"{start}\n{body.rstrip()}\n\nCommand: `{command}`  \nMachine: {machine()}\n{end}"
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
    text = (
        pattern.sub(lambda _m: section, text)
        if pattern.search(text)
        else f"{text.rstrip()}\n\n{section}\n"
    )
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(text, encoding="utf-8")


def publish(name: str, script: str, body: str, write: bool, configfile: str | None) -> None:
    """Print a section and, with ``--write``, put it in docs/performance.md with the command
    that made it."""
    print(body)
    if write:
        cmd = f"python benchmarks/{script} --write" + (
            f" --configfile {configfile}" if configfile else ""
        )
        write_section(name, cmd, body)


def cell_median(library, operation, size, inputs_path, out, timing: dict, threads: int = 1):
    """Measure one cell the workflow's way (a supervised fresh worker process, one process,
    unpaired) into ``out`` and return its median latency per call in seconds."""
    import pandas as pd

    from numbench.cell import run_cell
    from numbench.spec import CELL_CONTRACT, CellSpec, ReplicateSettings
    from numbench.timing import TimingSettings

    spec = CellSpec(
        library=library,
        device="cpu",
        operation=operation,
        size=int(size),
        dtype="float64",
        threads=threads,
        inputs=str(inputs_path),
        params={},
        timing=TimingSettings(**timing),
        timeout_s=600.0,
        memory_limit_mb=None,
        allocator="steady",
        replicates=ReplicateSettings(min=1, max=1, target_ci=1.0, margin=1.1, spread=0),
        paired_with=None,
        contract=CELL_CONTRACT,
    )
    result = run_cell(spec, out, lock=str(Path(out).parent / "lock"))
    if result.status != "ok":
        cell = f"{library}:{operation}:{size}"
        raise RuntimeError(f"{cell} is {result.status}: {result.meta.error}")
    samples = pd.read_parquet(out)
    return float(samples.loc[samples["mode"] == "latency", "seconds"].median())
