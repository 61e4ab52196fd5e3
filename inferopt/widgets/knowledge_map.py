"""The knowledge map of §7 as a picture: the course's modules, their topics, and the 13 techniques of chapter 1.

``techniques_by_module()`` (pure): {module id: [technique ids]} from each technique's ``module`` text;
``knowledge_map_figure()``: a plotly sunburst of ``assets/knowledge_map.yaml`` in the edition's language
(module names and topics through ``inferopt.i18n.prose``; technique ids stay as they are).
"""
from __future__ import annotations

from collections import defaultdict

from inferopt.diagnosis import knowledge
from inferopt.i18n import tr
from inferopt.i18n.prose import prose


def techniques_by_module() -> dict[str, list[str]]:
    """{module id: technique ids}: a technique belongs to the module its ``module`` text names ("Module 2, chapter 6")."""
    kmap = knowledge.load("knowledge_map")
    out = defaultdict(list)
    for t in knowledge.techniques():
        for mid, prefix in kmap["module_prefix"].items():
            if t.module.startswith(prefix + ","):
                out[mid].append(t.id)
    return dict(out)


def knowledge_map_figure():
    """Sunburst: the root, the modules, each module's topics and the techniques it teaches."""
    import plotly.graph_objects as go

    kmap = knowledge.load("knowledge_map")
    techs = techniques_by_module()
    ids, labels, parents = ["root"], [prose(kmap["root"])], [""]
    for m in kmap["modules"]:
        nodes = [(m["id"], prose(m["name"]), "root")]
        nodes += [(f"{m['id']}/{topic}", prose(topic), m["id"]) for topic in m["topics"]]
        nodes += [(f"{m['id']}/tech/{t}", t, m["id"]) for t in techs.get(m["id"], [])]
        for node_id, label, parent in nodes:
            ids.append(node_id)
            labels.append(label)
            parents.append(parent)
    fig = go.Figure(go.Sunburst(ids=ids, labels=labels, parents=parents, insidetextorientation="radial"))
    fig.update_layout(title=tr("The course's knowledge map: modules, topics, and the 13 techniques"),
                      height=620, width=620, margin={"l": 0, "r": 0, "t": 50, "b": 0})
    return fig
