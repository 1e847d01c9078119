"""How large a slowdown does the versions comparison catch, and how often does it cry wolf?

Twins of every library of a grid (the default grid unless ``--configfile`` says otherwise),
each an environment of the grid's own packages with the test-only slowdown
(``tests/adapters/slowed.py``: every call stretched to ``factor`` times its own duration),
are measured the way another version of the library would be: each cell in paired lockstep
rounds against the library in the base environment. The twin with factor 1 is not slowed at
all: its flags are false alarms. The twins' cells add rounds while their verdict at
``--margin`` is unsettled (``replicates.stop_margin`` is set to it, as it should be in a grid made
to gate versions at that margin), up to ``--max-rounds`` (default: the grid's
``replicates.max``).

Per factor it prints the cells compared, the share flagged ``slower`` at ``--margin`` (a
change counts when the ratio's 95% interval excludes 1 and the ratio passes the margin:
``numbench.analyse.versions``), a 95% Clopper-Pearson interval for that share, and the
median measured ratio; for factor 1, the share flagged either way. The figures come from
one run, so every factor saw the same machine.

    python benchmarks/versions_power.py --directory DIR --run --max-rounds 12  # measure, report
    python benchmarks/versions_power.py --directory DIR --margin 1.05  # report again

``DIR`` is the workflow's working folder for the twins (results/, logs/ and .snakemake/
go there; the base grid's own cells are not needed and not measured). ``--factors`` picks
the twins (default 1 1.05 1.1 1.2); a run with some factors can be followed by another with
more, in the same folder.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import _report
import numpy as np
import yaml
from scipy import stats

ROOT = _report.ROOT
FACTORS = (1.0, 1.05, 1.10, 1.20)
TWIN = "twin-{:.2f}"


def twin_name(factor: float) -> str:
    return TWIN.format(factor)


def twin_config(
    base_config: Path, factors: list[float], out: Path, margin: float, max_rounds: int | None
) -> Path:
    """The grid of ``base_config`` with one twin environment per factor. Its cells stop adding
    rounds once their verdict at the gate's ``margin`` is settled (``replicates.stop_margin``), as
    a grid made to compare versions at that margin would; ``max_rounds`` raises
    ``replicates.max``."""
    cfg = yaml.safe_load(base_config.read_text(encoding="utf-8")) or {}
    cfg["replicates"] = {**(cfg.get("replicates") or {}), "stop_margin": margin}
    if max_rounds is not None:
        cfg["replicates"]["max"] = max_rounds
    cfg["environments"] = {
        twin_name(f): {
            "variables": {
                "NUMBENCH_ADAPTERS": str(_report.SLOWED),
                "NUMBENCH_TEST_ADAPTERS": "1",
                "NUMBENCH_TEST_SLOWDOWN": f"{f:g}",
            }
        }
        for f in factors
    }
    out.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return out


def run_twins(
    directory: Path,
    configfile: Path,
    factors: list[float],
    cores: int,
    margin: float,
    max_rounds: int | None,
) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    config = twin_config(configfile, factors, directory / "twins.yaml", margin, max_rounds)
    sys.path.insert(0, str(ROOT / "src"))
    from numbench.config import grid, resolve

    cfg = resolve(
        {
            **yaml.safe_load((ROOT / "config" / "config.yaml").read_text(encoding="utf-8")),
            **yaml.safe_load(config.read_text(encoding="utf-8")),
        },
        ROOT / "workflow" / "schemas" / "config.schema.yaml",
        [config],
    )
    targets = [cell.path for cell in grid(cfg) if cell.environment]
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    cmd = [str(bin_dir / "snakemake"), "--snakefile", str(ROOT / "Snakefile")]
    cmd += ["--directory", str(directory), "--configfile", str(config), "--cores", str(cores)]
    cmd += ["--keep-going", *targets]
    print(f"measuring {len(targets)} twin cells in {directory}", flush=True)
    subprocess.run(cmd, env=env, check=True)


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper-Pearson) binomial interval of k successes in n, from the beta
    distribution's quantiles."""
    if n == 0:
        return float("nan"), float("nan")
    alpha = (1 - confidence) / 2
    low = 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, n - k + 1))
    high = 1.0 if k == n else float(stats.beta.ppf(1 - alpha, k + 1, n - k))
    return low, high


def process_spread(path: Path) -> float:
    """How far apart a cell's processes landed: on each side, its largest per-process median
    over its smallest; the larger of the two sides. Near 1 when the processes agree, far
    from 1 when they land in different modes."""
    from numbench.analyse.versions import read_side

    side = read_side(path, {})
    spreads = []
    for groups in (side["env"], side["base"]):
        medians = [float(np.median(s)) for s in groups.values() if len(s)]
        if medians:
            spreads.append(max(medians) / min(medians))
    return max(spreads) if spreads else float("nan")


def twin_table(directory: Path, factor: float, margin: float):
    """The versions table of one twin's cells, with each cell's ``process_spread``."""
    from numbench.analyse.versions import compute_versions
    from numbench.cells import Cell
    from numbench.compare.runs import CELL

    folder = directory / "results" / "cells"
    paths = sorted(folder.glob(f"*@{twin_name(factor)}/**/*.parquet"))
    if not paths:
        return None
    cwd = os.getcwd()
    os.chdir(directory)
    try:
        relative = [p.relative_to(directory) for p in paths]
        table = compute_versions([str(p) for p in relative], margin)
        spread = {}
        for path in relative:
            cell = Cell.from_path(str(path))
            spread[tuple(getattr(cell, column) for column in CELL)] = process_spread(path)
    finally:
        os.chdir(cwd)
    table["process_spread"] = [spread[key] for key in table[CELL].itertuples(index=False)]
    return table


def report(directory: Path, factors: list[float], margin: float) -> str:
    rows = []
    header = (
        "| twin | cells compared | flagged slower | share | 95% interval | flagged faster "
        "| median measured ratio | not compared |\n|---|---:|---:|---:|---|---:|---:|---:|"
    )
    misses = []
    for factor in factors:
        table = twin_table(directory, factor, margin)
        if table is None:
            rows.append(f"| {factor:g} | 0 | | | | | | |")
            continue
        compared = table[table["ratio"].notna() & (table["status"] == "ok")]
        n = len(compared)
        slower = int((compared["change"] == "slower").sum())
        faster = int((compared["change"] == "faster").sum())
        lo, hi = clopper_pearson(slower, n)
        ratio = float(np.median(compared["ratio"])) if n else float("nan")
        rows.append(
            f"| {factor:g} | {n} | {slower} | {slower / n:.1%} | {lo:.1%} to {hi:.1%} | "
            f"{faster} | {ratio:.3f} | {len(table) - n} |"
        )
        wrong = compared["change"] != "slower" if factor > 1 else compared["change"] != "same"
        for r in compared[wrong].itertuples():
            misses.append(
                f"| {factor:g} | {r.library} | {r.operation} | {r.size} | {r.ratio:.3f} | "
                f"{r.ratio_ci_low:.3f} to {r.ratio_ci_high:.3f} | {r.rounds} | {r.change} | "
                f"{r.process_spread:.2f} |"
            )
    text = (
        f"Twins paired against their library, margin {margin:g} (a change counts when the "
        "ratio's 95% interval excludes 1 and the ratio passes the margin). For the twin of "
        "factor 1 (not slowed) every flag, slower or faster, is a false alarm.\n\n"
        + header
        + "\n"
        + "\n".join(rows)
    )
    if misses:
        text += (
            "\n\nThe cells a slowed twin did not flag, and those the unslowed twin flagged "
            "(process spread: on each side of the cell, its largest process median over its "
            "smallest; the larger side):\n\n| twin | library | operation | size | ratio | 95% interval "
            "| rounds | change | process spread |\n|---|---|---|---:|---:|---|---:|---|---:|\n"
            + "\n".join(misses)
        )
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--directory", required=True, type=Path)
    parser.add_argument("--configfile", type=Path, default=ROOT / "config" / "config.yaml")
    parser.add_argument("--factors", type=float, nargs="+", default=list(FACTORS))
    parser.add_argument("--margin", type=float, default=1.05)
    parser.add_argument("--run", action="store_true", help="measure the twins first")
    parser.add_argument("--cores", type=int, default=1)
    parser.add_argument(
        "--max-rounds", type=int, help="replicates.max of the twins' cells (default: the grid's)"
    )
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    if any(f < 1 for f in args.factors):
        parser.error("a slowdown factor is >= 1")
    directory = args.directory.resolve()
    if args.run:
        run_twins(
            directory,
            args.configfile.resolve(),
            args.factors,
            args.cores,
            args.margin,
            args.max_rounds,
        )
    body = report(directory, args.factors, args.margin)
    configfile = None if args.configfile == ROOT / "config" / "config.yaml" else args.configfile
    _report.publish("versions_power.py", body, args.markdown, configfile and str(configfile))


if __name__ == "__main__":
    main()
