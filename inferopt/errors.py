"""The one exception type the course raises for bad input or a missing component.

Every message says what was wrong and what to do; the CLI prints it without a traceback and
widgets show it inside the widget.
"""


class CourseError(Exception):
    """Bad input or a missing component, with a message that names the fix. In Jupyter it shows as that
    one line (IPython's ``_render_traceback_``), not as a traceback from inside the package."""

    def _render_traceback_(self):
        return [f"\x1b[0;31m{type(self).__name__}\x1b[0m: {self}"]
