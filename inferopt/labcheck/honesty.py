"""What the notebook's check and the grader do about answers that are not the learner's own work:
a check run over and over on one notebook (a search for the accepted answer) stops judging, and,
when graded, values that must follow from the learner's functions are derived again from other
inputs (a typed answer does not follow)."""
from __future__ import annotations

from inferopt.labcheck.verdicts import CheckFailed, Probed

# ---- values that must follow from the learner's functions, not be typed ------------------------------
REBIND = "__labcheck_rebind__"  # set by the grader only: rebind(inputs, names) -> the names' values


def follows(ns: dict, task: str, inputs: dict, names, want: dict, hint: str, about: str = "") -> bool:
    """When graded: run again the learner's statements that bind ``names`` with the release's ``inputs``
    changed, and compare with ``want`` ({name: value or predicate}); a typed value does not follow.
    False (nothing checked) in a notebook, where the check cannot re-run a cell."""
    rebind = ns.get(REBIND)
    if not callable(rebind):
        return False
    try:
        got = rebind(inputs, names)
    except CheckFailed:
        raise
    except Exception as exc:
        changed = about or ", ".join(f"`{k}`" for k in inputs)
        raise CheckFailed(f"{task}: with other values in {changed}, the cell that defines "
                          f"{', '.join(f'`{n}`' for n in names)} raised {type(exc).__name__}: {exc}") from None
    about = about or ", ".join(f"`{k}`" for k in inputs)
    for n, w in want.items():
        ok = w(got.get(n)) if callable(w) else got.get(n) == w
        if not ok:
            raise CheckFailed(f"{task}: `{n}` does not follow {about}: when the grader gives them other values, yours "
                              f"stays wrong; {hint}")
    return True


# ---- a check run many times in one kernel is noticed --------------------------------------------------
PROBE_LIMIT = 20  # runs of one check on one namespace before it stops judging (restart the kernel)
_RUNS: dict = {}  # id(namespace) -> (namespace, {check: runs}); the namespace is kept so its id is not reused


def count_run(ns: dict, check: str) -> int:
    """Count one run of ``check`` on this notebook namespace; a Probed past PROBE_LIMIT runs.

    Honest work runs a check a few times; a loop that calls the check until it passes (to find an
    accepted answer) runs it many. This is the notebook's view only (a learner can clear the count
    in their own kernel); the grader refuses any submission that calls a check at all."""
    if not isinstance(ns, dict):
        return 0
    _ns, counts = _RUNS.setdefault(id(ns), (ns, {}))
    counts[check] = counts.get(check, 0) + 1
    if counts[check] > PROBE_LIMIT:
        raise Probed(f"{check}: this check has run {counts[check]} times in this kernel, which is what a search for "
                     "the accepted answer looks like; it judges no more runs here. Restart the kernel and run the "
                     "notebook once (Run All); the grader runs your code where no check can be called")
    return counts[check]


def counted(fn):
    """Decorator for a lab's check functions: each run on a namespace is counted (``count_run``)."""
    import functools

    label = f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}"

    @functools.wraps(fn)
    def check(ns, *args, **kwargs):
        count_run(ns, label)
        return fn(ns, *args, **kwargs)
    return check
