"""Grade one task of one submission in a fresh interpreter (``python -m inferopt.labcheck.isolated``).

``grade.py`` starts this module once per task and sends it, on stdin, a JSON job: the release's
cells up to the task's check cell, the submission's code cells, which check to run and a token.
This process then

1. imports the lab's check from the installed package and keeps a reference to it, and takes a
   snapshot of every ``inferopt`` module (and class), numpy, math, statistics and builtins;
2. runs the release's own set-up cells (pristine, from ``solutions/``), without their bare
   expression statements (prints, displays);
3. takes from the submission **only the definitions the task needs, by name**: the names the
   release's solution cells bind (``kv_bytes_per_token``, ``answers``...), and, transitively, the
   statements that bind the names those use (the learner's helpers and imports). A statement that
   binds no such name never runs: a cell that silences errors, replaces a check or prints is left
   out. Names the release defines (the incidents, the tables, the SLOs) keep the release's values;
4. runs those statements under a profiler that sees every call into the package functions the
   lab forbids (by code object or bytecode, so aliases, default arguments, private module paths
   and copies are all caught) and with ``solutions/`` closed (an audit hook);
5. puts the snapshot back, calls the pristine check on the namespace, checks the snapshot again,
   and writes the verdict as one line ``<token> <json>`` to a copy of stdout it made before any
   learner code ran (the learner's prints go to stderr).

Nothing in the learner's notebook process (IPython's exception hooks, a replaced check, a
patched module) reaches this process. What it cannot stop is written in INSTRUCTORS.md: code
inside a graded function runs here, in the same interpreter as the check.
"""
from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import json
import os
import re
import sys
import types

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


def _snapshot():
    mods = {name: m for name, m in sys.modules.items()
            if isinstance(m, types.ModuleType) and (name == "inferopt" or name.startswith("inferopt.")
                                                     or name in ("numpy", "math", "statistics", "builtins"))}
    snap = {}
    for name, m in mods.items():
        snap[("m", name)] = (m, dict(vars(m)))
        if name.startswith("inferopt"):
            for v in list(vars(m).values()):
                if inspect.isclass(v) and getattr(v, "__module__", "").startswith("inferopt"):
                    snap[("c", f"{v.__module__}.{v.__qualname__}")] = (v, dict(vars(v)))
    return snap


def _code_like(v) -> bool:
    return callable(v) or isinstance(v, types.ModuleType)


def _restore(snap) -> bool:
    """Put every snapshotted module and class dict back. True when a function, class or module in
    them had been replaced or removed (data such as a module's cache may change legitimately)."""
    changed = False
    for (kind, _), (obj, saved) in snap.items():
        now = vars(obj)
        for k, v in saved.items():
            if now.get(k, _MISSING) is v:
                continue
            changed = changed or _code_like(v)
            if kind == "m":
                now[k] = v
            else:
                try:
                    setattr(obj, k, v)
                except (AttributeError, TypeError):
                    pass
    return changed


_MISSING = object()


def _run_stmt(stmt, ns, filename):
    code = compile(ast.Module(body=[stmt], type_ignores=[]), filename, "exec")
    exec(code, ns)


def grade(job: dict) -> dict:
    from inferopt import labcheck
    from inferopt.labcheck import CheckFailed, NotDone, Shortcut, _Watch, forbid, guard_solutions

    mod = importlib.import_module(f"inferopt.labcheck.{job['lab']}")
    check = getattr(mod, job["check"])
    targets = [t for name, v in vars(mod).items() if name.endswith("FORBIDDEN") and isinstance(v, list) for t in v]
    snap = _snapshot()
    guard_solutions(True)

    ns: dict = {"__name__": "__main__", "__builtins__": builtins}
    required, pristine, retry = set(), set(), []
    for cell in job["release_cells"]:
        body = statements(cell["source"])
        if cell["solution"]:
            required |= {n for s in body for n in bound(s)}
            continue
        for s in body:
            if isinstance(s, ast.Expr):
                continue
            pristine |= bound(s)
            try:
                _run_stmt(s, ns, "<release>")
            except Exception:
                retry.append(s)
    pristine -= required
    saved = {k: ns[k] for k in pristine if k in ns}

    problems, hits = [], []
    chosen = select(required, pristine, job["submission_cells"])
    watch_targets = forbid(None, targets)
    with watch_targets:
        for s in chosen:
            watch = _Watch(labcheck._ACTIVE)
            prev = sys.getprofile()
            sys.setprofile(watch)
            try:
                _run_stmt(s, ns, "<your notebook>")
            except NotImplementedError:
                pass
            except BaseException as exc:
                if not isinstance(exc, Exception):
                    raise
                problems.append(f"{type(exc).__name__}: {exc}")
            finally:
                sys.setprofile(prev)
            if watch.hits:
                names = sorted(bound(s) | mutated(s))
                hits.append(f"the statement that defines `{names[0] if names else '?'}` calls {watch.hits[0]}")
        for s in retry:
            try:
                _run_stmt(s, ns, "<release>")
            except Exception:
                pass
    ns.update(saved)
    _restore(snap)
    if hits:
        return {"status": "failed", "error": "Shortcut",
                "message": f"{job['task']}: {hits[0]}: write it yourself"}

    import contextlib
    import io

    buf = io.StringIO()
    status, error, message = "passed", "", ""
    try:
        with contextlib.redirect_stdout(buf):
            check(ns, **({"seed": job["seed"]} if job.get("seed") is not None
                         and "seed" in inspect.signature(check).parameters else {}))
    except (CheckFailed, NotDone, Shortcut) as exc:
        status, error, message = "failed", type(exc).__name__, str(exc)
    except Exception as exc:
        status, error, message = "failed", type(exc).__name__, f"{job['task']}: the check could not run: {exc}"
    if _restore(snap):
        return {"status": "failed", "error": "Tampered",
                "message": f"{job['task']}: your code changed the course's modules while the check ran; "
                           "the check cannot judge code that does that"}
    if status == "passed":
        message = buf.getvalue().strip().splitlines()[-1] if buf.getvalue().strip() else "passed"
    elif problems and error != "Shortcut":
        message += f" (while loading your cells: {problems[0]})"
    return {"status": status, "error": error, "message": message}


def main() -> int:
    job = json.loads(sys.stdin.read())
    token = job.pop("token")
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # what the learner's code prints goes to stderr, never into the verdict channel
    sys.stdout = sys.__stdout__ = open(1, "w", encoding="utf-8", closefd=False)
    try:
        verdict = grade(job)
    except BaseException as exc:
        verdict = {"status": "failed", "error": type(exc).__name__,
                   "message": f"{job.get('task', 'task')}: grading stopped: {type(exc).__name__}: {exc}"}
    out.write(f"{token} {json.dumps(verdict)}\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
