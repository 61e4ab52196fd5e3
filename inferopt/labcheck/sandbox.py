"""The process that runs a submission's code while it is graded (started by ``isolated.py``).

It runs from a copy of the package made for this one task (``remote.shim``): the lab's public
helpers, the assets, this file, and none of the checks, their references or ``solutions/``, with
the installed (editable) course taken off the import path, in an empty working folder. It

1. runs the release's set-up cells (sent by the checker; the solution cells never leave it),
2. takes from the submission only the statements that bind the task's names (``cells.select``)
   and runs them with the package functions the lab forbids watched (``labcheck.call``'s profiler),
3. then answers the checker's requests on a pipe: call one of the learner's functions with these
   arguments, send these values back. Only data crosses (``wire``); the checker, in its own
   process, compares the answers with references this process cannot import or open.

While learner code runs, an audit hook refuses to open the course's own files (``solutions/``,
the checks, ``.git``; the assets and the virtual environment stay readable) and to start programs,
and records the attempt; calling a lab check (``labcheck.lab2.task1``...) is recorded too. The
checker turns those records into a 0 with the reason. This code runs in the same interpreter as
the learner's, so what INSTRUCTORS.md lists as not stoppable applies here.
"""
from __future__ import annotations

import ast
import builtins
import io
import json
import os
import sys
import types

FLAGS = {"copied": "", "probed": "", "spawned": ""}
_GUARD = {"on": 0, "repo": "", "allow": (), "shim": "", "pid": str(os.getpid())}
SPAWN_EVENTS = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
                "ctypes.dlopen", "os.link", "os.symlink", "pty.spawn"}


def _closed(path: str) -> str:
    """Why a path is closed to learner code while graded ('' when it is open)."""
    repo, shim = _GUARD["repo"], _GUARD["shim"]
    parts = path.split(os.sep)
    if len(parts) > 2 and parts[1] == "proc" and parts[2].isdigit() and parts[2] != _GUARD["pid"]:
        return "another process's files"  # /proc/<pid>/... of the checker, say (/proc/cpuinfo stays open)
    for root in (repo, shim):
        if root and (path == root or path.startswith(root + os.sep)):
            rel = path[len(root) + 1:]
            if rel.startswith(_GUARD["allow"]) and not rel.startswith("inferopt" + os.sep + "labcheck" + os.sep):
                return ""
            if rel.split(os.sep, 1)[0] in ("solutions", "book", "build", ".git"):
                return "the worked solutions (solutions/ or a copy in .git, book/ or build/)"
            if rel.startswith(("inferopt" + os.sep + "labcheck", "tests")):
                return "the lab checks' own files"
            return "the course's files" if root == repo else ""
    return ""


def _audit(event, args):
    if not _GUARD["on"]:
        return
    if event in SPAWN_EVENTS:
        FLAGS["spawned"] = FLAGS["spawned"] or event
        raise PermissionError("the grader runs your code without starting other programs")
    if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        try:
            path = os.path.realpath(os.fsdecode(args[0]))
        except (TypeError, ValueError):
            return
        why = _closed(path)
        if why:
            if "solutions" in why or "checks" in why:
                FLAGS["copied"] = FLAGS["copied"] or why
            raise PermissionError(f"the grader does not let your code open {why}")


class _Closed(types.ModuleType):
    """Stands for a lab's checks in this process: any use is recorded as probing the check."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        FLAGS["probed"] = FLAGS["probed"] or f"{self.__name__}.{name}"
        from inferopt.errors import CourseError
        raise CourseError("the lab's checks are not available to your code when it is graded")


def _close_checks():
    for name in ("lab1", "lab2", "lab3", "lab4", "lab5", "_references", "references", "isolated", "grade", "remote"):
        sys.modules[f"inferopt.labcheck.{name}"] = _Closed(f"inferopt.labcheck.{name}")


def _run(stmt, ns, filename):
    exec(compile(ast.Module(body=[stmt], type_ignores=[]), filename, "exec"), ns)


def _watched(ns, targets, thunk, printed=None):
    """Run thunk() with ``targets`` forbidden, the profiler on and the files closed: (hits, exc, result).
    What it prints goes to ``printed`` (a StringIO) when given."""
    import contextlib

    from inferopt import labcheck

    exc, result = None, None
    with labcheck.forbid(ns, targets), contextlib.redirect_stdout(printed or sys.stdout):
        watch = labcheck._Watch(labcheck._ACTIVE)
        _GUARD["on"] += 1
        sys.setprofile(watch)
        try:
            result = thunk()
        except BaseException as e:  # every exception is the learner's answer
            exc = e
        finally:
            sys.setprofile(None)
            _GUARD["on"] -= 1
    if exc is not None and not isinstance(exc, Exception):
        raise exc
    return watch.hits, exc, result


def _describe(exc) -> dict:
    from inferopt.labcheck import _learner_line

    base = next((k.__name__ for k in type(exc).__mro__ if getattr(builtins, k.__name__, None) is k), "Exception")
    return {"type": type(exc).__name__, "base": base, "msg": str(exc)[:600], "where": _learner_line(exc)}


def prepare(job: dict) -> tuple[dict, dict]:
    from inferopt.labcheck import wire
    from inferopt.labcheck.cells import bound, mutated, select, statements

    ns: dict = {"__name__": "__main__", "__builtins__": builtins}
    pristine, retry = set(), []
    for src in job["release_cells"]:
        for s in statements(src):
            if isinstance(s, ast.Expr):
                continue
            pristine |= bound(s)
            try:
                _run(s, ns, "<release>")
            except Exception:
                retry.append(s)
    required = set(job["required"])
    pristine -= required
    saved = {k: ns[k] for k in pristine if k in ns}
    _close_checks()
    problems, hits = [], []
    chosen = select(required, pristine, job["submission_cells"])
    ns["__chosen__"] = [s for s in chosen if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                                                ast.Import, ast.ImportFrom))]
    for s in chosen:
        found, exc, _ = _watched(ns, job["targets"], lambda s=s: _run(s, ns, "<your notebook>"))
        if exc is not None and str(exc).startswith("write it yourself"):  # a forbidden function was called
            found = found or [str(exc).split(";")[0].replace("write it yourself: this task re-implements ", "")]
        elif exc is not None and not isinstance(exc, NotImplementedError):
            problems.append(f"{type(exc).__name__}: {exc}"[:300])
        if found:
            names = sorted(bound(s) | mutated(s))
            hits.append(f"the statement that defines `{names[0] if names else '?'}` calls {found[0]}")
    for s in retry:
        try:
            _run(s, ns, "<release>")
        except Exception:
            pass
    ns.update(saved)
    names = {}
    for name in sorted(required):
        if name not in ns:
            continue
        v = ns[name]
        alias = next((k for k in saved if saved[k] is v), None)
        if alias:
            names[name] = {"alias": alias}
        elif callable(v):
            from inferopt.labcheck import _never_returns_a_value
            names[name] = {"function": getattr(v, "__name__", name), "never_returns": _never_returns_a_value(v)}
        else:
            names[name] = {"value": wire.encode(v)}
    return ns, {"names": names, "problems": problems, "hits": hits, "flags": dict(FLAGS)}


def rebind(ns: dict, req: dict) -> dict:
    """Run again the learner's statements that bind ``names``, with some release names given other values
    (a typed answer does not follow them); the names' new values, or what went wrong."""
    from inferopt.labcheck import wire
    from inferopt.labcheck.cells import bound

    names = set(req["names"])
    ns2 = dict(ns)
    ns2.update({k: wire.decode(v) for k, v in req["inputs"].items()})
    reply = {"values": {}, "raise": None}
    for s in ns["__chosen__"]:
        if not bound(s) & names:
            continue
        hits, exc, _ = _watched(ns2, [tuple(t) for t in req.get("forbid", [])],
                                lambda s=s: _run(s, ns2, "<your notebook>"), io.StringIO())
        if exc is not None and str(exc).startswith("write it yourself"):
            hits, exc = hits or [str(exc).split(";")[0].replace("write it yourself: this task re-implements ", "")], None
        if hits and not reply.get("hits"):
            reply["hits"] = hits[:1]
        if exc is not None and reply["raise"] is None:
            reply["raise"] = _describe(exc)
    reply["values"] = {n: wire.encode(ns2.get(n)) for n in names}
    reply["flags"] = dict(FLAGS)
    return reply


def serve(ns: dict, inp, out) -> None:
    from inferopt.labcheck import wire

    for line in inp:
        req = wire.loads(line)
        if req.get("op") == "rebind":
            out.write(wire.dumps(rebind(ns, req)) + "\n")
            out.flush()
            continue
        if req.get("op") != "call":
            break
        for k, v in req.get("sync", {}).items():
            wire.assign(ns, k, wire.decode(v))
        fn = ns.get(req["name"])
        args, kwargs = wire.decode(req["args"]), wire.decode(req["kwargs"])
        targets = [tuple(t) for t in req.get("forbid", [])]
        printed = io.StringIO()
        hits, exc, result = _watched(ns, targets, lambda f=fn, a=args, k=kwargs: f(*a, **k), printed)
        reply = {"flags": dict(FLAGS), "hits": hits[:1], "printed": printed.getvalue()[:100_000],
                 "sync": {k: wire.encode(ns.get(k)) for k in req.get("sync", {})}}
        if exc is not None:
            reply["raise"] = _describe(exc)
        else:
            try:
                reply["ok"] = wire.encode(result)
                wire.dumps(reply["ok"])
            except (ValueError, TypeError) as e:
                reply.pop("ok", None)
                reply["raise"] = {"type": "ValueError", "base": "ValueError", "msg": str(e), "where": ""}
        out.write(wire.dumps(reply) + "\n")
        out.flush()


def main() -> int:
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    inp = os.fdopen(os.dup(0), "r", encoding="utf-8")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(2, 1)  # what the learner's code prints goes to stderr, never into the pipe
    sys.stdout = sys.__stdout__ = open(1, "w", encoding="utf-8", closefd=False)
    job = json.loads(inp.readline())
    _GUARD.update(repo=job["repo"], shim=job["shim"], allow=tuple(job["allow"]))
    import ctypes  # noqa: F401  (imported now: a library that imports it later must not count as loading one)

    sys.addaudithook(_audit)
    try:
        ns, ready = prepare(job)
    except BaseException as exc:
        ready = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        ns = None
    from inferopt.labcheck import wire

    out.write(wire.dumps(ready) + "\n")
    out.flush()
    if ns is not None:
        serve(ns, inp, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
