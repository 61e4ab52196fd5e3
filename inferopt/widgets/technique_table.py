"""The technique map of §1 rendered from assets/techniques.yaml, filterable by symptom and cost.

- ``technique_rows(symptom=None, max_cost=None)`` (pure): the rows as dicts;
- ``technique_table_html(rows)`` (pure): an HTML table;
- ``TechniqueTable``: two dropdowns (symptom, highest cost) over the table.
"""
from __future__ import annotations

import shlex

import ipywidgets as W

from inferopt.diagnosis import knowledge
from inferopt.errors import CourseError
from inferopt.i18n import edition, tr
from inferopt.i18n.prose import prose
from inferopt.widgets._common import error_html, esc

COLUMNS = [("name", "Technique"), ("solves", "What it solves"), ("cost", "What it costs"),
           ("cost_level", "Cost"), ("module", "Covered in"), ("flags", "vLLM 0.32 flags"),
           ("hardware", "Needs")]


def technique_rows(symptom: str | None = None, max_cost: str | None = None) -> list:
    """Rows of the technique map (dicts with the COLUMNS keys plus id and symptoms)."""
    needs = knowledge.load("techniques")["hardware_needs"]
    rows = []
    for t in knowledge.filter_techniques(symptom, max_cost):
        if t.default_on:
            flags = tr("on by default") + (tr("; off: {flags}", flags=shlex.join(t.disable_flags))
                                           if t.disable_flags else "")
            if t.enable_flags:
                flags += tr("; tune: {flags}", flags=shlex.join(t.enable_flags))
        elif t.checkpoint:     # a precision that is another checkpoint, not a flag (vLLM reads it from config.json)
            flags = (tr("none: serve an AWQ or GPTQ INT4 checkpoint of the model") if t.checkpoint == "int4"
                     else tr("none: serve an INT8 W8A8 checkpoint of the model"))
        else:
            flags = shlex.join(t.enable_flags)
        rows.append({"id": t.id, "name": f"{t.name} ({t.name_zh})" if t.name_zh != t.name else t.name,
                     "solves": t.solves, "cost": t.cost, "cost_level": t.cost_level, "module": t.module,
                     "flags": flags, "hardware": needs[t.hardware]["text"] if t.hardware != "none" else "",
                     "symptoms": list(t.symptoms)})
    return rows


_PROSE = ("solves", "cost", "module", "hardware")   # asset prose, shown in the edition's language


def _shown_name(row: dict) -> str:
    """The name column in the edition's language: the technique's translated name where it has one (in the
    Chinese edition also where that name is the English one, PagedAttention, without the English edition's gloss)."""
    names = {t.id: t.name for t in knowledge.techniques()}
    english = names.get(row["id"])
    if english is None or (prose(english) == english and edition() == "en"):
        return row["name"]
    return prose(english)


def technique_table_html(rows: list) -> str:
    """The rows as an HTML table (flags in code font; asset prose in the edition's language)."""
    head = "".join(f"<th style='text-align:left'>{esc(tr(h))}</th>" for _, h in COLUMNS)
    body = []
    for r in rows:
        cells = []
        for k, _ in COLUMNS:
            v = esc(_shown_name(r) if k == "name" else prose(r[k]) if k in _PROSE
                    else tr(r[k]) if k == "cost_level" else r[k])
            if k == "flags":  # long flag lists wrap inside their cell: the table fits the notebook
                v = f'<code style="white-space:normal;overflow-wrap:anywhere">{v}</code>'
            cells.append(f"<td style='text-align:left'>{v}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


class TechniqueTable(W.VBox):
    """Filter the technique map by symptom and by highest acceptable cost."""

    def __init__(self, symptom: str = "all", max_cost: str = "all"):
        names = knowledge.load("techniques")["symptom_names"]
        self.symptom_w = W.Dropdown(options=[(tr("all symptoms"), "all")] + [(prose(v), k) for k, v in names.items()],
                                    value=symptom, description=tr("symptom"))
        self.cost_w = W.Dropdown(options=[(tr("any cost"), "all"), (tr("low"), "low"), (tr("up to medium"), "medium"),
                                          (tr("up to high"), "high")], value=max_cost, description=tr("cost"))
        self.table_w = W.HTML()
        self.rows = []
        self.error_text = None
        self.symptom_w.observe(lambda _c: self.refresh(), names="value")
        self.cost_w.observe(lambda _c: self.refresh(), names="value")
        super().__init__(children=[W.HBox([self.symptom_w, self.cost_w]), self.table_w])
        self.refresh()

    def refresh(self) -> None:
        try:
            self.rows = technique_rows(self.symptom_w.value, self.cost_w.value)
            self.error_text = None
            self.table_w.value = technique_table_html(self.rows)
        except CourseError as exc:
            self.rows, self.error_text = [], str(exc)
            self.table_w.value = error_html(str(exc))

    def __repr__(self) -> str:
        ids = [r["id"] for r in self.rows]
        return f"TechniqueTable(symptom={self.symptom_w.value}, cost={self.cost_w.value}, rows={ids})"
