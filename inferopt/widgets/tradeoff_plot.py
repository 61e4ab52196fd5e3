"""The trade-off table of §7.1 as a picture: what each optimization gives up (-1) and buys (+1).

``tradeoff_matrix()`` (pure) answers (row names, axis names, scores, hover texts);
``tradeoff_figure()`` draws a plotly heatmap of it; ``technique_cost_figure()`` draws which of
the axes each of the 13 techniques spends (from techniques.yaml ``cost_axes``).
"""
from __future__ import annotations

from inferopt.diagnosis import knowledge
from inferopt.i18n import tr
from inferopt.i18n.prose import prose

COLORSCALE = [[0.0, "#c0392b"], [0.5, "#f4f6f7"], [1.0, "#1e8449"]]


def _axis_label(a: dict) -> str:
    """``memory (显存)`` in English; the translated name alone in an edition that translates it."""
    shown = prose(a["name"])
    return shown if shown != a["name"] else f"{a['name']} ({a['name_zh']})"


def tradeoff_matrix():
    """(row names, axis labels, scores as a list of lists of -1/0/1, hover texts): the data, in English
    (notebook code reads it: ``labels[j].startswith("memory")``); ``tradeoff_figure`` shows it translated."""
    data = knowledge.load("tradeoffs")
    axes = data["axes"]
    names, z, hover = [], [], []
    for r in data["rows"]:
        names.append(r["name"])
        z.append([r["scores"].get(a["id"], 0) for a in axes])
        gives = r["gives_up"] + (f" + {r['course_adds']} (added by the course)" if r.get("course_adds") else "")
        hover.append([f"{r['name']}: gives up {gives}; buys {r['buys']}" for _ in axes])
    labels = [f"{a['name']} ({a['name_zh']})" for a in axes]
    return names, labels, z, hover


def _gives_up(r: dict) -> str:
    """The original's cost of a row, then what the course adds to it (marked), in the edition's language."""
    if not r.get("course_adds"):
        return prose(r["gives_up"])
    return tr("{original} + {added} (added by the course)", original=prose(r["gives_up"]), added=prose(r["course_adds"]))


def _shown_matrix():
    """``tradeoff_matrix()`` as the figure shows it: names, labels and hover texts in the edition's language."""
    data = knowledge.load("tradeoffs")
    names, _labels, z, _hover = tradeoff_matrix()
    rows = data["rows"]
    hover = [[tr("{name}: gives up {gives_up}; buys {buys}", name=prose(r["name"]), gives_up=_gives_up(r),
                 buys=prose(r["buys"])) for _ in data["axes"]] for r in rows]
    return [prose(r["name"]) for r in rows], [_axis_label(a) for a in data["axes"]], z, hover


def tradeoff_figure():
    """Heatmap: rows = optimizations, columns = axes; red = gives up, green = buys."""
    import plotly.graph_objects as go

    names, labels, z, hover = _shown_matrix()
    text = [[tr("buys") if v > 0 else tr("gives up") if v < 0 else "" for v in row] for row in z]
    fig = go.Figure(go.Heatmap(z=z, x=labels, y=names, zmin=-1, zmax=1, colorscale=COLORSCALE,
                               text=text, texttemplate="%{text}", hovertext=hover, hoverinfo="text",
                               showscale=False, xgap=2, ygap=2))
    fig.update_layout(title=tr("What each optimization gives up and buys (§7.1)"), height=420,
                      yaxis={"autorange": "reversed"}, margin={"l": 10, "r": 10, "t": 50, "b": 10})
    return fig


def technique_cost_figure():
    """Heatmap of the 13 techniques against the axes they spend (cost_axes in techniques.yaml)."""
    import plotly.graph_objects as go

    axes = ["compute", "communication", "memory", "accuracy", "complexity"]
    techs = knowledge.techniques()
    z = [[-1 if a in t.cost_axes else 0 for a in axes] for t in techs]
    fig = go.Figure(go.Heatmap(z=z, x=[prose(a) for a in axes], y=[t.id for t in techs], zmin=-1, zmax=1, colorscale=COLORSCALE,
                               hovertext=[[tr("{name}: costs {cost}", name=prose(t.name), cost=prose(t.cost))
                                           for _ in axes] for t in techs],
                               hoverinfo="text", showscale=False, xgap=2, ygap=2))
    fig.update_layout(title=tr("What the 13 techniques spend"), height=460, width=700,
                      yaxis={"autorange": "reversed"}, margin={"l": 10, "r": 10, "t": 50, "b": 10})
    return fig
