"""What the learner's code may not reach while a check runs it (see ``labcheck.call``): a profiler that
sees calls into forbidden package functions, the checks' own code and ``solutions/``, and an audit
hook that refuses to open files under ``solutions/``."""
from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path

from inferopt.errors import CourseError

LABCHECK_DIR = str(Path(__file__).resolve().parent)
_ACTIVE: list = []  # stack of {code object: "module.attr"} from the active `forbid` blocks
_ACTIVE_TARGETS: list = []  # the same blocks' (module, attr) targets, for the submission's process
_OWN_FRAMES = ("isolated.py", "sandbox.py", "remote.py", "wire.py")  # the grader's own code, never a shortcut


def code_of(obj):
    """The code object behind a function, method, numpy dispatcher or decorated function (None if none)."""
    obj = getattr(obj, "fget", None) or obj if isinstance(obj, property) else obj  # a property: its getter
    obj = getattr(obj, "_implementation", obj)  # numpy's array-function dispatchers
    try:
        obj = inspect.unwrap(obj)
    except ValueError:
        pass
    obj = getattr(obj, "__func__", obj)
    return getattr(obj, "__code__", None)


def _solutions_dir() -> str | None:
    try:
        from inferopt.paths import SOLUTIONS
        return str(Path(SOLUTIONS).resolve())
    except Exception:
        return None


class _Watch:
    """A profile function: records calls into forbidden code while the learner's function runs."""

    def __init__(self, active):
        self.codes, self.copies = {}, {}
        for block in active:
            for code, label in block.items():
                self.codes[code] = label
                self.copies[(code.co_name, code.co_code)] = label
        self.hits: list[str] = []
        self.solutions = _solutions_dir()
        self._seen: dict = {}

    def __call__(self, frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        verdict = self._seen.get(code)
        if verdict is None:
            verdict = self._judge(code)
            self._seen[code] = verdict
        if verdict and (not self.hits or self.hits[-1] != verdict):
            self.hits.append(verdict)

    def _judge(self, code) -> str:
        label = self.codes.get(code) or self.copies.get((code.co_name, code.co_code))
        if label:
            return label
        fname = code.co_filename
        if fname.startswith(LABCHECK_DIR) and code.co_name not in ("forbidden", "_audit", "_solutions_dir") \
                and not fname.endswith(_OWN_FRAMES):  # the grading processes' own frames
            return f"the lab's own checking code (inferopt.labcheck: {code.co_name})"
        if self.solutions and fname.startswith(self.solutions):
            return "code from solutions/"
        return ""


_OPEN_GUARD = {"on": 0}


def _audit(event, args):
    if event != "open" or not _OPEN_GUARD["on"] or not args or not isinstance(args[0], (str, bytes, os.PathLike)):
        return
    sol = _solutions_dir()
    try:
        path = os.path.realpath(os.fsdecode(args[0]))
    except (TypeError, ValueError):
        return
    if sol and path.startswith(sol + os.sep):
        raise CourseError("write it yourself: the worked solutions (solutions/) are not for the check's runs")


_AUDIT_ADDED = {"done": False}


def guard_solutions(on: bool) -> None:
    """Refuse to open files under solutions/ while on (an audit hook, added once per process)."""
    if not _AUDIT_ADDED["done"]:
        sys.addaudithook(_audit)
        _AUDIT_ADDED["done"] = True
    _OPEN_GUARD["on"] += 1 if on else -1
