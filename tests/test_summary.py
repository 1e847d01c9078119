"""The Markdown summary rendered from constructed results."""

from __future__ import annotations

import re

import pytest
from conftest import MARGIN, constructed_results
from summarise import summarise

from numbench.analyse.speedups import find_crossovers
from numbench.formatting import format_size
from numbench.report.summary import to_html


def section(text: str, title: str) -> str:
    """The body of the '## title' section."""
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, flags=re.S | re.M)
    assert m, f"no section {title!r}"
    return m.group(1)


@pytest.fixture(scope="module")
def text():
    bench, speedups, crossovers = constructed_results()
    return summarise(bench, speedups, crossovers, "numpy", "cpu", MARGIN)


def test_format_size():
    assert format_size(10_000) == "10^4"
    assert format_size(1024) == "1,024"
    assert format_size(3160.26, approx=True) == "≈ 3,200"


def test_sections_in_order(text):
    titles = re.findall(r"^## (.+)$", text, flags=re.M)
    assert titles == [
        "Key findings",
        "Environment",
        "Results by operation",
        "Crossovers",
        "Warnings",
        "Charts",
        "Methodology",
        "Every cell",
    ]


def test_findings_name_the_fastest_library_at_both_ends(text):
    findings = section(text, "Key findings")
    fft = next(line for line in findings.splitlines() if line.startswith("- **fft**"))
    # at 10^3 JAX (1.5x) beats NumPy and PyTorch (0.5x); at 10^5 PyTorch (4x) wins
    small, large = fft.split("; ")
    assert "n = 10^3: **JAX**" in small
    assert "n = 10^5: **PyTorch**" in large
    sort = next(line for line in findings.splitlines() if line.startswith("- **sort**"))
    assert "n = 10^3: **NumPy**" in sort


def test_findings_put_every_crossover_in_words(text):
    findings = section(text, "Key findings")
    crossing = re.search(
        r"PyTorch beats NumPy on fft from n ≈ ([\d,]+) \(between 10\^3 and 10\^4", findings
    )
    assert crossing, findings
    assert 3000 <= int(crossing.group(1).replace(",", "")) <= 3300  # 10^3.5 = 3,162
    at_largest = re.search(r"([\d.]+)× at n = 10\^5 \(([\d.]+) to ([\d.]+)\)\.", findings)
    assert at_largest, findings
    speedup, low, high = map(float, at_largest.groups())
    assert low < speedup < high and speedup == pytest.approx(4.0, rel=0.03)
    assert "JAX beats NumPy on fft at every size (n = 10^3 to 10^5)" in findings
    assert "PyTorch is never faster than NumPy on sort" in findings


def test_largest_speedups_come_with_their_ci(text):
    block = section(text, "Key findings").split("### Largest speedups")[1]
    first = next(line for line in block.splitlines() if line.startswith("- "))
    assert first.startswith("- PyTorch on fft at n = 10^5: **")
    assert re.search(r"\(\d\.\d+ to \d\.\d+\)$", first)


def test_environment_table(text):
    env = section(text, "Environment")
    for expected in (
        "| CPU model | Test CPU 9000 |",
        "| Cores (logical) | 16 |",
        "| RAM | 135.1 GB |",
        "| GPU | not asked for (device: cpu) |",
        "| Python | 3.11.2 |",
        "| dtype | float64 |",
        "| NumPy | 2.4.6; BLAS: openblas |",
        "| PyTorch | 2.13.0 |",
    ):
        assert expected in env


def test_per_operation_tables(text):
    body = section(text, "Results by operation")
    fft = body.split("### fft")[1].split("### sort")[0]
    assert "| n | jax | numpy | torch |" in fft
    # the fastest at 10^5 is bold, and its speedup with the CI is in the second table
    assert re.search(r"\| 10\^5 \| [^|]+ \| [^|]+ \| \*\*[\d.]+ µs\*\* \|", fft)
    assert re.search(r"\| 10\^5 \| 1\.5\d*× \([\d.]+ to [\d.]+\) \| (3\.9|4\.0)\d*× \(", fft)
    sort = body.split("### sort")[1]
    assert "unsupported" in sort and "mismatch" in sort


def test_crossover_table_has_one_row_per_group(text):
    table = section(text, "Crossovers")
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 1 + 3
    assert any("| crosses |" in r and "10^3 to 10^4" in r for r in rows)


def test_warnings_list_every_gap_with_its_reason(text):
    warn = section(text, "Warnings")
    assert "`unsupported`: jax (cpu) sort n = 10^3: jax has no stable sort here" in warn
    assert "`mismatch`: jax (cpu) sort n = 10^4: rel_error 1e-3 > 1e-10" in warn
    assert re.search(r"- numpy \(cpu\) sort n = 10\^5: IQR .* of the median", warn)


def test_a_cell_measured_on_a_busy_machine_is_said_in_the_warnings():
    bench, speedups, crossovers = constructed_results()
    bench = bench.copy()
    bench["cpu_taken"], bench["set_aside"] = 0.0, 0
    busy = (bench["library"] == "torch") & (bench["operation"] == "fft") & (bench["size"] == 1000)
    bench.loc[busy, ["cpu_taken", "set_aside"]] = [0.38, 4]
    warn = section(summarise(bench, speedups, crossovers, "numpy", "cpu", MARGIN), "Warnings")
    assert "Cells measured on a busy machine" in warn
    assert "- torch (cpu) fft n = 10^3: 38% of a process's CPU time taken; 4 attempt(s) set" in warn


def test_a_verdict_in_doubt_is_marked_in_its_table_and_listed_in_the_warnings(text):
    assert "Verdicts in doubt" not in section(text, "Warnings")
    bench, speedups, crossovers = constructed_results()
    speedups = speedups.copy()
    doubt = (speedups["library"] == "torch") & (speedups["operation"] == "fft")
    speedups.loc[doubt & (speedups["size"] == 10_000), "settled"] = False
    crossovers = find_crossovers(speedups)
    page = summarise(bench, speedups, crossovers, "numpy", "cpu", MARGIN)
    warn = section(page, "Warnings")
    assert "Verdicts in doubt: the speedup's 95% interval holds the margin (1.1x or 1/1.1x)" in warn
    assert re.search(
        r"- torch \(cpu\) fft n = 10\^4: 2(\.0\d*)?× \([\d.]+ to [\d.]+\), faster", warn
    )
    fft = section(page, "Results by operation").split("### fft")[1].split("### sort")[0]
    marked = [line for line in fft.splitlines() if line.endswith(" ? |")]
    assert marked == ["| 10^4 | 1.5× (1.5 to 1.51) | 2× (1.99 to 2.01) ? |"]
    assert "?: in doubt, the CI holds the margin or 1 / margin" in fft
    # torch's fft kind rests on that verdict: marked in the table and in the key findings
    crossings = section(page, "Crossovers")
    assert re.search(r"\| fft \| torch \| cpu \| crosses \? \|", crossings)
    assert "?: the kind rests on a verdict in doubt" in crossings
    assert re.search(r"- PyTorch beats NumPy on fft from .*In doubt: it rests on", page)
    assert "crosses ?" not in section(text, "Crossovers")
    # the opening says how many verdicts are settled and how many a rerun should repeat
    n = int(speedups["speedup"].notna().sum())
    chances = speedups.loc[speedups["speedup"].notna(), "repeat_chance"]
    assert f"How firm: {n - 1} of the {n} verdicts are settled" in page
    assert "; 1 is in doubt (`?`, listed under Warnings)." in page
    assert f"A rerun is expected to repeat about {chances.sum():.0f} of the {n} verdicts" in page
    assert f"How firm: {n} of the {n} verdicts are settled (their 95% interval" in text
    assert "are in doubt" not in text


def test_chart_links_and_every_cell(text):
    charts = section(text, "Charts")
    for name in ("time_fft", "speedup_sort", "throughput_fft", "speedup_heatmap", "first_call"):
        assert f"[{name}](charts/{name}.html)" in charts
    cells = section(text, "Every cell")
    # a header and one row per cell (the separator line starts with '|---')
    assert len([line for line in cells.splitlines() if line.startswith("| ")]) == 1 + 17


def test_no_gpu_notice_without_gpu_cells(text):
    assert "No GPU was found" not in text


def test_gpu_notice_at_the_top_when_every_gpu_cell_is_unavailable():
    text = summarise(*constructed_results(gpu="unavailable"), "numpy", "cpu", MARGIN)
    top = text.split("## Key findings")[0]
    # the headline on the machine first (test_machine_quality), then the notice
    assert top.startswith("# numbench summary\n\n**Machine not watched**")
    top = top[top.index("\n\n**No GPU") + 2 :]
    assert top.startswith("**No GPU was found on this host (testhost).**")
    assert "All 6 GPU cells asked for" in top
    assert "- **torch**: 6 cells, fft (1000, 10000, 100000), sort (1000, 10000, 100000)" in top
    assert "no CUDA device found" in top
    assert "| GPU | none found (every GPU cell unavailable) |" in text


def test_no_gpu_notice_when_a_gpu_cell_ran():
    text = summarise(*constructed_results(gpu="ok"), "numpy", "cpu", MARGIN)
    assert "No GPU was found" not in text
    assert "| GPU | Test GPU 80GB |" in text


def test_html_twin_has_the_tables(text):
    html = to_html(text)
    assert html.startswith("<!DOCTYPE html>")
    tables = len(re.findall(r"^\|---", text, flags=re.M))
    assert tables > 5 and html.count("<table>") == tables
    assert "<h2>Key findings</h2>" in html


def sentence(points) -> str:
    from test_crossovers import curve

    from numbench.analyse.findings import crossover
    from numbench.analyse.speedups import find_crossovers
    from numbench.report.sentences import crossover_sentence

    speedups = curve(points, sizes=[10, 100, 1000])
    row = next(find_crossovers(speedups).itertuples())
    return crossover_sentence(crossover(row, speedups), "NumPy", multi_device=False)


def test_ties_are_named_as_the_same_speed_in_words():
    text = sentence([(1.02, 0.9, 1.2), 2.0, 3.0])
    assert text.startswith("PyTorch beats NumPy on fft at n = 100, 10^3 and is never slower")
    assert "the same speed at n = 10;" in text
    text = sentence([0.2, 0.3, (0.9, 0.7, 1.1)])
    assert "never faster" in text and "slower at n = 10, 100" in text
    # the best point is a tie: no 'i.e. ... slower' claim about it
    assert text.endswith("at best 0.9× at n = 10^3 (0.7 to 1.1), the same speed.")
    assert "1.11× slower" not in text
    text = sentence([0.2, 0.3, 0.4])
    assert text.endswith("at best 0.4× at n = 10^3 (0.38 to 0.42), i.e. 2.5× slower.")


def test_the_baseline_given_is_named_even_without_speedups():
    bench, speedups, crossovers = constructed_results()
    text = summarise(bench, speedups.iloc[0:0], crossovers.iloc[0:0], "torch", "cpu", MARGIN)
    assert "Baseline: PyTorch on cpu;" in text
    assert "- No library is faster than PyTorch beyond the margin anywhere." in text


def test_tables_computed_against_another_baseline_are_refused():
    with pytest.raises(ValueError, match="computed against numpy on cpu, not the baseline"):
        summarise(*constructed_results(), "torch", "cpu", MARGIN)


@pytest.mark.parametrize(
    "flags, says",
    [
        ([True, True, None], ["in lockstep", "milliseconds apart"]),
        ([False, None], ["back to back", "seconds apart"]),
        ([True, False], ["in lockstep", "`replicates.lockstep: false`: back to back"]),
    ],
)
def test_the_methodology_says_how_the_rounds_were_paired(flags, says):
    import pandas as pd

    from numbench.report.summary import pairing_text

    text = pairing_text(pd.DataFrame({"lockstep": pd.Series(flags, dtype=object)}))
    for words in says:
        assert words in text
    if flags == [False, None]:
        assert "lockstep" not in text


def test_pairs_with_one_size_share_one_crossover_line():
    """A grid of one size per operation (a GPU subset, say) has no crossover to place: one
    line says so for every pair instead of a 'no verdict' sentence each."""
    from dataclasses import replace

    from numbench.contract.facts import Crossover, Findings, SpeedupPoint
    from numbench.report.sentences import key_findings

    def pair(library: str, operation: str, points: int) -> Crossover:
        curve = tuple(
            SpeedupPoint(size=10**k, speedup=2.0, ci_low=1.8, ci_high=2.2, verdict="faster")
            for k in range(3, 3 + points)
        )
        kind = "insufficient" if points < 2 else "always_faster"
        return Crossover(library, "gpu", operation, "float64", 1, "h", kind, curve)

    base = Findings("numpy", "cpu", MARGIN, False, None, (), (), (), (), ())
    single = [pair("cupy", "fft", 1), pair("torch", "fft", 1), pair("jax", "sort", 0)]
    text = key_findings(replace(base, crossovers=(pair("jax", "fft", 2), *single)), "NumPy")
    block = text.split("### Crossovers")[1]
    assert "no verdict" not in block
    assert "JAX beats NumPy on fft at every size" in block
    assert (
        "- No crossover against NumPy for 3 pairs of library and operation (fft, sort): "
        "fewer than two sizes have a speedup, and a crossover needs two." in block
    )
    # an 'insufficient' pair with two sizes (every size the same speed) keeps its sentence
    tied = replace(pair("torch", "sort", 2), kind="insufficient")
    text = key_findings(replace(base, crossovers=(tied,)), "NumPy")
    assert "every size is the same speed" in text and "No crossover against" not in text
