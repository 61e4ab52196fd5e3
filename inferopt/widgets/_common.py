"""Small helpers shared by the course widgets (HTML escaping, error boxes)."""
from __future__ import annotations

import html

from inferopt.i18n import localize, tr


def esc(text) -> str:
    return html.escape(str(text), quote=True)


def error_html(message: str) -> str:
    """A red box with a CourseError message (what widgets show instead of a traceback)."""
    return (f'<div style="border:1px solid #c0392b;background:#fdecea;padding:6px;color:#922b21">'
            f"<b>{esc(tr('Input problem:'))}</b> {esc(localize(message))}</div>")
