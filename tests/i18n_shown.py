"""What the course shows a learner at run time, collected for the Chinese-edition leftover check
(tests/test_i18n_runtime.py): every string of a widget tree or plotly figure, a lab check's one line,
a CLI command's output. Each item is (where it came from, the text)."""
from __future__ import annotations

import contextlib
import io


def figure_texts(fig, where: str) -> list[tuple[str, str]]:
    """Titles, axis titles, trace names, texts, hover texts, annotations of a plotly figure."""
    keys = {"text", "name", "hovertext", "hovertemplate", "ticktext", "title"}
    out = []

    def walk(node, path):
        if isinstance(node, dict):
            for k, v in node.items():
                if k in keys and isinstance(v, str):
                    out.append((f"{where} {path}.{k}", v))
                elif k in keys and isinstance(v, (list, tuple)):
                    out.extend((f"{where} {path}.{k}", t) for t in v if isinstance(t, str))
                else:
                    walk(v, f"{path}.{k}")
        elif isinstance(node, (list, tuple)):
            for i, v in enumerate(node):
                walk(v, f"{path}[{i}]")

    walk(fig.to_plotly_json(), "")
    return out


def widget_texts(w, where: str) -> list[tuple[str, str]]:
    """Every string an ipywidgets tree shows: values of text widgets, descriptions, option labels,
    placeholders, tooltips, and the figures inside."""
    import ipywidgets as W

    out = []
    if hasattr(w, "to_plotly_json"):
        return figure_texts(w, where)
    name = type(w).__name__
    for attr in ("description", "placeholder", "tooltip", "button_style_label"):
        v = getattr(w, attr, None)
        if isinstance(v, str) and v:
            out.append((f"{where} {name}.{attr}", v))
    if isinstance(w, (W.HTML, W.Label, W.HTMLMath)) and w.value:
        out.append((f"{where} {name}.value", w.value))
    labels = getattr(w, "_options_labels", None)
    if labels:
        out.extend((f"{where} {name}.options", str(x)) for x in labels)
    for i, c in enumerate(getattr(w, "children", ()) or ()):
        out.extend(widget_texts(c, f"{where}/{i}"))
    return out


def printed(fn, *args, **kw) -> tuple[str, object]:
    """What fn printed (stdout and stderr) and what it returned (an exception is returned, not raised)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        try:
            value = fn(*args, **kw)
        except SystemExit as exc:
            value = exc
        except Exception as exc:
            value = exc
    return buf.getvalue(), value
