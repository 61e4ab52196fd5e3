"""The 7-item self-check of §8, graded on the spot (items in assets/learning_path.yaml).

``grade(item_id, answer) -> Grade`` is pure; the answer shape per item kind:
- ``symptoms``   (diagnose): {question id: technique id}; right when the decision engine
                 recommends that technique for the question's metrics (so the quiz follows the
                 data: edit the tree and the key changes with it);
- ``conflicts``  (pick_set): iterable of option labels ticked; right = exactly the 5 pitfalls;
- ``order``      (order): list of the 4 symptom ids, first to last;
- ``plan``       (plan): iterable of technique ids turned on; all required, none forbidden;
- ``monitoring`` (classify): {metric label: layer};
- ``tradeoffs``  (tradeoff): {row id: the "gives up" text}; at least ``min_correct`` right;
- ``learning_plan`` (plan_text): text with one line per month.
``SelfCheck`` is the ipywidgets quiz over the same functions.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import ipywidgets as W

from inferopt.diagnosis import knowledge
from inferopt.diagnosis.decision import diagnose
from inferopt.errors import CourseError
from inferopt.i18n import tr
from inferopt.i18n.prose import prose
from inferopt.widgets._common import error_html, esc


@dataclass
class Grade:
    item: str
    correct: bool
    score: str
    feedback: list = field(default_factory=list)

    def html(self) -> str:
        color = "#1e8449" if self.correct else "#922b21"
        head = tr("Right") if self.correct else tr("Not yet")
        items = "".join(f"<li>{esc(prose(f))}</li>" for f in self.feedback)   # asset prose in the edition's language
        return f'<div style="color:{color}"><b>{head}</b> ({esc(self.score)})<ul>{items}</ul></div>'


def items() -> list:
    return knowledge.load("learning_path")["self_check"]


def item(item_id: str) -> dict:
    for it in items():
        if it["id"] == item_id:
            return it
    raise CourseError(f"self-check item {item_id!r} does not exist; items: {', '.join(i['id'] for i in items())}")


def answer_key(item_id: str):
    """The right answer of an item, in the shape ``grade`` takes (None for the free-text plan)."""
    it = item(item_id)
    kind = it["kind"]
    if kind == "diagnose":
        out = {}
        for q in it["questions"]:
            d = diagnose(q["metrics"], q["slos"], q["workload"], q["techniques_on"])
            right = [t for t in d.techniques if t in q["choices"]]
            out[q["id"]] = right[0] if right else None
        return out
    if kind == "pick_set":
        return sorted(o["label"] for o in it["options"] if o["pitfall"])
    if kind == "order":
        return [s["symptom"] for s in knowledge.load("optimization_order")["steps"]]
    if kind == "plan":
        return sorted(it["required"])
    if kind == "classify":
        return {x["label"]: x["layer"] for x in it["items"]}
    if kind == "tradeoff":
        return {r["id"]: r["gives_up"] for r in knowledge.load("tradeoffs")["rows"]}
    return None


def grade(item_id: str, answer) -> Grade:
    """Grade one self-check item; feedback explains every mistake."""
    it = item(item_id)
    kind = it["kind"]
    if kind == "diagnose":
        return _grade_symptoms(it, answer or {})
    if kind == "pick_set":
        picked = set(answer or [])
        labels = {o["label"]: o for o in it["options"]}
        bad = picked - set(labels)
        if bad:
            raise CourseError(f"{item_id}: unknown option(s) {sorted(bad)}")
        pits = {p["id"]: p for p in knowledge.load("pitfalls")["pitfalls"]}
        fb = []
        for lab, o in labels.items():
            if o["pitfall"] and lab not in picked:
                fb.append(tr("missed: {label} — {why}", label=prose(lab), why=prose(pits[o["pitfall"]]["why"])))
            if not o["pitfall"] and lab in picked:
                fb.append(tr("not a known pitfall: {label}", label=prose(lab)))
        n_right = sum(1 for lab, o in labels.items() if bool(o["pitfall"]) == (lab in picked))
        return Grade(item_id, not fb, tr("{n}/{total} options right", n=n_right, total=len(labels)), fb)
    if kind == "order":
        want = answer_key(item_id)
        got = list(answer or [])
        steps = knowledge.load("optimization_order")["steps"]
        fb = [] if got == want else [tr("step {n}: {title} — {reason}", n=s["step"], title=prose(s["title"]),
                                        reason=prose(s["reason"])) for s in steps]
        return Grade(item_id, got == want, tr("{n}/4 in place", n=sum(a == b for a, b in zip(got, want, strict=False))),
                     fb)
    if kind == "plan":
        picked = set(answer or [])
        knowledge.check_technique_ids(sorted(picked), field=item_id)
        missing = sorted(set(it["required"]) - picked)
        wrong = sorted(set(it["forbidden"]) & picked)
        fb = [tr("missing: {id}", id=m) for m in missing] + [tr("should stay off: {id}", id=w) for w in wrong]
        if fb:
            fb.append(prose(it["explanation"]))
        return Grade(item_id, not fb, tr("{n}/{total} required, {bad} forbidden", n=len(it["required"]) - len(missing),
                                         total=len(it["required"]), bad=len(wrong)), fb)
    if kind == "classify":
        key = answer_key(item_id)
        got = dict(answer or {})
        fb = [tr("{label}: {layer} layer, not {got}", label=prose(lab), layer=prose(key[lab]),
                 got=prose(got.get(lab)) if got.get(lab) else tr("(none)")) for lab in key if got.get(lab) != key[lab]]
        return Grade(item_id, not fb, tr("{n}/{total} right", n=len(key) - len(fb), total=len(key)), fb)
    if kind == "tradeoff":
        key = answer_key(item_id)
        got = dict(answer or {})
        rows = {r["id"]: r for r in knowledge.load("tradeoffs")["rows"]}
        fb = [tr("{name} gives up {gives_up} and buys {buys}", name=prose(rows[k]["name"]), gives_up=prose(key[k]),
                 buys=prose(rows[k]["buys"])) for k in key if got.get(k) != key[k]]
        n = len(key) - len(fb)
        return Grade(item_id, n >= it["min_correct"], tr("{n}/{total} right (need {need})", n=n, total=len(key),
                                                        need=it["min_correct"]), fb)
    if kind == "plan_text":
        lines = [ln.strip() for ln in str(answer or "").splitlines() if ln.strip()]
        short = [ln for ln in lines if _words(ln) < it["min_words"]]
        ok = len(lines) >= it["months"] and not short
        fb = []
        if len(lines) < it["months"]:
            fb.append(tr("write {months} lines, one per month (you have {n})", months=it["months"], n=len(lines)))
        if short:
            fb.append(tr("make each line concrete (at least {words} words): {line}", words=it["min_words"],
                         line=repr(short[0])))
        if not ok:
            fb.append(tr("ideas: {ideas}", ideas="; ".join(map(prose, knowledge.load("learning_path")["practice"]))))
        return Grade(item_id, ok, tr("{n}/{months} months", n=len(lines), months=it["months"]), fb + [prose(it["note"])])
    raise CourseError(f"{item_id}: unknown kind {kind!r}")


_CJK = re.compile(r"[\u3400-\u9fff]")


def _words(line: str) -> int:
    """Words of a plan line: space-separated words; a line in Chinese (no spaces between words) counts its
    Latin words and every two Chinese characters as one word ("读 vLLM 调度器源码" is 4)."""
    if not _CJK.search(line):
        return len(line.split())
    return len(_CJK.sub(" ", line).split()) + len(_CJK.findall(line)) // 2


def _grade_symptoms(it: dict, answer: dict) -> Grade:
    fb, right = [], 0
    for q in it["questions"]:
        d = diagnose(q["metrics"], q["slos"], q["workload"], q["techniques_on"])
        good = [t for t in d.techniques if t in q["choices"]]
        pick = answer.get(q["id"])
        if pick in good:
            right += 1
        else:
            rec = next(r for r in d.recommendations if r["id"] == good[0])
            fb.append(tr("{q}: {good}, not {pick} — branch {branch}, {reason}", q=q["id"], good=good[0],
                         pick=pick or tr("(none)"), branch=d.branch, reason=prose(rec["reason"])))
    n = len(it["questions"])
    return Grade(it["id"], right == n, tr("{n}/{total} right", n=right, total=n), fb)


def _full_label() -> W.Layout:
    """A checkbox as wide as its label (the default 300 px cut the long pitfall labels with "…")."""
    return W.Layout(width="auto", max_width="100%")


class SelfCheck(W.VBox):
    """The interactive quiz: one section per item, each with a Check button and feedback."""

    def __init__(self):
        self.controls = {}
        self.feedback = {}
        self.grades = {}
        sections = []
        for it in items():
            ctrl, box = self._controls(it)
            self.controls[it["id"]] = ctrl
            fb = W.HTML()
            self.feedback[it["id"]] = fb
            btn = W.Button(description=tr("Check"))
            btn.on_click(lambda _b, i=it["id"]: self.check(i))
            sections.append(W.VBox([W.HTML(f"<h4>{esc(prose(it['title']))}</h4><p>{esc(prose(it.get('prompt', '')))}</p>"),
                                    box, btn, fb]))
        super().__init__(children=sections)

    def _controls(self, it):
        kind = it["kind"]
        if kind == "diagnose":
            c = {q["id"]: W.RadioButtons(options=q["choices"], value=None) for q in it["questions"]}
            box = W.VBox([W.VBox([W.HTML(esc(prose(q["prompt"]))), c[q["id"]]]) for q in it["questions"]])
            return c, box
        if kind == "pick_set":
            c = {o["label"]: W.Checkbox(value=False, description=prose(o["label"]), indent=False, layout=_full_label())
                 for o in it["options"]}
            return c, W.VBox(list(c.values()))
        if kind == "order":
            names = knowledge.load("techniques")["symptom_names"]
            opts = [(prose(names[s]), s) for s in it["items"]]
            c = [W.Dropdown(options=[("—", None)] + opts, value=None, description=f"{i + 1}.") for i in range(4)]
            return c, W.VBox(c)
        if kind == "plan":
            c = {t: W.Checkbox(value=False, description=t, indent=False, layout=_full_label()) for t in it["options"]}
            return c, W.VBox(list(c.values()))
        if kind == "classify":
            c = {x["label"]: W.Dropdown(options=[("—", None)] + [(prose(layer), layer) for layer in it["layers"]],
                                        value=None, description=prose(x["label"]), style={"description_width": "280px"},
                                        layout=W.Layout(width="480px")) for x in it["items"]}
            return c, W.VBox(list(c.values()))
        if kind == "tradeoff":
            rows = knowledge.load("tradeoffs")["rows"]
            opts = sorted({r["gives_up"] for r in rows})
            c = {r["id"]: W.Dropdown(options=[("—", None)] + [(prose(o), o) for o in opts], value=None,
                                     description=prose(r["name"]), style={"description_width": "200px"},
                                     layout=W.Layout(width="640px")) for r in rows}
            return c, W.VBox(list(c.values()))
        c = W.Textarea(value="", placeholder="month 1: ...", layout=W.Layout(width="640px", height="140px"))
        return c, c

    def answer(self, item_id: str):
        """The current answer of an item, in the shape ``grade`` takes."""
        kind = item(item_id)["kind"]
        c = self.controls[item_id]
        if kind in ("diagnose", "classify", "tradeoff"):
            return {k: w.value for k, w in c.items() if w.value is not None}
        if kind in ("pick_set", "plan"):
            return [k for k, w in c.items() if w.value]
        if kind == "order":
            return [w.value for w in c]
        return c.value

    def fill(self, item_id: str, answer) -> None:
        """Set an item's controls from an answer (used by notebooks and tests)."""
        kind = item(item_id)["kind"]
        c = self.controls[item_id]
        if kind in ("diagnose", "classify", "tradeoff"):
            for k, v in answer.items():
                c[k].value = v
        elif kind in ("pick_set", "plan"):
            for k, w in c.items():
                w.value = k in set(answer)
        elif kind == "order":
            for w, v in zip(c, answer, strict=False):
                w.value = v
        else:
            c.value = answer

    def check(self, item_id: str) -> Grade | None:
        try:
            g = grade(item_id, self.answer(item_id))
        except CourseError as exc:
            self.feedback[item_id].value = error_html(str(exc))
            self.grades.pop(item_id, None)
            return None
        self.grades[item_id] = g
        self.feedback[item_id].value = g.html()
        return g

    def check_all(self) -> dict:
        return {it["id"]: self.check(it["id"]) for it in items()}

    def __repr__(self) -> str:
        passed = [k for k, g in self.grades.items() if g.correct]
        return f"SelfCheck(items={len(self.controls)}, checked={len(self.grades)}, passed={passed})"
