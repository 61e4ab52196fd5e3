"""Where the checks find their references (``_references.py``): the instructor's side only.

The learner pack (``make learner-pack``) leaves ``_references.py`` out: it holds worked formulas of the
labs' tasks. The lab modules reach it through :data:`REFS`, which loads it on first use from

1. the package itself (the instructor's clone, the grader, a full clone of the course), else
2. ``$INFEROPT_REFERENCES``: the file, or a folder holding ``_references.py`` (a hub's shared read-only
   store, so learners' check cells there compare as the grader does),

and else stops the check with one line (:class:`ChecksElsewhere`, a ``NotDone``): the check compares with the
instructor's references, which this copy does not hold; hand the lab in and the grader checks it. Checks
that need no reference (a missing name, an untouched stub, a shortcut through the package) still answer
first, since they run before the first reference is used.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path

from inferopt.labcheck.verdicts import NotDone

MODULE = "inferopt.labcheck._references"
ENV = "INFEROPT_REFERENCES"


class ChecksElsewhere(NotDone):
    """This copy of the course has no references: the check that needs them runs in the grader."""


def load():
    try:
        return importlib.import_module(MODULE)
    except ModuleNotFoundError as exc:
        if exc.name != MODULE:
            raise
    store = os.environ.get(ENV)
    if store:
        path = Path(store).expanduser()
        path = path / "_references.py" if path.is_dir() else path
        if path.is_file():
            spec = importlib.util.spec_from_file_location(MODULE, path)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[MODULE] = mod
            try:
                spec.loader.exec_module(mod)
            except BaseException:
                sys.modules.pop(MODULE, None)
                raise
            return mod
        raise ChecksElsewhere(f"{ENV}={store} holds no _references.py: ask the instructor for the room's "
                              "reference folder, or hand the lab in (python -m inferopt handin)")
    raise ChecksElsewhere("this check compares your answer with the instructor's references, which the learner "
                          "pack does not hold: hand the lab in (python -m inferopt handin) and the grader checks it")


class _Refs:
    """``REFS.ref_bytes_per_token``: the references module's attribute, loaded on first use."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(load(), name)


REFS = _Refs()
