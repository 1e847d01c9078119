"""The results site (``numbench site``): its pages' content, and every page in a real browser.

The browser test drives Debian's Chromium through Playwright for Python (pinned in
envs/requirements-cpu.txt; no browser is downloaded: it launches the system's ``chromium``).
Where either is missing it is skipped with the reason (``.ci/run`` installs Chromium on CI).
It takes seconds (a browser, every page drawn), so it is marked e2e: ``make test`` runs it,
``make test-fast`` leaves it out.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, made_once
from test_history import VERSIONS, results_frame, write_results

from numbench import history
from numbench.site import MANIFEST, SiteError, build_site
from numbench.site.pages import BUNDLE, operation_file, text

HOSTILE_HOST = "offsite<img src=x onerror=alert(1)>&co"
HOSTILE_VERSION = "9.9</script><script>alert(1)</script>"
SLOW = ("torch", "sort", 10000, 1.2)


def make_store(tmp_path: Path, hostile: bool = True) -> Path:
    """8 runs of 24 cells on one host, torch sort 10000 slowed 1.2x and numpy 2.4.6 -> 2.5.0
    from run 5, and one imported offsite run on a second host (hostile names, if asked)."""
    store = tmp_path / "history"
    for run in range(1, 9):
        versions = dict(VERSIONS, numpy="2.5.0") if run >= 5 else None
        bench = results_frame(run, slow=SLOW if run >= 5 else None, versions=versions)
        history.add_results(write_results(tmp_path / f"r{run}", bench), store)
    host = HOSTILE_HOST if hostile else "offsite-gpu"
    offsite = results_frame(9, host=host, versions=dict(VERSIONS, jax=HOSTILE_VERSION))
    history.add_results(write_results(tmp_path / "offsite", offsite), store)
    return store


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The store's site, built once a session (``made_once``: with the tests in two
    processes, the second reads the first's)."""

    def make() -> Path:
        tmp = tmp_path_factory.mktemp("site")
        out = tmp / "site"
        build_site(make_store(tmp), out, margin=1.1)
        return out

    return made_once(tmp_path_factory, "site", make)


def specs_of(page: str) -> list[dict]:
    """The charts' specs embedded in a page (each vegaEmbed call's second argument)."""
    decoder = json.JSONDecoder()
    found = []
    for match in re.finditer(r'vegaEmbed\("#chart-\d+", ', page):
        spec, _ = decoder.raw_decode(page, match.end())
        found.append(spec)
    return found


def datasets(spec: dict) -> list[dict]:
    """Every data row of a spec (its named datasets)."""
    return [row for rows in spec["datasets"].values() for row in rows]


def test_the_index_lists_both_machines_the_operations_and_the_step(site):
    index = (site / "index.html").read_text(encoding="utf-8")
    assert text(HOSTILE_HOST) in index and "testhost" in index
    assert "9 runs on 2 machines" in index
    for operation in ("fft", "sort"):
        assert f'href="{operation_file(operation)}"' in index
        assert (site / operation_file(operation)).is_file()
    changes = index.split("<h2>Changes</h2>")[1].split("<h2>")[0]
    assert "torch/cpu sort 10000 float64 t1" in changes and "numpy 2.4.6 -&gt; 2.5.0" in changes
    assert changes.count("<tr>") == 2  # the header and the one step
    runs = index.split("<h2>Runs</h2>")[1]
    assert runs.count("<tr>") == 10 and "first run" in runs


def test_no_value_from_the_store_reaches_a_page_as_markup(site):
    for page in site.glob("*.html"):
        content = page.read_text(encoding="utf-8")
        assert "<img" not in content and "<script>alert" not in content, page.name
        assert "</script><script>" not in content, page.name
    index = (site / "index.html").read_text(encoding="utf-8")
    assert html.escape(HOSTILE_HOST) in index
    # in a chart's spec the hostile text is data: the same string once the JSON is read
    sort = (site / operation_file("sort")).read_text(encoding="utf-8")
    rows = [row for spec in specs_of(sort) for row in datasets(spec)]
    assert any(row.get("library_version") == HOSTILE_VERSION for row in rows)


def test_a_second_machine_is_a_panel_of_its_own_beside_the_first(site):
    fft = (site / operation_file("fft")).read_text(encoding="utf-8")
    specs = specs_of(fft)
    assert len(specs) == 3  # fft at three sizes, float64, 1 thread
    for spec in specs:
        panels = [p["title"] for p in spec["hconcat"]]
        assert panels == [HOSTILE_HOST, "testhost"]


def test_the_step_is_marked_on_its_cell_and_the_version_change_annotated(site):
    sort = (site / operation_file("sort")).read_text(encoding="utf-8")
    steps_table = sort.split("<h2>Steps found</h2>")[1].split("<h2>")[0]
    assert "torch/cpu sort 10000 float64 t1" in steps_table and "from run" in steps_table
    marked = {}
    for spec in specs_of(sort):
        for row in datasets(spec):
            if "ratio_text" in row:
                marked.setdefault(row["series"], []).append(row)
    assert list(marked) == ["torch"] and len(marked["torch"]) == 1
    step = marked["torch"][0]
    assert step["run_number"] == 5 and step["run_started_at"].startswith("2026-01-05")
    versions = {
        row["versions"] for spec in specs_of(sort) for row in datasets(spec) if "versions" in row
    }
    assert versions == {"numpy 2.4.6 -> 2.5.0"}
    fft = (site / operation_file("fft")).read_text(encoding="utf-8")
    assert "no step found in this operation" in fft
    assert not any("ratio_text" in row for s in specs_of(fft) for row in datasets(s))


def test_pages_reference_the_bundle_written_once(site, tmp_path):
    bundle = site / BUNDLE
    assert bundle.stat().st_size > 100_000 and "vegaEmbed" in bundle.read_text(encoding="utf-8")
    for page in site.glob("op-*.html"):
        content = page.read_text(encoding="utf-8")
        assert content.count(f'<script src="{BUNDLE}"></script>') == 1
        assert len(content) < 200_000  # the bundle is not inlined
    store = make_store(tmp_path, hostile=False)
    assert build_site(store, tmp_path / "out").bundle_written
    assert not build_site(store, tmp_path / "out").bundle_written


def test_an_operation_page_is_named_by_a_safe_file_name():
    for operation in ("../../etc/passwd", "../../etc/<x>", "..", "a/b", "/"):
        name = operation_file(operation)
        assert "/" not in name and ".." not in name, name
        assert re.fullmatch(r"op-[A-Za-z0-9_-]+-[0-9a-f]{8}\.html", name), name
    assert operation_file("a/b") != operation_file("a?b")


def test_an_operation_and_a_cpu_model_with_markup_reach_no_page_as_markup(tmp_path):
    """An operation "x<script>", a CPU "<b>" and a host "<i>box" (a chart's panel title) are
    text on every page: titles, headings, tables and the charts' specs."""
    for run, host in ((1, "testhost"), (2, "testhost"), (3, "<i>box")):
        bench = results_frame(run, host=host)
        bench["operation"] = bench["operation"].replace({"fft": "x<script>"})
        bench["cpu_model"] = "<b>"
        history.add_results(write_results(tmp_path / f"r{run}", bench), tmp_path / "history")
    built = build_site(tmp_path / "history", tmp_path / "site", margin=1.1)
    assert len(built.pages) == 3
    for page in built.pages:
        content = page.read_text(encoding="utf-8")
        for markup in ("x<script>", "<b>", "<i>"):
            assert markup not in content, (page.name, markup)
    index = built.pages[0].read_text(encoding="utf-8")
    assert f'href="{operation_file("x<script>")}">x&lt;script&gt;</a>' in index
    assert "<td>&lt;b&gt;</td>" in index and "<td>&lt;i&gt;box</td>" in index
    page = (tmp_path / "site" / operation_file("x<script>")).read_text(encoding="utf-8")
    assert "<title>numbench: x&lt;script&gt;</title>" in page
    assert "<h1>x&lt;script&gt;</h1>" in page and "<h2>x&lt;script&gt;, size 1000," in page
    specs = specs_of(page)
    assert len(specs) == 3
    for spec in specs:
        assert [panel["title"] for panel in spec["hconcat"]] == ["<i>box", "testhost"]


def test_a_store_without_ok_cells_gives_an_index_that_says_so(tmp_path):
    bench = results_frame(1)
    bench["status"], bench["median_s"] = "failed", float("nan")
    history.add_results(write_results(tmp_path / "r1", bench), tmp_path / "history")
    built = build_site(tmp_path / "history", tmp_path / "site", margin=1.1)
    assert [p.name for p in built.pages] == ["index.html"]
    index = built.pages[0].read_text(encoding="utf-8")
    assert "no ok cell in any run" in index and "1 run on 1 machine" in index


def small_store(tmp_path: Path, operations=("fft", "sort"), name: str = "history") -> Path:
    """A store of one run of ``operations``."""
    bench = results_frame(1)
    bench = bench[bench["operation"].isin(operations)]
    history.add_results(write_results(tmp_path / f"r-{name}", bench), tmp_path / name)
    return tmp_path / name


def test_a_folder_of_other_files_is_refused_and_left_as_it_was(tmp_path):
    store = small_store(tmp_path)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md").write_text("mine")
    (docs / "op-mine-0123abcd.html").write_text("mine too")
    with pytest.raises(SiteError, match=re.escape(f"{docs} holds other files and no {MANIFEST}")):
        build_site(store, docs, margin=1.1)
    assert sorted(p.name for p in docs.iterdir()) == ["notes.md", "op-mine-0123abcd.html"]
    with pytest.raises(SiteError, match="is the history store .* or inside it"):
        build_site(store, store / "site", margin=1.1)
    assert not (store / "site").exists()
    (tmp_path / "file").write_text("")
    with pytest.raises(SiteError, match="is a file, not a folder"):
        build_site(store, tmp_path / "file", margin=1.1)


def test_a_rebuild_deletes_only_the_pages_its_manifest_listed(tmp_path):
    out = tmp_path / "site"
    first = build_site(small_store(tmp_path), out, margin=1.1)
    listed = json.loads((out / MANIFEST).read_text())["files"]
    assert sorted(listed) == sorted(
        ["index.html", BUNDLE, "assets/site.css"] + [p.name for p in first.pages[1:]]
    )
    # files of the user's in a site: never listed, never deleted
    (out / "op-mine-0123abcd.html").write_text("mine")
    (out / "README.txt").write_text("mine too")
    # fft is no longer in the (other) store: its page goes, sort's is written again
    build_site(small_store(tmp_path, ("sort",), "sorts"), out, margin=1.1)
    names = sorted(p.name for p in out.glob("*.html"))
    assert names == sorted(["index.html", "op-mine-0123abcd.html", operation_file("sort")])
    assert (out / "README.txt").is_file()
    assert operation_file("fft") not in json.loads((out / MANIFEST).read_text())["files"]


def test_a_build_cut_off_halfway_is_accepted_and_completed_by_the_next(tmp_path, monkeypatch):
    import numbench.site as site_module

    store, out = small_store(tmp_path), tmp_path / "site"

    def fails(*args):
        raise RuntimeError("cut off")

    monkeypatch.setattr(site_module, "operation_page", fails)
    with pytest.raises(RuntimeError, match="cut off"):
        build_site(store, out, margin=1.1)
    assert (out / "index.html").is_file() and (out / MANIFEST).is_file()
    monkeypatch.undo()
    built = build_site(store, out, margin=1.1)
    assert [p.name for p in built.pages[1:]] == [operation_file(o) for o in ("fft", "sort")]
    (out / MANIFEST).write_text("{not json")
    with pytest.raises(SiteError, match="is not the manifest of a site"):
        build_site(store, out, margin=1.1)


#: the one variable kept in the commands' bare environments: the suite's cache folder
#: (conftest), so that the charts' bundle is not written into the user's cache
KEPT = {"NUMBENCH_CACHE_DIR": os.environ["NUMBENCH_CACHE_DIR"]}


def run_site(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "numbench", "site", *args],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO / "src"), "PATH": str(Path(sys.executable).parent), **KEPT},
    )


@pytest.mark.e2e
def test_the_command_builds_the_site_and_refuses_an_empty_store(tmp_path):
    store = make_store(tmp_path, hostile=False)
    proc = run_site("--history", str(store), "--out", str(tmp_path / "web"))
    assert proc.returncode == 0, proc.stderr
    assert "site: 3 pages" in proc.stdout and (tmp_path / "web" / "index.html").is_file()
    empty = run_site("--history", str(tmp_path / "nothing"), "--out", str(tmp_path / "w2"))
    assert empty.returncode == 2 and "holds no run" in empty.stderr
    assert not (tmp_path / "w2").exists()
    bad = run_site("--history", str(store), "--margin", "0.5")
    assert bad.returncode == 2 and "--margin must be a factor" in bad.stderr
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "op-a-01234567.html").write_text("mine")
    mine = run_site("--history", str(store), "--out", str(tmp_path / "docs"))
    assert mine.returncode == 2 and f"holds other files and no {MANIFEST}" in mine.stderr
    assert [p.name for p in (tmp_path / "docs").iterdir()] == ["op-a-01234567.html"]


def site_script(*args: str) -> subprocess.CompletedProcess:
    """scripts/site.py, as rule site runs it."""
    return subprocess.run(
        [sys.executable, str(REPO / "scripts" / "site.py"), *args],
        capture_output=True,
        text=True,
        env={"PATH": str(Path(sys.executable).parent), **KEPT},
    )


@pytest.mark.e2e
def test_the_rule_s_script_finds_steps_with_the_margin_it_is_given(tmp_path):
    store = make_store(tmp_path, hostile=False)
    steps = {}
    for margin in ("1.1", "1.3"):
        out = tmp_path / f"site-{margin}"
        done = site_script("--history", str(store), "--out", str(out), "--margin", margin)
        assert done.returncode == 0, done.stderr
        index = (out / "index.html").read_text(encoding="utf-8")
        steps[margin] = index.split("<h2>Changes</h2>")[1].split("<h2>")[0]
    assert "torch/cpu sort 10000 float64 t1" in steps["1.1"]
    assert "no step found in any cell" in steps["1.3"]


def test_the_rule_s_script_says_why_an_empty_store_fails_without_a_traceback(tmp_path):
    done = site_script("--history", str(tmp_path / "none"), "--out", str(tmp_path / "s"))
    assert done.returncode == 2 and "--margin" in done.stderr  # the rule always passes it
    done = site_script(
        "--history", str(tmp_path / "none"), "--out", str(tmp_path / "s"), "--margin", "1.1"
    )
    assert done.returncode == 1 and "holds no run: there is nothing to publish" in done.stderr
    assert "Traceback" not in done.stderr


# -- in a real browser ------------------------------------------------------------------------

#: Chromium's switches: headless, no network of its own, nothing from the user's profile
BROWSER_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
#: how long a page's charts may take to draw (ms)
DRAW_TIMEOUT_MS = 30_000
POLL_MS = 50


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed: pip install the pinned set"
    )
    exe = shutil.which("chromium")
    if exe is None:
        pytest.skip("chromium is not installed: install Debian's chromium to run the browser test")
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=exe, args=BROWSER_ARGS)
        yield launched
        launched.close()


def open_page(browser, path: Path) -> tuple[int, int, list[str]]:
    """Open ``path`` from the file system, the network cut off: (chart divs, charts drawn,
    console messages and page errors). It waits until every chart is drawn, something is
    said, or ``DRAW_TIMEOUT_MS`` has passed."""
    page = browser.new_page()
    said: list[str] = []
    page.on("console", lambda m: said.append(f"console {m.type}: {m.text}"))
    page.on("pageerror", lambda e: said.append(f"page error: {e}"))
    # anything but a file of the site is refused: a page that needs the network fails here
    page.route(re.compile(r"^(?!file:).*"), lambda route: route.abort())
    page.goto(path.resolve().as_uri())
    charts = page.locator("div.chart").count()
    drawn = page.locator("div.chart svg.marks, div.chart canvas.marks")
    waited = 0
    while drawn.count() < charts and not said and waited < DRAW_TIMEOUT_MS:
        page.wait_for_timeout(POLL_MS)
        waited += POLL_MS
    result = charts, drawn.count(), said
    page.close()
    return result


@pytest.mark.e2e
def test_every_page_opens_from_the_file_system_with_every_chart_drawn(browser, site):
    pages = sorted(site.glob("*.html"))
    assert len(pages) == 3
    for path in pages:
        charts, drawn, said = open_page(browser, path)
        assert said == [], f"{path.name}: {said}"
        assert drawn == charts, f"{path.name}: {drawn} of {charts} charts drawn"
        assert charts == (0 if path.name == "index.html" else 3)


@pytest.mark.e2e
def test_the_browser_check_catches_a_page_that_fails(browser, site, tmp_path):
    """The check above can fail: a page whose chart's spec is broken logs an error and draws
    nothing, and is caught."""
    page = (site / operation_file("fft")).read_text(encoding="utf-8")
    broken = tmp_path / "broken.html"
    shutil.copytree(site / "assets", tmp_path / "assets")
    broken.write_text(page.replace('"mark":', '"mark_broken":', 1), encoding="utf-8")
    charts, drawn, said = open_page(browser, broken)
    assert said and drawn < charts
