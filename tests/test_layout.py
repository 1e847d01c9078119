"""The package's layout: stages as packages, each importing only below itself, no module
too long to read, and a cell's path formatted in one place."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "src" / "numbench"
#: the floors, lowest first: a module may import from its own floor and the floors below
FLOORS = {
    "ground": 0,  # cells, contract, spec, stats, timing, formatting, errors
    "operations": 1,
    "libraries": 1,
    # numbench's inputs files, made with the operations they hold the inputs of
    "inputs_file": 1,
    "config": 2,
    # the three stages share a floor: they meet through files (test_no_stage_imports_another)
    "measure": 3,
    "analyse": 3,
    "report": 3,
    "offsite": 4,
    "check": 4,
    # reads results through the contract's tables only, above the stages, beside offsite
    "history": 4,
    # the results site: the history's frames drawn with the report's look, beside history
    "site": 4,
    # comparing runs: above the stages, beside history; reads the contract's tables, measures again
    "compare": 4,
    # the roofline, one package over the floors: each module on the floor of what it serves
    "roofline.contract": 0,
    "roofline.measure": 3,
    "roofline.analyse": 3,
    "roofline.report": 3,
    # the machine's state, one package over the floors: each module on the floor of what it serves
    "machine.contract": 0,
    "machine.system": 0,
    "machine.analyse": 3,
    "machine.report": 3,
    "cli": 5,
    "__main__": 5,
}
#: a module holds one concern, and one concern may be long: asv's and pyperf's modules run from
#: 300 to 750 lines. The cap catches a module that has grown a second concern; splitting one
#: only to pass a lower cap scattered a concern over files that each made sense only beside another
MAX_MODULE_LINES = 750
#: no function of the package, the rules' scripts or the benchmarks is longer (its decorators left out)
MAX_FUNCTION_LINES = 80


def longest_key(module: str, table: dict) -> str | None:
    """The longest key of ``table`` that is a dotted prefix of the module's name after
    ``numbench.`` (``roofline.measure`` for ``numbench.roofline.measure.kernels``), or None."""
    parts = module.split(".")[1:]
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in table:
            return ".".join(parts[:end])
    return None


def floor_of(module: str) -> int:
    """``numbench.measure.worker`` -> the measure floor, ``numbench.roofline.contract`` -> the
    ground floor (the longest key of FLOORS that is a prefix wins); a module of the ground
    floor unless FLOORS names it."""
    key = longest_key(module, FLOORS)
    return FLOORS[key] if key is not None else FLOORS["ground"]


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> list[tuple[int, str]]:
    """Each numbench module a file imports, with its line; ``from numbench.roofline import
    measure`` imports ``numbench.roofline.measure`` (each name after the module it is in: a
    package spanning floors is judged by the module taken from it)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "numbench" or node.module.startswith("numbench."):
                found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("numbench.")]
    return found


def test_no_module_imports_from_a_floor_above_its_own():
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        me = module_name(path)
        for line, target in imports_of(path):
            if floor_of(target) > floor_of(me):
                upward.append(f"{path.relative_to(REPO)}:{line} {me} imports {target}")
    assert upward == []


#: the workflow's stages: each imports the ground floor (and the floors between), never another
#: stage's modules; what one stage concludes travels to the next as a file
STAGES = {
    "measure": "measure",
    "analyse": "analyse",
    "report": "report",
    # the roofline's modules are parts of the stages they serve
    "roofline.measure": "measure",
    "roofline.analyse": "analyse",
    "roofline.report": "report",
    # the machine's state: its analysis and its words are parts of the stages they serve
    "machine.analyse": "analyse",
    "machine.report": "report",
}


def stage_of(module: str) -> str | None:
    """The stage a module is part of, by the longest key of STAGES that is a prefix of its
    name (as ``floor_of``); None for a module of no stage."""
    key = longest_key(module, STAGES)
    return STAGES[key] if key is not None else None


def test_no_stage_imports_another_stage():
    """measure, analyse and report meet through files, so none imports another's modules
    (a test of this file's own rule: every import inside a function counts too)."""
    across = []
    for path in sorted(PACKAGE.rglob("*.py")):
        me = stage_of(module_name(path))
        if me is None:
            continue
        for line, target in imports_of(path):
            other = stage_of(target)
            if other is not None and other != me:
                across.append(f"{path.relative_to(REPO)}:{line} {me} imports {target}")
    assert across == []


def test_no_module_is_over_the_line_limit():
    long = {
        str(p.relative_to(REPO)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_function_is_over_the_line_limit():
    """A function longer than a screen is split by what its pieces mean (issue 38)."""
    long = []
    for folder in (PACKAGE, REPO / "scripts", REPO / "benchmarks"):
        for path in sorted(folder.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > MAX_FUNCTION_LINES:
                        long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} {lines}")
    assert long == []


def test_a_cell_path_is_formatted_in_one_place():
    """Only numbench.cells spells the layout of a cell's files; the rules take it from there."""
    spelled = re.compile(r"\{dtype\}/t\{threads\}|/t\{[a-z_.]*threads")
    places = [
        str(p.relative_to(REPO))
        for p in [*PACKAGE.rglob("*.py"), *(REPO / "workflow").rglob("*.smk")]
        if spelled.search(p.read_text(encoding="utf-8"))
    ]
    assert places == ["src/numbench/cells.py"]
