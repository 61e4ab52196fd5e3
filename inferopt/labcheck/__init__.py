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
import inspect
import io
import numbers
import os
import random
import sys

from inferopt.errors import CourseError
from inferopt.labcheck.honesty import PROBE_LIMIT, REBIND, count_run, counted, follows  # noqa: F401
from inferopt.labcheck.verdicts import CheckFailed, Copied, Escaped, NotDone, Probed, Shortcut  # noqa: F401
from inferopt.labcheck.watch import (  # noqa: F401  (the checks and the grader import them from here)
    _ACTIVE,
    _ACTIVE_TARGETS,
    LABCHECK_DIR,
    _Watch,
    code_of,
    guard_solutions,
)


def rng(seed=None) -> random.Random:
    """A generator for check-time cases: 128 bits from os.urandom each run unless a seed is given (tests
    pin one), so no table of inputs seen in an earlier run covers the next one."""
    return random.Random(int.from_bytes(os.urandom(16), "big") if seed is None else seed)


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


def is_real(v) -> bool:
    """A real number of any kind (int, float, numpy's int64/float32, Fraction...), not a bool."""
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def is_whole(v) -> bool:
    """A whole number of any integer type (int, numpy's int64...), not a bool."""
    return isinstance(v, numbers.Integral) and is_real(v)


def need_number(ns: dict, task: str, name: str, kind=(int, float)):
    v = need(ns, task, name)
    whole = kind is int
    if v is None:
        raise CheckFailed(f"{task}: `{name}` is None: did you forget `return` in the function that computes it?")
    if not (is_whole(v) if whole else is_real(v)):
        want = "a whole number" if whole else "a number"
        raise CheckFailed(f"{task}: `{name}` should be {want}, got {type(v).__name__}")
    return v


def not_a_number(task: str, what: str, got, whole: bool = False):
    """One line for a value that should be a number and is not (None: a forgotten `return`)."""
    if got is None:
        return CheckFailed(f"{task}: {what} is None: did you forget `return`?")
    want = "a whole number (an int)" if whole else "a number"
    return CheckFailed(f"{task}: {what} should be {want}, got {type(got).__name__}")


def _raiser(what: str, hint: str):
    def forbidden(*args, **kwargs):
        raise CourseError(f"write it yourself: this task re-implements {what}; {hint}")
    forbidden.__forbidden__ = what
    return forbidden


class _ForbiddenProperty(property):
    __forbidden__ = True


@contextlib.contextmanager
def forbid(ns: dict | None, targets, hint: str = "the check runs your code without it"):
    """Make package functions unavailable while the learner's code runs.

    ``targets``: ("module.path", "attr") or ("module.path", "Class.attr") pairs. The attribute is
    replaced on its module/class, and any name in the notebook namespace ``ns`` (or in the globals
    of the learner's functions, which is the same dict) bound to the same object is replaced too,
    so ``from numpy import percentile`` does not get around it.
    """
    saved = []  # (owner, name, old, is_dict)
    added = {}  # the originals' code objects, for the profiler of `call`
    try:
        for mod_name, attr in targets:
            owner = importlib.import_module(mod_name)
            parts = attr.split(".")
            for p in parts[:-1]:
                owner = getattr(owner, p)
            old = getattr(owner, parts[-1])
            if getattr(old, "__forbidden__", None):  # nested forbid of the same target
                continue
            code = code_of(old)
            if code is not None:
                added[code] = f"{mod_name}.{attr}"
            repl = _raiser(f"{mod_name}.{attr}", hint)
            if isinstance(old, property):  # RequestRecord.tpot_s: reading it raises
                repl = _ForbiddenProperty(repl)
            saved.append((owner, parts[-1], old, False))
            setattr(owner, parts[-1], repl)
            if ns is not None:
                for k, v in list(ns.items()):
                    if v is old and not (k.startswith("__") and k.endswith("__")):
                        saved.append((ns, k, old, True))
                        ns[k] = repl
        _ACTIVE.append(added)
        _ACTIVE_TARGETS.append([tuple(t) for t in targets])
        yield
    finally:
        if _ACTIVE and _ACTIVE[-1] is added:
            _ACTIVE.pop()
            _ACTIVE_TARGETS.pop()
        for owner, name, old, is_dict in reversed(saved):
            if is_dict:
                owner[name] = old
            else:
                setattr(owner, name, old)


def call(task: str, fn, *args, **kwargs):
    """Call a learner's function; turn a stub, a shortcut or a crash into one clear line.

    While the function runs, a profiler (``sys.setprofile``) watches every Python function it calls:
    a call into a function the active ``forbid`` block names (found by its code object, or by the
    same bytecode when it is a copy loaded from elsewhere), into this package's own checking code
    (``inferopt/labcheck``: the checks and their references) or into code loaded from ``solutions/``
    is a shortcut, whatever name, alias, default argument or module path it was reached through.
    Opening a file under ``solutions/`` while it runs is one too (an audit hook)."""
    return _call(task, fn, args, kwargs, True)


def call_void(task: str, fn, *args, **kwargs):
    """``call`` for a function whose job is a side effect (a callback): None is its normal result."""
    return _call(task, fn, args, kwargs, False)


def _call(task, fn, args, kwargs, _returns):
    name = getattr(fn, "__name__", "your function")
    watch = _Watch(_ACTIVE)
    prev = sys.getprofile()
    outcome, result = None, None
    try:
        guard_solutions(True)
        sys.setprofile(watch)
        try:
            result = fn(*args, **kwargs)
        finally:
            kept = sys.getprofile() is watch
            sys.setprofile(prev)
            guard_solutions(False)
    except BaseException as exc:
        outcome = exc
    if watch.hits:
        raise Shortcut(f"{task}: `{name}` calls {watch.hits[0]} instead of computing it: write it yourself") from None
    if outcome is None and not kept:
        raise CheckFailed(f"{task}: `{name}` changed the interpreter's profiler; the check cannot judge code that "
                          "does that") from None
    if outcome is not None:
        _judge_exception(task, name, outcome)
    if result is None and _returns and _never_returns_a_value(fn):
        raise CheckFailed(f"{task}: `{name}` returned None: did you forget `return`?")
    return result


def _judge_exception(task: str, name: str, exc: BaseException):
    if isinstance(exc, NotImplementedError):
        raise NotDone(f"{task} is not done yet: `{name}` still raises NotImplementedError; write its body") from None
    if isinstance(exc, CourseError):
        if str(exc).startswith("write it yourself"):
            raise Shortcut(f"{task}: `{name}` calls the package instead of computing it: {exc}") from None
        raise CheckFailed(f"{task}: `{name}` raised CourseError: {exc}") from None
    if isinstance(exc, CheckFailed):
        raise exc
    if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit: not the learner's answer
        raise exc
    where = _learner_line(exc)
    if isinstance(exc, TypeError) and "NoneType" in str(exc):
        where += " (a function without `return` gives None: did you forget `return` somewhere?)"
    text = " ".join(str(exc).split())  # one line, whatever the exception's message holds
    raise CheckFailed(f"{task}: `{name}` raised {type(exc).__name__}: {text}{where}") from None


def _never_returns_a_value(fn) -> bool:
    """True when the function's bytecode has no `return <value>` (so None means a forgotten return)."""
    import dis

    told = getattr(fn, "__never_returns__", None)  # a function run in the submission's process says it
    if told is not None:
        return bool(told)
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is None or code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
        return False
    prev = None
    for ins in dis.get_instructions(code):
        if ins.opname == "RETURN_VALUE" and (ins.is_jump_target or not (
                prev is not None and prev.opname == "LOAD_CONST" and prev.argval is None)):
            return False
        if ins.opname == "RETURN_CONST" and ins.argval is not None:
            return False
        prev = ins
    return True


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
    """'X is 2x too large' plus the hint for a known factor (e.g. {2: 'a key AND a value'}).

    A factor is shown only when it says something: a value within 0.1 % of the right one is
    called close (rounding, or a small term left out), never "1x too large"."""
    if not is_real(got):
        return f"{quantity} should be a number, got {'None (did you forget `return`?)' if got is None else type(got).__name__}"
    if want == 0 or got == 0:
        return f"{quantity} is {'zero' if got == 0 else 'not zero'} where it should not be"
    r = float(got) / want
    if r < 0:
        return f"{quantity} has the wrong sign"
    for factor, why in (known or {}).items():
        if factor == 1:
            continue
        for f, word in ((factor, "large"), (1 / factor, "small")):
            if abs(r - f) < 1e-6 * max(1.0, abs(f)):
                return f"{quantity} is {_factor(max(r, 1 / r))} too {word}: {why}"
    word = "large" if r > 1 else "small"
    if abs(r - 1) < 1e-3:
        return (f"{quantity} is a little too {word} (by {abs(r - 1):.1e} of its size) on a case the check made up: "
                "look for early rounding or a small term left out")
    return f"{quantity} is {_factor(max(r, 1 / r))} too {word} on a case the check made up"


def _factor(x: float) -> str:
    text = f"{x:.3g}"
    return f"{text}x" if text not in ("1", "1.0", "1.00") else f"{x:.6f}x"


def passed(msg: str) -> None:
    print(msg)
    sys.stdout.flush()


LABS = ("lab1", "lab2", "lab3", "lab4", "lab5")


def __getattr__(name: str):  # labcheck.lab2 imports its module on first use (the CLI stays quick)
    if name in LABS:
        return importlib.import_module(f"inferopt.labcheck.{name}")
    raise AttributeError(f"module 'inferopt.labcheck' has no attribute {name!r}")
