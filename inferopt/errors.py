"""The one exception type the course raises for bad input or a missing component.

Every message says what was wrong and what to do; the CLI prints it without a traceback and
widgets show it inside the widget.
"""


class CourseError(Exception):
    """Bad input or a missing component, with a message that names the fix."""
