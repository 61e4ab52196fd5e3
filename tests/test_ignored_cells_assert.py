"""A cell that ignores its output under nbval (``# NBVAL_IGNORE_OUTPUT``) and prints what it measured or
computed asserts something about it (CONTRIBUTING, "Strict nbval"): otherwise nothing in CI checks what
it shows (an ``assert``, a ``raise``, or a call to a ``check_*`` function, which raises on a wrong
value). Cells that only display a figure or a generated Markdown answer are exempt (the figures and
the prose are checked by their own tests); a cell that prints, or ends on a bare value, is not."""
from __future__ import annotations

import ast
import json

import pytest

from inferopt.paths import REPO_ROOT

NOTEBOOKS = sorted([*REPO_ROOT.glob("chapters/*.ipynb"), *REPO_ROOT.glob("solutions/*.ipynb")])
DISPLAY = {"display", "show", "Markdown", "HTML"}     # calls that render, not print


def _tree(source: str) -> ast.Module:
    lines = [ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!"))]
    return ast.parse("\n".join(lines))


def _name(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def unasserted_printing(source: str) -> bool:
    """True when an ignored-output cell prints (or shows a bare value) and asserts nothing."""
    tree = _tree(source)
    if any(isinstance(n, (ast.Assert, ast.Raise)) or (isinstance(n, ast.Call) and _name(n).startswith("check"))
           for n in ast.walk(tree)):
        return False
    prints = any(isinstance(n, ast.Call) and _name(n) == "print" for n in ast.walk(tree))
    last = tree.body[-1] if tree.body else None
    bare = (isinstance(last, ast.Expr) and not (isinstance(last.value, ast.Call) and _name(last.value) in DISPLAY | {"print"})
            and not isinstance(last.value, ast.Constant))
    return prints or bare


def _ignored_cells():
    for nb in NOTEBOOKS:
        cells = [c for c in json.loads(nb.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
        for i, c in enumerate(cells):
            src = "".join(c["source"])
            if src.lstrip().startswith("# NBVAL_IGNORE_OUTPUT"):
                yield f"{nb.relative_to(REPO_ROOT)} code cell {i}", src


def test_every_ignored_cell_that_prints_asserts():
    offenders = [where for where, src in _ignored_cells() if unasserted_printing(src)]
    assert not offenders, "cells that ignore their output, print it, and assert nothing: " + ", ".join(offenders)


@pytest.mark.parametrize("src, flagged", [
    ("# NBVAL_IGNORE_OUTPUT\nx = run()\nprint(x)", True),                       # prints, checks nothing
    ("# NBVAL_IGNORE_OUTPUT\nx = run()\nx.summary()", True),                    # a bare value shown
    ("# NBVAL_IGNORE_OUTPUT\nif roof:\n    print(roof.peak)", True),            # nested print
    ("# NBVAL_IGNORE_OUTPUT\nx = run()\nprint(x)\nassert x.ok", False),
    ("# NBVAL_IGNORE_OUTPUT\nfig = go.Figure()\nfig.show()", False),            # a figure only
    ("# NBVAL_IGNORE_OUTPUT\ndisplay(Markdown(f'{x}'))", False),                # a generated answer only
    ("# NBVAL_IGNORE_OUTPUT\np = predict()\nprint(p)\nPM.check_sweep(p)", False),   # a check function raises
    ("# NBVAL_IGNORE_OUTPUT\np = predict()\nprint(p)\nchecked = p", True),           # a name is no check
    ("# NBVAL_IGNORE_OUTPUT\n%time x = run()\nprint(x)\nif not x.ok:\n    raise SystemExit(x)", False),
])
def test_the_rule_rejects_printing_without_an_assertion(src, flagged):
    assert unasserted_printing(src) is flagged
