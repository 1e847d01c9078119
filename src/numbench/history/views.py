"""The store worded for the ``numbench history`` commands, and the commands themselves: a
line a run (``list``), a filter of cells as their series (``show``, a table or JSON) and the
steps found (``changes``); ``run_history`` does each step (``add`` too) and prints it.
``numbench.cli`` holds the commands' arguments, and imports this only when one runs (the
store needs pandas); ``compare --history`` is ``numbench.compare.command``'s.

Everything in the store may come from another host (a store on a shared file system, an
imported offsite run): it is printed as text, never run or used as a path.
"""

from __future__ import annotations

import argparse
import json
import sys

import pandas as pd

from numbench.formatting import format_seconds, missing
from numbench.history import HistoryError, add_results, read
from numbench.history.changes import changes, numbered_runs, run_differences
from numbench.history.store import SERIES_KEY

#: the filters of ``history show``: a cell's key on its host
FILTERS = tuple(SERIES_KEY)
#: text columns are cut to this many characters in a table
MAX_TEXT = 120


def _text(value) -> str:
    text = "-" if missing(value) else str(value)
    # text from another host is printed, never obeyed: no control characters reach a terminal
    text = "".join(c if c.isprintable() else " " for c in text)
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."


def _table(header: list[str], rows: list[list]) -> str:
    """A plain text table, columns padded to their widest value."""
    cells = [[_text(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    for row in cells:
        lines.append("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def quality(run: pd.Series) -> str:
    """A run's cells and their quality, in a few words."""
    said = [f"{run['cells_ok']}/{run['cells']} ok"]
    if run["cells_unstable"]:
        said.append(f"{run['cells_unstable']} unstable")
    if run["cells_busy"]:
        said.append(f"{run['cells_busy']} busy")
    if not missing(run["verdicts"]):
        said.append(f"{run['verdicts_in_doubt']}/{run['verdicts']} verdicts in doubt")
    return ", ".join(said)


def list_rows(runs: pd.DataFrame) -> tuple[list[str], list[list]]:
    """``history list``'s header and rows, a run a row, oldest first: date, host, its number
    on the host, run id, numbench's commit, what changed since the host's previous run, its
    cells and their quality (the results site shows the same rows)."""
    numbered = numbered_runs(runs)
    previous: dict[str, pd.Series] = {}
    rows = []
    for _, run in numbered.iterrows():
        changed = run_differences(previous.get(run["host"]), run)
        previous[run["host"]] = run
        commit = run["numbench_commit"]
        rows.append(
            [
                str(run["started_at"])[:16].replace("T", " "),
                run["host"],
                run["run_number"],
                run["run_id"],
                "-" if missing(commit) else str(commit)[:7],
                "; ".join(changed) or ("first run" if run["run_number"] == 1 else "-"),
                quality(run),
            ]
        )
    header = ["date", "host", "#", "run", "commit", "changed since the host's last run"]
    return [*header, "cells"], rows


def list_text(runs: pd.DataFrame) -> str:
    """One line a run (``list_rows``), oldest first."""
    if runs.empty:
        return "the history holds no runs"
    return _table(*list_rows(runs))


def select(cells: pd.DataFrame, filters: dict) -> pd.DataFrame:
    """The cells matching every filter given (a cell key's field -> value, as text)."""
    mask = pd.Series(True, index=cells.index)
    for name, value in filters.items():
        if value is not None:
            mask &= cells[name].astype(str) == str(value)
    return cells[mask]


def series_frame(store, filters: dict) -> pd.DataFrame:
    """The selected cells of every run, cell by cell, oldest run first: every column of the
    cells table, with the run's number on its host and when it started."""
    runs = numbered_runs(store.runs)[["run_id", "run_number", "started_at"]]
    runs = runs.rename(columns={"started_at": "run_started_at"})
    merged = select(store.cells, filters).merge(runs, on="run_id")
    return merged.sort_values([*SERIES_KEY, "run_number"], kind="stable").reset_index(drop=True)


def show_text(frame: pd.DataFrame) -> str:
    if frame.empty:
        return "no cell of the history matches"
    rows = [
        [
            cell_label(r),
            r["host"],
            r["run_number"],
            str(r["run_started_at"])[:16].replace("T", " "),
            r["status"],
            format_seconds(r["median_s"]) if not missing(r["median_s"]) else "-",
            _interval(r["ci_low_s"], r["ci_high_s"]),
            _over_baseline(r.get("speedup")),
            "unstable" if r["unstable"] is True else "",
            r["library_version"],
        ]
        for _, r in frame.iterrows()
    ]
    header = ["cell", "host", "#", "run date", "status", "median", "95% interval"]
    header += ["paired: over the baseline", "", "version"]
    return _table(header, rows)


def _over_baseline(speedup) -> str:
    """The paired series' value: the cell's time over its lockstep baseline's."""
    if missing(speedup) or not float(speedup) > 0:
        return "-"
    return f"{1 / float(speedup):.3g}x"


def _interval(low, high) -> str:
    if missing(low) or missing(high):
        return "-"
    return f"{format_seconds(low)} .. {format_seconds(high)}"


def frame_json(frame: pd.DataFrame) -> str:
    """A frame as a JSON list of records (missing values as null)."""
    return json.dumps(json.loads(frame.to_json(orient="records", double_precision=15)), indent=1)


def cell_label(row) -> str:
    """A cell's key without its host, in a few words: 'torch/cpu sort 10000 float64 t1'."""
    return (
        f"{row['library']}/{row['device']} {row['operation']} {row['size']} {row['dtype']} "
        f"t{row['threads']}"
    )


def changes_rows(found: pd.DataFrame) -> tuple[list[str], list[list]]:
    """``history changes``' header and rows, a step a row (the results site shows the same)."""
    rows = [
        [
            cell_label(r),
            r["host"],
            f"{r['run_number']} ({r['run_id']})",
            _before_after(r),
            f"{r['ratio']:.2f}x [{r['ratio_low']:.2f}, {r['ratio_high']:.2f}]",
            r["changed"] or "nothing recorded",
        ]
        for _, r in found.iterrows()
    ]
    header = ["cell", "host", "from run", "before -> after", "ratio [95%]", "what changed"]
    return header, rows


def _before_after(row) -> str:
    """A step's two levels: times, or a paired series' times over the baseline's."""
    if row.get("measure") == "paired":
        return f"{row['before_paired']:.3g}x -> {row['after_paired']:.3g}x the baseline's time"
    return f"{format_seconds(row['before_s'])} -> {format_seconds(row['after_s'])}"


def changes_text(found: pd.DataFrame) -> str:
    if found.empty:
        return "no step found in any cell's series"
    return _table(*changes_rows(found))


def run_history(args: argparse.Namespace, exit_bad_input: int) -> int:
    """``numbench history STEP``: add, list, show or changes; ``exit_bad_input`` for a bad store."""
    try:
        if args.step == "add":
            for results in args.results:
                for done in add_results(results, args.store):
                    what = "added" if done["added"] else "already in the history"
                    print(f"{results}: run {done['run_id']} ({done['host']}) {what}")
            return 0
        store = read(args.store)
    except HistoryError as exc:
        print(f"history {args.step}: {exc}", file=sys.stderr)
        return exit_bad_input
    for skipped in store.skipped:
        print(f"history: skipped {skipped}", file=sys.stderr)
    if args.step == "list":
        print(list_text(store.runs))
    elif args.step == "show":
        frame = series_frame(store, {name: getattr(args, name) for name in FILTERS})
        print(frame_json(frame) if args.json else show_text(frame))
    else:
        from numbench.config import default_margin

        found = changes(store, float(args.margin or default_margin()))
        print(frame_json(found) if args.json else changes_text(found))
    return 0
