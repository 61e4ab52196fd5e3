"""Which statements of a submission a task needs: the grader reads definitions by name, never runs
a cell whole (shared by the checker, ``isolated.py``, and the submission's process, ``sandbox.py``)."""
from __future__ import annotations

import ast
import re

MAGIC = re.compile(r"^\s*[%!]")


def statements(src: str) -> list[ast.stmt]:
    """Top-level statements of a cell (IPython magics and shell lines dropped; a syntax error: none)."""
    if src.lstrip().startswith("%%"):
        return []
    src = "\n".join("" if MAGIC.match(line) else line for line in src.splitlines())
    try:
        return ast.parse(src).body
    except SyntaxError:
        return []


def _walk_outer(node):
    """Nodes of a statement, not descending into function bodies, lambdas, classes or comprehensions."""
    yield node
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp,
                              ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        yield from _walk_outer(child)


def bound(stmt: ast.stmt) -> set[str]:
    """Names a top-level statement binds (def, class, import, assignment, loop target...)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names if a.name != "*"}
    if isinstance(stmt, ast.Expr):
        return set()
    out = set()
    for node in _walk_outer(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not stmt:
            out.add(node.name)
    return out


def mutated(stmt: ast.stmt) -> set[str]:
    """Names whose items a statement sets (``answers["x"] = ...``)."""
    out = set()
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
    for t in targets:
        while isinstance(t, ast.Subscript):
            t = t.value
        if isinstance(t, ast.Name) and t is not None and not isinstance(getattr(stmt, "target", None), ast.Name):
            out.add(t.id)
    return out


def used(stmt: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def select(required: set[str], pristine: set[str], cells: list[str]) -> list[ast.stmt]:
    """The submission's statements the task needs: those binding a required name, and (transitively)
    those binding a name a selected statement uses; never one that binds only release names."""
    stmts = [s for src in cells for s in statements(src)]
    want = set(required)
    chosen: set[int] = set()
    changed = True
    while changed:
        changed = False
        for i, s in enumerate(stmts):
            if i in chosen:
                continue
            b = bound(s)
            hit = (b & want and not b <= pristine) or (isinstance(s, (ast.Assign, ast.AugAssign)) and mutated(s) & want
                                                        and not mutated(s) <= pristine)
            if hit:
                chosen.add(i)
                want |= used(s) - pristine
                changed = True
    return [s for i, s in enumerate(stmts) if i in chosen]
