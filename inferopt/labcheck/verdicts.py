"""The verdicts of a lab check: one line each in Jupyter (``OneLine``) and in the grader's CSV."""
from __future__ import annotations

from inferopt.errors import OneLine


class CheckFailed(OneLine, AssertionError):
    """A lab check failed; the message says what is wrong and hints at the fix. Shown as one line."""


class NotDone(CheckFailed):
    """The task has not been attempted yet (a name is missing, or the stub still raises)."""


class Shortcut(CheckFailed):
    """The learner's code called the package function the task asks them to write."""


class Copied(Shortcut):
    """The learner's code read the worked solutions (or the checks' own files) while it was graded."""


class Probed(Shortcut):
    """The learner's code called a lab check: a search for the accepted answer, not an answer."""


class Escaped(Shortcut):
    """The learner's code started another program while it was graded (a way around the closed files)."""
