"""Grade one task of one submission: the checker (``python -m inferopt.labcheck.isolated``).

``grade.py`` starts this module once per task and sends it, on stdin, a JSON job: the release's
set-up cells up to the task's check cell (the solution cells only as the names they bind, never
their code), the submission's code cells, which check to run and a token. This process then

1. imports the lab's check and runs the release's set-up cells itself (pristine, trusted);
2. starts the submission's process (``sandbox.py``) from a copy of the package made for this task
   that holds the lab's public helpers and no checks, references or ``solutions/``; that process
   runs the set-up cells too, takes from the submission **only the definitions the task needs, by
   name** (``cells.select``: the names the solution cells bind and, transitively, the learner's
   helpers and imports), and runs them with the forbidden package functions watched;
3. puts stand-ins (``remote.Proxy``) for the learner's functions, and copies of the learner's
   values, into a namespace of its own and calls the check on it: every call of a learner function
   runs in the submission's process, with only data crossing (``wire``), while the references the
   check compares with stay here;
4. writes the verdict as one line ``<token> <json>`` to a copy of stdout it made at start.

No learner code runs in this process. A submission that reads the worked solutions or the checks'
files, calls a lab check, starts a program, or calls a forbidden package function gets 0 and the
reason (``Copied``, ``Probed``, ``Shortcut``). What it still cannot stop is in INSTRUCTORS.md.
"""
from __future__ import annotations

import ast
import builtins
import contextlib
import importlib
import inspect
import io
import json
import os
import sys

from inferopt.labcheck.cells import statements


def _run_stmt(stmt, ns, filename):
    code = compile(ast.Module(body=[stmt], type_ignores=[]), filename, "exec")
    exec(code, ns)


def _release(job: dict) -> tuple[dict, list[str], set[str]]:
    """Run the release's set-up cells here (pristine, trusted); the names its solution cells bind."""
    ns: dict = {"__name__": "__main__", "__builtins__": builtins}
    sources, required, retry = [], set(), []
    for cell in job["release_cells"]:
        if cell["solution"]:
            required |= set(cell["names"])
            continue
        sources.append(cell["source"])
        for s in statements(cell["source"]):
            if isinstance(s, ast.Expr):
                continue
            try:
                _run_stmt(s, ns, "<release>")
            except Exception:
                retry.append(s)
    for s in retry:
        try:
            _run_stmt(s, ns, "<release>")
        except Exception:
            pass
    return ns, sources, required


def grade(job: dict) -> dict:
    from inferopt.labcheck import REBIND, CheckFailed, NotDone, Shortcut, remote, wire

    mod = importlib.import_module(f"inferopt.labcheck.{job['lab']}")
    check = getattr(mod, job["check"])
    targets = [t for name, v in vars(mod).items() if name.endswith("FORBIDDEN") and isinstance(v, list) for t in v]
    ns, sources, required = _release(job)
    client = remote.Client(job["task"], ns)
    status, error, message, ready = "passed", "", "", {}
    buf = io.StringIO()
    try:
        ready = client.start({"release_cells": sources, "required": sorted(required),
                              "submission_cells": job["submission_cells"]}, targets)
        client.flags(ready["flags"], "a cell of your notebook")
        if ready["hits"]:
            raise Shortcut(f"{job['task']}: {ready['hits'][0]}: write it yourself")
        for name, info in ready["names"].items():
            if "alias" in info:
                ns[name] = ns.get(info["alias"])
            elif "function" in info:
                ns[name] = remote.Proxy(client, name, info)
            else:
                ns[name] = wire.decode(info["value"])
                if isinstance(ns[name], (list, dict)):
                    client.sync.append(name)
        ns[REBIND] = client.rebind
        with contextlib.redirect_stdout(buf):
            check(ns, **({"seed": job["seed"]} if job.get("seed") is not None
                         and "seed" in inspect.signature(check).parameters else {}))
    except (CheckFailed, NotDone, Shortcut) as exc:
        status, error, message = "failed", type(exc).__name__, str(exc)
        if ready.get("problems") and error == "NotDone":
            message += f" (while loading your cells: {ready['problems'][0]})"
    except Exception as exc:
        status, error, message = "failed", type(exc).__name__, f"{job['task']}: the check could not run: {exc}"
    finally:
        client.close()
    if status == "passed":
        message = buf.getvalue().strip().splitlines()[-1] if buf.getvalue().strip() else "passed"
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
