"""Checks for the labs: the learner's work is tested on cases made up at check time.

Each lab has a module here (``lab1`` ... ``lab5``) with one function per check cell, called as
``labcheck.lab2.task1(globals())``. A check

- reads the learner's names from the notebook's namespace; a missing name or an untouched stub
  gives one line, "Task 2 is not done yet: define `predicted_tokens`", with no traceback;
- calls the learner's functions on inputs generated now (random model shapes, SLOs, samples),
  which the learner cannot see or type in, and compares with an independent computation;
- runs the learner's code with the package function the task re-implements made unavailable
  (it raises "write it yourself"), so a shortcut through the package fails and says so;
- on failure says what is wrong and gives a hint (which quantity, which direction, by what factor,
  which chapter), never the expected answer of the lab's own items.

The exceptions raised here render as one line in Jupyter (IPython's ``_render_traceback_``), and
the grader (``python -m inferopt grade``) records that line as the feedback for the task.
"""
from __future__ import annotations

import contextlib
import importlib
import io
import random
import sys

from inferopt.errors import CourseError


class CheckFailed(AssertionError):
    """A lab check failed; the message says what is wrong and hints at the fix. Shown as one line."""

    def _render_traceback_(self):  # IPython shows this instead of a traceback
        return [f"\x1b[0;31m{type(self).__name__}\x1b[0m: {self}"]


class NotDone(CheckFailed):
    """The task has not been attempted yet (a name is missing, or the stub still raises)."""


class Shortcut(CheckFailed):
    """The learner's code called the package function the task asks them to write."""


def rng(seed=None) -> random.Random:
    """A generator for check-time cases: fresh each run unless a seed is given (tests pin one)."""
    return random.Random(seed)


def need(ns: dict, task: str, *names: str):
    """The learner's values for ``names`` from a notebook namespace; NotDone when one is missing."""
    missing = [n for n in names if n not in ns]
    if missing:
        listed = ", ".join(f"`{n}`" for n in missing)
        raise NotDone(f"{task} is not done yet: define {listed} (run the task's cell first)")
    values = [ns[n] for n in names]
    return values[0] if len(values) == 1 else values


def need_callable(ns: dict, task: str, *names: str):
    values = need(ns, task, *names)
    values = values if len(names) > 1 else [values]
    for n, v in zip(names, values, strict=True):
        if not callable(v):
            raise CheckFailed(f"{task}: `{n}` should be a function (def {n}(...)), not {type(v).__name__}")
    return values[0] if len(values) == 1 else values


def need_number(ns: dict, task: str, name: str, kind=(int, float)):
    v = need(ns, task, name)
    if isinstance(v, bool) or not isinstance(v, kind):
        want = "an int" if kind is int else "a number"
        raise CheckFailed(f"{task}: `{name}` should be {want}, got {type(v).__name__}")
    return v


def _raiser(what: str, hint: str):
    def forbidden(*args, **kwargs):
        raise CourseError(f"write it yourself: this task re-implements {what}; {hint}")
    forbidden.__forbidden__ = what
    return forbidden


@contextlib.contextmanager
def forbid(ns: dict | None, targets, hint: str = "the check runs your code without it"):
    """Make package functions unavailable while the learner's code runs.

    ``targets``: ("module.path", "attr") or ("module.path", "Class.attr") pairs. The attribute is
    replaced on its module/class, and any name in the notebook namespace ``ns`` (or in the globals
    of the learner's functions, which is the same dict) bound to the same object is replaced too,
    so ``from numpy import percentile`` does not get around it.
    """
    saved = []  # (owner, name, old, is_dict)
    try:
        for mod_name, attr in targets:
            owner = importlib.import_module(mod_name)
            parts = attr.split(".")
            for p in parts[:-1]:
                owner = getattr(owner, p)
            old = getattr(owner, parts[-1])
            repl = _raiser(f"{mod_name}.{attr}", hint)
            saved.append((owner, parts[-1], old, False))
            setattr(owner, parts[-1], repl)
            if ns is not None:
                for k, v in list(ns.items()):
                    if v is old and not (k.startswith("__") and k.endswith("__")):
                        saved.append((ns, k, old, True))
                        ns[k] = repl
        yield
    finally:
        for owner, name, old, is_dict in reversed(saved):
            if is_dict:
                owner[name] = old
            else:
                setattr(owner, name, old)


def call(task: str, fn, *args, **kwargs):
    """Call a learner's function; turn a stub, a shortcut or a crash into one clear line."""
    name = getattr(fn, "__name__", "your function")
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        raise NotDone(f"{task} is not done yet: `{name}` still raises NotImplementedError; write its body") from None
    except CourseError as exc:
        if str(exc).startswith("write it yourself"):
            raise Shortcut(f"{task}: `{name}` calls the package instead of computing it: {exc}") from None
        raise CheckFailed(f"{task}: `{name}` raised CourseError: {exc}") from None
    except CheckFailed:
        raise
    except Exception as exc:
        where = _learner_line(exc)
        raise CheckFailed(f"{task}: `{name}` raised {type(exc).__name__}: {exc}{where}") from None


def _learner_line(exc: BaseException) -> str:
    tb = exc.__traceback__
    last = None
    while tb is not None:
        fname = tb.tb_frame.f_code.co_filename
        if "ipykernel" in fname or fname.startswith("<"):
            last = tb
        tb = tb.tb_next
    return f" (in your code, line {last.tb_lineno})" if last is not None else ""


@contextlib.contextmanager
def quiet():
    """Swallow what the learner's functions print while the check calls them many times."""
    with contextlib.redirect_stdout(io.StringIO()):
        yield


def ratio_hint(got: float, want: float, quantity: str, known: dict | None = None) -> str:
    """'X is 2.00x too large' plus the hint for a known factor (e.g. {2: 'a key AND a value'})."""
    if want == 0 or got == 0:
        return f"{quantity} is {'zero' if got == 0 else 'not zero'} where it should not be"
    r = got / want
    for factor, why in (known or {}).items():
        for f, word in ((factor, "large"), (1 / factor, "small")):
            if abs(r - f) < 1e-6 * max(1.0, abs(f)):
                return f"{quantity} is {max(r, 1 / r):.3g}x too {word}: {why}"
    word = "large" if r > 1 else "small"
    return f"{quantity} is {max(r, 1 / r):.3g}x too {word} on a case the check made up"


def passed(msg: str) -> None:
    print(msg)
    sys.stdout.flush()


LABS = ("lab1", "lab2", "lab3", "lab4", "lab5")


def __getattr__(name: str):  # labcheck.lab2 imports its module on first use (the CLI stays quick)
    if name in LABS:
        return importlib.import_module(f"inferopt.labcheck.{name}")
    raise AttributeError(f"module 'inferopt.labcheck' has no attribute {name!r}")
