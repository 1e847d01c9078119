"""Does the history's gate pass unchanged code, and catch one cell slowed 1.2x, on real
runs? (a benchmark, not a test)

Given the results/ folders of two or more runs of the same code on one machine (each as the
workflow leaves it: ``history add`` needs its benchmarks.parquet, and keeps speedups.parquet
and roofs.parquet where present), this runs the gate exactly as a user calls it,
``numbench compare OLD NEW --history STORE --fail-on-slowdown`` (the command's own entry,
``numbench.cli.main``, in this process, with ``--json`` to read the cells it flags; its exit
status is the verdict), on every ordered pair of runs, twice:

- **unchanged**: STORE is a fresh history store holding every run but the two compared (each
  run made into the store's rows once, ``numbench.history.store.runs_of``, and added to each
  pair's store with ``numbench.history.add``, as ``history add`` does). Every pass is right,
  every fail a false alarm.
- **planted**: the same OLD and STORE, and a copy of NEW with one cell 1.2 times slower
  (``--plant LIB/OP/SIZE``, or by default the cell, ok in every run, whose 95% interval has
  the median relative width over the runs). The slowdown is planted in the tables, not
  measured: the gate reads benchmarks.parquet alone (compare's own table and the history's
  sides both), so the copy is that table with the cell's times per call (median, quartile
  range, min, mean, standard deviation, the interval, each process's median, the pipelined
  median and interval) multiplied by the factor; the cell files and their samples are not
  copied. The gate should fail on that cell and on no other.

It prints per pair the gate's verdict both ways, the cells it flags (slower or broken: what
fails it; faster ones counted), the runs in the store, the cells the history judged, the
pair's common shift (the gate's median new / old per host and device), the slowdown the gate
would flag in the planted cell on its own (its ``detectable``, in the unchanged pair), and the
false-alarm rate the gate prints of its own (its store's past pairs of consecutive runs that
would have failed); then the totals: pairs failed of pairs (the family-wise rate the gate
sets to 5%) and cells flagged slower of cells judged, each with a one-sided 95%
Clopper-Pearson upper bound (the pairs share runs, so the bounds are a little optimistic, as
in compare_false_alarms.py), beside the gate's own figure; and the planted cell caught (the
gate failed on it alone) of pairs, with the other cells flagged.

With N runs each pair's store holds N - 2. With two it is empty: the gate falls back to
compare's own verdict on the two sides' intervals (and says so), so the figures are that
verdict's. A cell needs ``MIN_HISTORY`` (4) runs in the store, the pair left out, to be
judged by the history: below 6 runs no cell is judged, every pair passes unless a cell broke,
and no slowdown can be caught. The gate's own rate judges each past pair of its store on the
store less that pair (N - 4 runs): below 8 runs it judges no cell. The script says so above
its figures.

    .venv/bin/python benchmarks/gate_pairs.py RUN1 RUN2 [RUN3 ...] [--plant LIB/OP/SIZE]
        [--factor 1.2] [--margin M] [--screen-level P] [--markdown]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import json
import math
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from _report import markdown_section  # also puts src/ on the path
from compare_false_alarms import label, upper_bound

from numbench import cli
from numbench.cells import KEY
from numbench.compare.gate import ALPHA, BROKEN, FASTER, MIN_HISTORY, SLOWER, SUSPECT
from numbench.compare.runs import EXIT_SLOWER
from numbench.history import HistoryError, add
from numbench.history.store import load_benchmarks, runs_of
from numbench.report.markdown import md_table

CELL = list(KEY)
#: the slowdown planted by default, as the issue's done-when asks
FACTOR = 1.2
#: the times per call of a benchmarks row that the planted slowdown multiplies
TIME_COLUMNS = (
    "median_s",
    "iqr_s",
    "min_s",
    "mean_s",
    "std_s",
    "ci_low_s",
    "ci_high_s",
    "pipelined_median_s",
    "pipelined_ci_low_s",
    "pipelined_ci_high_s",
)
#: each process's median, as JSON (multiplied too: compare's interval reads it)
PROCESS_MEDIANS = "process_medians_s"
#: the changes that fail the gate
FAILS = (SLOWER, BROKEN)
#: a speedups row's figures that a planted slowdown divides
SPEEDUP_COLUMNS = ("speedup", "speedup_ci_low", "speedup_ci_high")
#: the flagged cells listed, the unchanged pairs' first
LISTED = 40


class GatePairsError(ValueError):
    """Input the script cannot measure the gate on; the message names it and why."""


def read_runs(runs: list[str]) -> list[pd.DataFrame]:
    """Each run's benchmarks table, checked as ``history add`` checks it."""
    if len(runs) < 2:
        raise GatePairsError(
            f"need the results folders of at least two runs of the same code, got {len(runs)}"
        )
    try:
        return [load_benchmarks(Path(run)) for run in runs]
    except HistoryError as exc:
        raise GatePairsError(str(exc)) from None


def ingest(runs: list[str]) -> list[list[tuple[pa.Table, pa.Table]]]:
    """Each results folder's runs as the store's rows; two folders of one run are refused
    (the gate would leave both out as one)."""
    made, seen = [], {}
    for run in runs:
        tables = runs_of(run)
        for table, _ in tables:
            rid = table.column("run_id")[0].as_py()
            if rid in seen:
                raise GatePairsError(f"{seen[rid]} and {run} hold the same run ({rid})")
            seen[rid] = run
        made.append(tables)
    return made


def key_of(row) -> tuple:
    return tuple(int(row[c]) if c in ("size", "threads") else str(row[c]) for c in CELL)


def cell_name(key: tuple) -> str:
    cell = dict(zip(CELL, key, strict=True))
    return (
        f"{cell['library']}/{cell['device']} {cell['operation']} {cell['size']} "
        f"{cell['dtype']} t{cell['threads']}"
    )


def steady_cells(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """The cells ok in every run, with ``width``: the mean over the runs of the log of
    their 95% interval's high end over its low end."""
    parts = []
    for i, frame in enumerate(frames):
        ok = frame[(frame["status"] == "ok") & (frame["ci_low_s"] > 0)]
        width = np.log(ok["ci_high_s"].astype(float) / ok["ci_low_s"].astype(float))
        parts.append(ok[CELL].assign(run=i, width=width))
    every = pd.concat(parts, ignore_index=True)
    grouped = every.groupby(CELL, sort=True)
    out = pd.DataFrame({"runs": grouped["run"].nunique(), "width": grouped["width"].mean()})
    return out[out["runs"] == len(frames)].reset_index()


def planted_cell(frames: list[pd.DataFrame], plant: str | None) -> tuple:
    """The cell to slow: ``plant`` (LIB/OP/SIZE, or LIB/DEVICE/DTYPE/tTHREADS/OP/SIZE as in
    a cell's path), else the cell ok in every run whose interval width is the median."""
    steady = steady_cells(frames)
    if steady.empty:
        raise GatePairsError("no cell is ok in every run: there is no cell to slow")
    if plant is None:
        ordered = steady.sort_values(["width", *CELL], kind="stable").reset_index(drop=True)
        return key_of(ordered.iloc[(len(ordered) - 1) // 2])
    parts = plant.split("/")
    names = {3: ("library", "operation", "size")}
    names[6] = ("library", "device", "dtype", "threads", "operation", "size")
    try:
        wanted = dict(zip(names[len(parts)], parts, strict=True))
        wanted["size"] = int(wanted["size"])
        if "threads" in wanted:
            wanted["threads"] = int(wanted["threads"].removeprefix("t"))
    except (KeyError, ValueError):
        raise GatePairsError(
            f"--plant {plant!r}: give LIB/OP/SIZE (numpy/fft/1000) or a cell's "
            "LIB/DEVICE/DTYPE/tTHREADS/OP/SIZE (numpy/cpu/float64/t1/fft/1000)"
        ) from None
    match = steady
    for column, value in wanted.items():
        match = match[match[column] == value]
    if match.empty:
        raise GatePairsError(f"--plant {plant}: no such cell is ok in every run")
    if len(match) > 1:
        found = ", ".join(cell_name(key_of(r)) for _, r in match.iterrows())
        raise GatePairsError(
            f"--plant {plant} matches {len(match)} cells ({found}): name one as "
            "LIB/DEVICE/DTYPE/tTHREADS/OP/SIZE"
        )
    return key_of(match.iloc[0])


def _scaled(text, factor: float):
    if not isinstance(text, str):
        return text
    return json.dumps([float(v) * factor for v in json.loads(text)])


def plant(results: str | Path, out: Path, cell: tuple, factor: float) -> Path:
    """A copy of ``results``'s benchmarks.parquet in the new folder ``out`` with ``cell``'s
    times per call (``TIME_COLUMNS``, ``PROCESS_MEDIANS``) multiplied by ``factor``, and of
    its speedups.parquet, where there is one, with the cell's speedup divided by it."""
    table = pq.read_table(Path(results) / "benchmarks.parquet")
    bench = table.to_pandas()
    rows = np.logical_and.reduce([bench[c] == v for c, v in zip(CELL, cell, strict=True)])
    if not rows.any():
        raise GatePairsError(f"{results} has no cell {cell_name(cell)} to slow")
    for column in TIME_COLUMNS:
        if column in bench:
            bench.loc[rows, column] = bench.loc[rows, column] * factor
    if PROCESS_MEDIANS in bench:
        scaled = [_scaled(t, factor) for t in bench.loc[rows, PROCESS_MEDIANS]]
        bench.loc[rows, PROCESS_MEDIANS] = pd.Series(scaled, index=bench.index[rows], dtype=object)
    out.mkdir(parents=True)
    copy = pa.Table.from_pandas(bench, schema=table.schema, preserve_index=False)
    pq.write_table(copy, out / "benchmarks.parquet")
    speedups = Path(results) / "speedups.parquet"
    if speedups.exists():
        plant_speedup(speedups, out / "speedups.parquet", cell, factor)
    return out


def plant_speedup(path: Path, out: Path, cell: tuple, factor: float) -> None:
    """A copy of the speedups table ``path`` at ``out`` with ``cell``'s speedup over the
    baseline and its interval divided by ``factor``: the cell's lockstep partner is not
    slowed, so its paired ratio drops by the factor."""
    table = pq.read_table(path)
    speedups = table.to_pandas()
    rows = np.logical_and.reduce([speedups[c] == v for c, v in zip(CELL, cell, strict=True)])
    for column in SPEEDUP_COLUMNS:
        if column in speedups:
            speedups.loc[rows, column] = speedups.loc[rows, column] / factor
    pq.write_table(pa.Table.from_pandas(speedups, schema=table.schema, preserve_index=False), out)


def call_gate(old, new, store: Path, margin: float | None, screen: float | None = None) -> dict:
    """``numbench compare OLD NEW --history STORE --fail-on-slowdown --json``, in this
    process: whether it failed (its exit status), the cells it flags, and its own figures."""
    argv = ["compare", str(old), str(new), "--history", str(store), "--fail-on-slowdown"]
    argv += ["--json"] + (["--margin", str(margin)] if margin is not None else [])
    argv += ["--screen-level", str(screen)] if screen is not None else []
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(argv)
    if status not in (0, EXIT_SLOWER):
        raise GatePairsError(f"numbench compare exited {status}: {err.getvalue().strip()}")
    document = json.loads(out.getvalue())
    gated = document.get("history")  # None: the store held no run, compare's own verdict
    cells = pd.DataFrame(gated["cells"] if gated else document["cells"])
    flagged = cells[cells["change"].isin(FAILS)]
    return {
        "failed": status == EXIT_SLOWER,
        "judged": gated["cells_judged"] if gated else int(cells["ratio"].notna().sum()),
        "flagged": [(key_of(r), r["change"], r["ratio"]) for _, r in flagged.iterrows()],
        "slower": int((cells["change"] == SLOWER).sum()),
        "suspects": [key_of(r) for _, r in cells[cells["change"] == SUSPECT].iterrows()],
        "faster": int((cells["change"] == FASTER).sum()),
        "past": (gated["past_pairs"], gated["past_pairs_failed"]) if gated else None,
        # the slowdown the gate would flag in each judged cell on its own, and the pair's common
        # shift per host and device (the median new / old)
        "detectable": {
            key_of(r): r["detectable"]
            for _, r in cells.iterrows()
            if "detectable" in r and pd.notna(r["detectable"])
        },
        "screenable": {
            key_of(r): r["screenable"]
            for _, r in cells.iterrows()
            if "screenable" in r and pd.notna(r["screenable"])
        },
        "shifts": [s["common"] for s in (gated.get("shifts", []) if gated else [])],
    }


def measure(
    runs: list[str], cell: tuple, factor: float, margin, workdir: Path, screen=None
) -> list[dict]:
    """The gate on every ordered pair of ``runs``, unchanged and with ``cell`` planted, each
    pair's store (every other run) and planted copies made under ``workdir``."""
    ingested = ingest(runs)
    stores: dict[tuple[int, int], tuple[Path, int]] = {}
    rows = []
    for i, j in itertools.permutations(range(len(runs)), 2):
        pair = (min(i, j), max(i, j))
        if pair not in stores:
            store = workdir / f"store-{pair[0] + 1}-{pair[1] + 1}"
            store.mkdir()
            others = [t for k, tables in enumerate(ingested) if k not in pair for t in tables]
            for run, cells in others:
                add(store, run, cells)
            stores[pair] = (store, len(others))
        store, held = stores[pair]
        planted = workdir / f"planted-{j + 1}"
        if not planted.exists():
            plant(runs[j], planted, cell, factor)
        rows.append(
            {
                "old": i,
                "new": j,
                "store_runs": held,
                "unchanged": call_gate(runs[i], runs[j], store, margin, screen),
                "planted": call_gate(runs[i], planted, store, margin, screen),
            }
        )
    return rows


def caught(result: dict, cell: tuple) -> bool:
    """The gate failed on ``cell`` and flagged no other."""
    return result["failed"] and [k for k, _, _ in result["flagged"]] == [cell]


def screened(result: dict, cell: tuple) -> bool:
    """The gate's screen let ``cell`` through (suspect, or slower outright) and flagged no
    other cell slower: with ``--confirm`` it is measured again, and it fails the gate if the
    measurement confirms it."""
    others = [k for k, _, _ in result["flagged"] if k != cell]
    hit = cell in result.get("suspects", []) or any(k == cell for k, _, _ in result["flagged"])
    return hit and not others


def spread_of(rows: list[dict], which: str) -> str:
    """The distribution over the cells of a per-cell figure (``detectable``,
    ``screenable``), each cell's median over the unchanged pairs."""
    per_cell: dict[tuple, list[float]] = {}
    for r in rows:
        for key, value in r["unchanged"].get(which, {}).items():
            per_cell.setdefault(key, []).append(value)
    if not per_cell:
        return "none judged"
    values = np.array([float(np.median(v)) for v in per_cell.values()])
    q = np.quantile(values, [0.0, 0.25, 0.5, 0.75, 0.9])
    share = float(np.mean(values <= FACTOR))
    return (
        f"{len(values)} cells: min {q[0]:.3f}x, quartiles {q[1]:.3f}x, {q[2]:.3f}x, "
        f"{q[3]:.3f}x, 90th percentile {q[4]:.3f}x; {share:.0%} at or below {FACTOR:g}x"
    )


def notes(n_runs: int) -> list[str]:
    """What the number of runs allows the gate to judge."""
    held = n_runs - 2
    if held == 0:
        return [
            "With two runs each pair's store is empty: the gate falls back to compare's own "
            "verdict on the two sides' intervals (and says so on standard error), so these "
            "are that verdict's figures, not the history's."
        ]
    out = []
    if held + 1 < MIN_HISTORY:
        out.append(
            f"Each pair's store holds {held} runs, and with OLD {held + 1}, fewer than the "
            f"{MIN_HISTORY} a cell needs to be judged by the history: no cell is judged, a "
            f"pair fails only where a cell broke ({MIN_HISTORY + 1} runs are needed)."
        )
    elif held < MIN_HISTORY:
        out.append(
            f"Each pair's store holds {held} runs, fewer than the {MIN_HISTORY} the decision "
            "needs: only the screen (which counts OLD as one more run) judges the cells, so "
            "no cell is flagged slower, a pair fails only where a cell broke, and a slowdown "
            f"can only be screened ({MIN_HISTORY + 2} runs are needed to decide)."
        )
    rest = max(held - 2, 0)
    if rest < MIN_HISTORY:
        out.append(
            f"The gate's own rate judges each past pair of its store on the {rest} other "
            f"run{'' if rest == 1 else 's'}, fewer than {MIN_HISTORY}: it judges no cell, so "
            f"it cannot fail ({MIN_HISTORY + 4} runs are needed)."
        )
    return out


def _past(result: dict) -> str:
    if result["past"] is None:
        return "-"
    pairs, failed = result["past"]
    return f"{failed} of {pairs}" if pairs else "none"


def _could(result: dict, cell: tuple) -> str:
    """The slowdown the gate would flag in the planted cell on its own, in the unchanged pair."""
    smallest = result.get("detectable", {}).get(cell)
    return "-" if smallest is None else f"{smallest:.3f}"


def pair_table(rows: list[dict], names: list[str], cell: tuple) -> str:
    header = ["pair", "store runs", "judged", "common shift", "gate", "flagged", "faster"]
    header += ["gate's past pairs failed", "planted: could show", "planted: gate"]
    header += ["planted flagged", "others flagged"]
    body = []
    for r in rows:
        same, slowed = r["unchanged"], r["planted"]
        others = [k for k, _, _ in slowed["flagged"] if k != cell]
        body.append(
            [
                f"{names[r['old']]} -> {names[r['new']]}",
                str(r["store_runs"]),
                str(same["judged"]),
                ", ".join("-" if pd.isna(c) else f"{c:.3f}" for c in same.get("shifts", [])) or "-",
                "fails" if same["failed"] else "passes",
                str(len(same["flagged"])),
                str(same["faster"]),
                _past(same),
                _could(same, cell),
                "fails" if slowed["failed"] else "passes",
                "yes" if any(k == cell for k, _, _ in slowed["flagged"]) else "no",
                str(len(others)),
            ]
        )
    return md_table(header, body, "lrrrlrrrrllr")


def flagged_table(rows: list[dict], names: list[str], cell: tuple) -> str:
    """Every cell flagged by the unchanged pairs, and every other cell by the planted ones."""
    listed = []
    for which in ("unchanged", "planted"):
        for r in rows:
            for key, change, ratio in r[which]["flagged"]:
                if which == "planted" and key == cell:
                    continue
                pair = f"{names[r['old']]} -> {names[r['new']]}"
                shown = "-" if ratio is None or not math.isfinite(ratio) else f"{ratio:.3f}"
                listed.append([pair, which, cell_name(key), change, shown])
    if not listed:
        return "Flagged cells (unchanged pairs, and others than the planted one): none."
    more = f", the first {LISTED}" if len(listed) > LISTED else ""
    head = f"Flagged cells (unchanged pairs, and others than the planted one; {len(listed)}{more}):"
    table = md_table(["pair", "run", "cell", "change", "new / old"], listed[:LISTED], "lllrr")
    return head + "\n\n" + table


def totals(rows: list[dict], cell: tuple, factor: float) -> str:
    n = len(rows)
    same = [r["unchanged"] for r in rows]
    failed = sum(g["failed"] for g in same)
    judged, slower = sum(g["judged"] for g in same), sum(g["slower"] for g in same)
    broken = sum(len(g["flagged"]) for g in same) - slower
    cells = "no cell judged"
    if judged:
        cells = (
            f"{slower / judged:.2%}, one-sided 95% upper bound {upper_bound(slower, judged):.2%}"
        )
    lines = [
        f"- Unchanged code: the gate passed {n - failed} of {n} ordered pairs and failed "
        f"{failed} ({failed / n:.1%}, one-sided 95% upper bound {upper_bound(failed, n):.1%}; "
        f"it is set to {ALPHA:.0%} a pair over all its cells).",
        f"- Cells: {slower} flagged slower and {broken} broken of {judged} judged ({cells}).",
    ]
    # one store per unordered pair: both directions print the same past pairs
    pasts = [r["unchanged"]["past"] for r in rows if r["old"] < r["new"]]
    pasts = [p for p in pasts if p is not None]
    pairs, past_failed = sum(p[0] for p in pasts), sum(p[1] for p in pasts)
    if pairs:
        lines.append(
            f"- The gate's own printed rate: over its {len(pasts)} stores, {past_failed} of "
            f"{pairs} past pairs failed ({past_failed / pairs:.1%}; set to {ALPHA:.0%}); the "
            "stores share their runs, so these past pairs repeat from one store to the next."
        )
    else:
        lines.append("- The gate's own printed rate: no store held a past pair to measure it on.")
    planted = [r["planted"] for r in rows]
    hits = sum(caught(g, cell) for g in planted)
    others = sum(len([k for k, _, _ in g["flagged"] if k != cell]) for g in planted)
    could = [r["unchanged"].get("detectable", {}).get(cell) for r in rows]
    could = [c for c in could if c is not None]
    if could:
        lines.append(
            f"- The slowdown the gate would flag in {cell_name(cell)} on its own: "
            f"{min(could):.3f}x to {max(could):.3f}x over the pairs (median "
            f"{float(np.median(could)):.3f}x); a {factor:g}x shows where it is at most "
            f"{factor:g} (or, by Holm's later steps, a little above, where other cells are "
            "flagged too)."
        )
    lines.append(
        f"- {factor:g}x planted on {cell_name(cell)}: the gate failed on it alone in {hits} of "
        f"{n} pairs, failed in {sum(g['failed'] for g in planted)}, and flagged {others} "
        "other cells over the pairs."
    )
    lines += screen_lines(rows, cell, factor)
    return "\n".join(lines)


def screen_lines(rows: list[dict], cell: tuple, factor: float) -> list[str]:
    """The screen's figures: suspects per unchanged pair, the planted cell screened, and
    what every cell could show."""
    n = len(rows)
    suspects = [len(r["unchanged"].get("suspects", [])) for r in rows]
    hits = sum(screened(r["planted"], cell) for r in rows)
    return [
        f"- The screen: {float(np.mean(suspects)):.1f} suspect cells per unchanged pair "
        f"(at most {max(suspects)}), which `--confirm` would measure again; the planted "
        f"{factor:g}x screened, with no other cell flagged slower, in {hits} of {n} pairs "
        f"({hits / n:.0%}).",
        f"- What each cell could show, its median over the pairs: screened at "
        f"{spread_of(rows, 'screenable')}; flagged slower without measuring again at "
        f"{spread_of(rows, 'detectable')}.",
    ]


def report(runs: list[str], rows: list[dict], cell: tuple, factor: float) -> str:
    names = [f"run {i}" for i in range(1, len(runs) + 1)]
    head = [f"{name}: {label(r)}" for name, r in zip(names, runs, strict=True)]
    head.append(
        f"every ordered pair, A as old and B as new, through `numbench compare A B --history "
        f"STORE --fail-on-slowdown` with STORE every other run; then B with "
        f"{cell_name(cell)} {factor:g}x slower (planted in its benchmarks table)"
    )
    parts = ["\n".join(head), *notes(len(runs)), pair_table(rows, names, cell)]
    parts += [totals(rows, cell, factor), flagged_table(rows, names, cell)]
    return "\n\n".join(parts)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="results/ folders of runs of the same code")
    parser.add_argument("--plant", help="the cell slowed: LIB/OP/SIZE (default: see above)")
    parser.add_argument("--factor", type=float, default=FACTOR, help="the slowdown (1.2)")
    parser.add_argument("--margin", type=float, default=None, help="default: compare's own")
    parser.add_argument("--screen-level", type=float, default=None, help="default: the gate's")
    parser.add_argument(
        "--markdown",
        action="store_true",
        help="print a section for docs/history.md, with the command, date and machine",
    )
    args = parser.parse_args(argv)
    if not args.factor > 1:
        parser.error(f"--factor must be above 1, not {args.factor}")
    try:
        cell = planted_cell(read_runs(args.runs), args.plant)
        with tempfile.TemporaryDirectory(prefix="gate-pairs-") as work:
            rows = measure(args.runs, cell, args.factor, args.margin, Path(work), args.screen_level)
    except GatePairsError as exc:
        raise SystemExit(f"error: {exc}") from None
    text = report(args.runs, rows, cell, args.factor)
    options = (f" --plant {args.plant}" if args.plant else "") + (
        f" --factor {args.factor:g}" if args.factor != FACTOR else ""
    )
    options += f" --screen-level {args.screen_level:g}" if args.screen_level else ""
    command = "python benchmarks/gate_pairs.py " + " ".join(map(label, args.runs)) + options
    print(markdown_section(command, text) if args.markdown else text)


if __name__ == "__main__":
    main()
