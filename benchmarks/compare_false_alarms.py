"""How often does `numbench compare` call identical code slower? (a benchmark, not a test)

Given the ``results/`` folders (or ``benchmarks.parquet`` files) of two or more runs of the
same code on the same kind of machine, this compares every ordered pair of them, A as old
and B as new, with ``numbench.compare.runs`` at the margin given (default: the config's),
and prints per pair the cells compared (``ok`` on both sides), those flagged slower, faster
and broken, and the median half-width of the intervals; then the false-alarm rate (slower
flags over comparisons, each unordered pair counted in both directions, so a cell flagged
faster one way is flagged slower the other) with a one-sided 95% Clopper-Pearson upper
bound (3 / n, the rule of three, where none was flagged). The bound treats every comparison
as independent; the pairs share runs and cells, so it is a little optimistic. The same
figures follow with each side's own interval alone (the rule before the run-to-run floor),
for contrast, and the flagged cells of either rule with their ratios.

    .venv/bin/python benchmarks/compare_false_alarms.py RUN1 RUN2 [RUN3 ...] [--margin M]
        [--markdown]
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

from _report import markdown_section  # also puts src/ on the path
from scipy import stats

from numbench.cells import KEY
from numbench.compare.runs import BROKEN, CompareError, compare, load
from numbench.config import default_margin
from numbench.report.markdown import md_table
from numbench.stats import FASTER, SLOWER

#: the two rules compared: with the run-to-run floor (compare's own), without it (before)
RULES = {"with run-to-run variance": True, "own intervals alone": False}
#: the flagged cells listed per rule, largest ratios first
LISTED = 12
#: ``max_cpu_taken`` where a table does not record its replicate settings (the default)
MAX_CPU_TAKEN = 0.1
CELL = list(KEY)


def disturbed(frame) -> set[tuple]:
    """The cells other programs disturbed: a process's ``cpu_taken`` above the run's
    ``max_cpu_taken`` even after the cell's rounds were measured again."""
    if "cpu_taken" not in frame:
        return set()
    out = set()
    for r in frame.to_dict("records"):
        try:
            limit = json.loads(r.get("replicate_settings") or "{}").get("max_cpu_taken")
        except (TypeError, ValueError, AttributeError):
            limit = None
        if (r["cpu_taken"] or 0) > (limit if isinstance(limit, float | int) else MAX_CPU_TAKEN):
            out.add(tuple(r[c] for c in CELL))
    return out


def label(run: str) -> str:
    """A run's folder by its last two names: a machine's paths stay out of the docs."""
    return "/".join(Path(run).parts[-2:])


def upper_bound(flagged: int, n: int, confidence: float = 0.95) -> float:
    """One-sided Clopper-Pearson upper bound of a rate from ``flagged`` of ``n``."""
    if n == 0:
        return float("nan")
    if flagged >= n:
        return 1.0
    return float(stats.beta.ppf(confidence, flagged + 1, n - flagged))


def pair_figures(table) -> dict:
    compared = table[table["ratio"].notna()]
    width = (compared["ci_high"] / compared["ci_low"]) ** 0.5 - 1
    return {
        "compared": len(compared),
        "slower": int((table["change"] == SLOWER).sum()),
        "faster": int((table["change"] == FASTER).sum()),
        "broken": int((table["change"] == BROKEN).sum()),
        "half_width": float(width.median()) if len(width) else float("nan"),
        "flagged": compared[compared["change"].isin([SLOWER, FASTER])],
    }


def rate_line(name: str, slower: int, n: int, quiet: int) -> str:
    bound = upper_bound(slower, n)
    return (
        f"- {name}: {slower} slower of {n} comparisons, false-alarm rate "
        f"{slower / n:.2%} (95% upper bound {bound:.2%}); {slower - quiet} of them on a side "
        "other programs disturbed (`cpu_taken` above `max_cpu_taken`)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="results/ folders or benchmarks.parquet files")
    parser.add_argument("--margin", type=float, default=None, help="default: the config's margin")
    parser.add_argument(
        "--markdown",
        action="store_true",
        help="print a section for docs/history.md, with the command, date and machine",
    )
    args = parser.parse_args()
    if len(args.runs) < 2:
        parser.error("need at least two runs")
    margin = args.margin if args.margin is not None else default_margin()
    try:
        frames = [load(r) for r in args.runs]
    except CompareError as exc:
        raise SystemExit(f"error: {exc}") from None
    names = [f"run {i}" for i in range(1, len(frames) + 1)]
    lines = [f"{name}: {label(r)}" for name, r in zip(names, args.runs, strict=True)]
    noisy = [disturbed(f) for f in frames]
    lines.append(f"margin {margin:g}x; every ordered pair, A as old and B as new")
    rows, flagged = [], {rule: [] for rule in RULES}
    totals = {rule: [0, 0, 0] for rule in RULES}  # slower, compared, slower and undisturbed
    for i, j in itertools.permutations(range(len(frames)), 2):
        row = [f"{names[i]} -> {names[j]}"]
        for rule, run_to_run in RULES.items():
            f = pair_figures(compare(frames[i], frames[j], margin, run_to_run=run_to_run))
            if run_to_run:  # the cells compared and broken are the same by either rule
                row += [str(f["compared"]), str(f["broken"])]
            row += [str(f["slower"]), str(f["faster"]), f"{f['half_width']:.1%}"]
            totals[rule][0] += f["slower"]
            totals[rule][1] += f["compared"]
            slower = f["flagged"][f["flagged"]["change"] == SLOWER]
            keys = set(zip(*(slower[c] for c in CELL), strict=True)) - noisy[i] - noisy[j]
            totals[rule][2] += len(keys)
            if i < j:  # each unordered pair once: B -> A flags the same cells
                flagged[rule] += [
                    (names[i], names[j], r, tuple(r[1 : len(CELL) + 1]) in noisy[i] | noisy[j])
                    for r in f["flagged"].itertuples()
                ]
        rows.append(row)
    header = ["pair", "compared", "broken", "slower", "faster", "median half-width"]
    header += ["slower (own only)", "faster (own only)", "median half-width (own only)"]
    body = ["\n".join(lines), md_table(header, rows, "l" + "r" * (len(header) - 1))]
    body.append("\n".join(rate_line(rule, *totals[rule]) for rule in RULES))
    for rule in RULES:
        cells = sorted(flagged[rule], key=lambda t: -abs(t[2].ratio - 1 / t[2].ratio))
        listed = [
            [a, b, r.library, r.device, r.operation, str(r.size), r.dtype, str(r.threads)]
            + [f"{r.ratio:.3f}", f"{r.ci_low:.3f} to {r.ci_high:.3f}", r.change]
            + ["yes" if noise else ""]
            for a, b, r, noise in cells[:LISTED]
        ]
        head = f"Flagged, {rule} ({len(cells)} over the unordered pairs"
        head += f", the {LISTED} largest):" if len(cells) > LISTED else "):"
        if listed:
            cols = ["A", "B", *KEY]
            cols += ["ratio B / A", "95% CI", "change", "disturbed"]
            body.append(head + "\n\n" + md_table(cols, listed, "lllllrlrrrll"))
        else:
            body.append(head.rstrip(":") + ": none.")
    text = "\n\n".join(body)
    command = "python benchmarks/compare_false_alarms.py " + " ".join(map(label, args.runs))
    print(markdown_section(command, text) if args.markdown else text)


if __name__ == "__main__":
    main()
