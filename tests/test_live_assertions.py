"""No live notebook asserts a measured time, rate or ratio against a fixed number.

A learner with a faster (or slower) machine than ours must not get an AssertionError for it:
a live cell states a relation between runs in the same notebook (``thr[4] > 1.2 * thr[1]``),
or compares with a value the notebook computed or configured (``hits >= floor``,
``t < WAIT_S``). This test reads every code cell of chapters/ and solutions/ with Python's
``ast`` module and fails on an ``assert`` whose comparison puts a *measured* quantity (a name,
attribute or dict key that reads like a latency, throughput, rate or duration) directly against a
numeric literal other than 0 (``> 0`` is a sanity check that holds on any machine).

``ALLOWED`` lists the exceptions, each with its reason; keep it short.
"""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from inferopt.paths import REPO_ROOT

# what a measured figure is called in this course's code
MEASURED = re.compile(
    r"(ttft|tpot|itl|e2e|latency|thr|throughput|tok_s|rps|qps|rate|gain|speed|wall|duration|elapsed|"
    r"scrape|evaluation|seconds|_ms$|_s$|^t_|hit|tpot|ratio|x_faster|speedup)", re.IGNORECASE)

# (notebook, text of the assert, reason). An entry that no longer matches anything fails the test,
# so the list cannot rot.
ALLOWED: list[tuple[str, str, str]] = [
    ("01-technique-map.ipynb", "assert thr_ratio > 1",
     "not live: reads 02b's stored sweep (inferopt.stored_outputs); the ratio of two runs against 1 is the "
     "direction the generated sentence states"),
    ("02-decision-tree.ipynb", "assert itl_ratio < 1 and ttft_ratio >= ttft_floor",
     "not live: reads 02b's stored runs and the floor 02b derived from its own run-to-run margin; guards the "
     "direction of the A1 erratum"),
    ("02-decision-tree.ipynb", "assert thr_ratio > 1 and tpot_ratio >= 1 - tpot_margin / 100",
     "not live: reads 02b's stored sweep and its measured run-to-run margin; guards the direction of the B3 "
     "erratum"),
    ("03-combination-pitfalls.ipynb", "assert abs(r.model_tokens_per_step - r.measured_tokens_per_step) < 1e-06",
     "not a speed: the formula reproduces the recorded tokens per step (agreement), and alpha exceeds the ratio"),
]


def _notebooks() -> list[Path]:
    return sorted((REPO_ROOT / "chapters").glob("*.ipynb")) + sorted((REPO_ROOT / "solutions").glob("*.ipynb"))


def _words(node: ast.AST) -> list[str]:
    """Identifiers, attribute names and string keys inside an expression."""
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            out.append(n.id)
        elif isinstance(n, ast.Attribute):
            out.append(n.attr)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            out.append(n.value)
    return out


def _literal(node: ast.AST) -> float | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _literal(node.operand)
        return None if v is None else -v
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    return None


def _is_agreement(node: ast.AST) -> bool:
    """``abs(a - b) < tol``: two values agreeing (ours vs Prometheus', client vs server), not a speed."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "abs"
            and len(node.args) == 1 and isinstance(node.args[0], ast.BinOp) and isinstance(node.args[0].op, ast.Sub))


def offending_asserts(source: str) -> list[str]:
    """The asserts in ``source`` that compare a measured-looking quantity with a numeric literal."""
    try:
        tree = ast.parse("\n".join(ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!"))))
    except SyntaxError:
        return []
    bad = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        for cmp in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
            operands = [cmp.left, *cmp.comparators]
            for i, op in enumerate(cmp.ops):
                if isinstance(op, (ast.Eq, ast.NotEq)):
                    continue    # equality with a literal: a computed value (a measured float is never exact)
                a, b = operands[i], operands[i + 1]
                for side, lit in ((a, _literal(b)), (b, _literal(a))):
                    if lit is None or lit == 0 or _literal(side) is not None or _is_agreement(side):
                        continue
                    if any(MEASURED.search(w) for w in _words(side)):
                        bad.append(ast.get_source_segment(ast.unparse(node), ast.unparse(node)) or ast.unparse(node))
    return sorted(set(bad))


def scan(paths=None) -> list[tuple[str, str]]:
    found = []
    for path in paths or _notebooks():
        nb = json.loads(path.read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            if cell["cell_type"] != "code":
                continue
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            for text in offending_asserts(src):
                found.append((path.name, text))
    return found


def _allowed(nb: str, text: str) -> bool:
    return any(nb == a_nb and a_text in text for a_nb, a_text, _ in ALLOWED)


def test_no_live_assertion_compares_a_measurement_with_a_constant():
    found = scan()
    bad = [f"{nb}: {text}" for nb, text in found if not _allowed(nb, text)]
    assert not bad, ("live assertions compare a measured figure with a fixed number; make each a relation between "
                     "runs in the same notebook (margin from measured spread) or add it to ALLOWED with a reason:\n  "
                     + "\n  ".join(bad))


def test_allow_list_entries_are_used_and_explained():
    found = scan()
    for nb, text, reason in ALLOWED:
        assert len(reason) > 20, f"ALLOWED entry {nb}: {text!r} needs a reason"
        assert any(f_nb == nb and text in f_text for f_nb, f_text in found), (
            f"ALLOWED entry {nb}: {text!r} matches nothing any more; remove it")


@pytest.mark.parametrize("source", [
    "assert ttft_ms < 500",
    "assert thr > 20",
    "assert s['prefix_cache_hit_rate'] > 0.2",
    "assert 0 < scrape < 1.0 and 0 < evaluation < 0.5",
    "assert summary['tpot_p95_ms'] <= 120.0, 'too slow'",
    "assert gain[1] > 1.5",
    "x = 1\nassert run.wall_s < 60",
])
def test_catches_a_planted_bad_assertion(source, tmp_path):
    assert offending_asserts(source), f"not caught: {source}"
    nb = {"cells": [{"cell_type": "code", "source": source, "metadata": {}, "outputs": []}], "metadata": {},
          "nbformat": 4, "nbformat_minor": 5}
    planted = tmp_path / "planted.ipynb"
    planted.write_text(json.dumps(nb))
    assert scan([planted]), "scan() misses a planted bad assertion"


@pytest.mark.parametrize("source", [
    "assert thr[4] > 1.2 * thr[1]",                # a relation between two runs
    "assert warm_ttft < cold_ttft / 2",
    "assert hits >= floor",                        # a value the notebook computed
    "assert t_ttft < WAIT_S",                      # a configured value, named
    "assert 0 < test_rate < lam",                  # positivity holds anywhere
    "assert srv.kv_cache_tokens == 23296",         # a computed count, not a speed
    "assert len(fig.data) == 6",
    "assert abs(p95_prom - p95_ours) < 1e-9",      # two computations agreeing
    "assert per_instance_qps == 50",               # equality: computed from fixed data
    "assert s['completed'] == 12 and s['failed'] == 0",
])
def test_lets_relations_through(source):
    assert not offending_asserts(source), f"wrongly flagged: {source}"
