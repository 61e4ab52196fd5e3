"""Small helpers shared by the course widgets (HTML escaping, error boxes)."""
from __future__ import annotations

import html


def esc(text) -> str:
    return html.escape(str(text), quote=True)


def error_html(message: str) -> str:
    """A red box with a CourseError message (what widgets show instead of a traceback)."""
    return (f'<div style="border:1px solid #c0392b;background:#fdecea;padding:6px;color:#922b21">'
            f"<b>Input problem:</b> {esc(message)}</div>")
