"""The maps of the package in docs/commands.md (moved there from README.md) and CONTRIBUTING.md match what is on
disk and what the notebooks import."""
from __future__ import annotations

import ast
import json
import re

from inferopt.paths import CHAPTERS, REPO_ROOT, SOLUTIONS

CONTRIBUTING = REPO_ROOT / "CONTRIBUTING.md"
START, END = "<!-- notebook-modules:start -->", "<!-- notebook-modules:end -->"


def inferopt_modules() -> set[str]:
    """Dotted names of every module and package in inferopt/ ('inferopt.planning.memory', ...)."""
    out = set()
    for p in (REPO_ROOT / "inferopt").rglob("*.py"):
        parts = p.relative_to(REPO_ROOT).with_suffix("").parts
        out.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def notebook_imports(path) -> list[str]:
    """inferopt modules a notebook's code cells import (`from inferopt.bench import plots` counts as
    inferopt.bench.plots), sorted. Lines starting with % or ! (IPython) are left out before parsing."""
    known = inferopt_modules()
    found = set()
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "code":
            continue
        src = "\n".join(line for line in "".join(cell["source"]).splitlines()
                        if not line.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.split(".")[0] == "inferopt"}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "inferopt":
                for a in node.names:
                    sub = f"{node.module}.{a.name}"
                    found.add(sub if sub in known else node.module)
    return sorted(found)


def actual_map() -> dict[str, list[str]]:
    nbs = sorted(CHAPTERS.glob("*.ipynb")) + sorted(SOLUTIONS.glob("*.ipynb"))
    return {str(p.relative_to(REPO_ROOT).with_suffix("")): [m.removeprefix("inferopt.") for m in notebook_imports(p)]
            for p in nbs}


def documented_map(text: str) -> dict[str, list[str]]:
    block = text[text.index(START) + len(START):text.index(END)]
    rows = {}
    for line in block.strip().splitlines()[2:]:
        nb, mods = (c.strip() for c in line.strip().strip("|").split("|"))
        rows[nb.strip("`")] = [m.strip().strip("`") for m in mods.split(",") if m.strip()]
    return rows


def table(mapping: dict[str, list[str]]) -> str:
    lines = ["| notebook | modules |", "|---|---|"]
    lines += [f"| `{nb}` | {', '.join(f'`{m}`' for m in mods)} |" for nb, mods in mapping.items()]
    return "\n".join(lines)


def test_contributing_maps_each_notebook_to_the_modules_it_imports():
    actual = actual_map()
    assert len(actual) >= 16 and all(actual.values())
    documented = documented_map(CONTRIBUTING.read_text(encoding="utf-8"))
    assert documented == actual, ("CONTRIBUTING.md's notebook -> modules table is stale; replace the table between "
                                  f"{START} and {END} with:\n{table(actual)}")


def test_the_map_check_sees_a_stale_row():
    text = CONTRIBUTING.read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `chapters/03-combination-pitfalls` |"))
    stale = text.replace(row, row.rsplit(",", 1)[0] + " |")   # one module fewer than the notebook imports
    assert stale != text
    assert documented_map(stale) != actual_map()


def test_notebook_imports_reads_function_level_and_from_imports(tmp_path):
    nb = tmp_path / "x.ipynb"
    cells = [{"cell_type": "code", "source": ["%matplotlib inline\n", "from inferopt.bench import plots, metrics\n"]},
             {"cell_type": "code", "source": ["def f():\n", "    import inferopt.planning.memory as m\n"]},
             {"cell_type": "markdown", "source": ["from inferopt import nothing"]},
             {"cell_type": "code", "source": ["from inferopt.diagnosis.decision import diagnose\n"]}]
    nb.write_text(json.dumps({"cells": cells}))
    assert notebook_imports(nb) == ["inferopt.bench.metrics", "inferopt.bench.plots", "inferopt.diagnosis.decision",
                                    "inferopt.planning.memory"]


def test_docs_name_every_subpackage_and_every_layer_module_exists():
    docs_row = next(line for line in (REPO_ROOT / "docs" / "commands.md").read_text(encoding="utf-8").splitlines()
                      if line.startswith("| `inferopt/` |"))
    contributing = CONTRIBUTING.read_text(encoding="utf-8")
    layers = contributing[contributing.index("### The package, layer by layer"):contributing.index(START)]
    subpackages = sorted(p.parent.name for p in (REPO_ROOT / "inferopt").glob("*/__init__.py"))
    assert subpackages == ["bench", "diagnosis", "i18n", "labcheck", "monitoring", "performance", "planning", "room",
                           "serving", "vllm_oracle", "widgets"]
    for sub in subpackages:
        assert f"`{sub}/`" in docs_row, sub
        assert f"`{sub}/`" in layers, sub
    assert "`assets.py`" in docs_row and "`gpu.py`" in docs_row
    # every module the layer table names in a "package/ (`a`, `b`)" group exists
    for pkg, names in re.findall(r"`(\w+)/` \(([^)]*)\)", layers):
        for name in re.findall(r"`(\w+)`", names):
            assert f"inferopt.{pkg}.{name}" in inferopt_modules(), f"{pkg}/{name}.py named in CONTRIBUTING.md"
