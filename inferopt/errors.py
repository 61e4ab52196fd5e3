"""The one exception type the course raises for bad input or a missing component.

Every message says what was wrong and what to do; the CLI prints it without a traceback and
widgets show it inside the widget.
"""


class OneLine:
    """Mixin: in Jupyter the exception shows as its one line (IPython's ``_render_traceback_``), not as a
    traceback from inside the package. The course's errors (here) and the lab checks' failures use it.
    The line is shown in the course's edition: ``inferopt.i18n`` sets ``localize`` (English: unchanged)."""

    localize = staticmethod(lambda text: text)

    def _render_traceback_(self):
        return [f"\x1b[0;31m{type(self).__name__}\x1b[0m: {self.localize(str(self))}"]


class CourseError(OneLine, Exception):
    """Bad input or a missing component, with a message that names the fix (shown as one line in Jupyter)."""
