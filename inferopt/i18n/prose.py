"""Asset prose in the edition's language: the text from ``assets/`` a learner reads in a widget, figure or CLI line.

- ``FIELDS``: per asset file, the fields that are prose shown to learners (a path: ``a.b`` a key, ``[]``
  every element of a list, ``*`` every value of a mapping). Ids, flags, numbers and every field not named
  here are never translated.
- The translations: one gettext domain, ``locale/zh_CN/LC_MESSAGES/assets.po``, keyed by the English text
  (each entry's ``#:`` comment names the file and field it comes from), as the runtime strings are in
  ``inferopt.po``.
- ``prose(text)``: the edition's form of asset text where it is displayed (the data the engines compute on
  stays English): the whole text if it is an entry, else every asset phrase inside a composed message
  (``A1: <condition title> (prompt_tokens 2500 >= 2000)``) replaced, and then the runtime catalog's
  templates by ``localize``. English edition: the text unchanged.
- ``python -m inferopt.i18n assets-update`` merges ``assets.po`` with today's YAML (new strings empty, changed
  ones new, removed ones obsolete); ``assets-check`` lists every learner-visible asset string without a
  current translation, or whose translation lost a number, flag or inline code of the English.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from inferopt import assets, i18n
from inferopt.i18n import LANGUAGE, edition, localize, po_path

DOMAIN = "assets"
FIELDS = {
    "decision_tree.yaml": ["baseline.title", "baseline.metrics[].name", "branches[].title", "branches[].trigger",
                           "branches[].conditions[].title", "branches[].conditions[].decided_by",
                           "branches[].conditions[].techniques[].unless", "branches[].conditions[].actions[].text"],
    "optimization_order.yaml": ["rule", "steps[].title", "steps[].reason"],
    "pitfalls.yaml": ["pitfalls[].title", "pitfalls[].why", "pitfalls[].advice"],
    "techniques.yaml": ["symptom_names.*", "hardware_needs.*.text", "techniques[].name", "techniques[].solves",
                        "techniques[].cost", "techniques[].module"],
    "cost_ranking.yaml": ["kinds[].label"],
    "knowledge_map.yaml": ["root", "modules[].name", "modules[].topics[]"],
    "tradeoffs.yaml": ["axes[].name", "rows[].name", "rows[].gives_up", "rows[].course_adds", "rows[].buys"],
    "learning_path.yaml": ["self_check[].title", "self_check[].prompt", "self_check[].questions[].prompt",
                           "self_check[].options[].label", "self_check[].items[].label", "self_check[].layers[]",
                           "self_check[].explanation", "self_check[].note", "practice[]", "follow[].channel",
                           "follow[].what", "open_source[].start", "mindset[].changes", "mindset[].stays"],
}
# a phrase is replaced inside a composed message (as whole words) only from this length on
# (shorter ones: as the whole text only)
MIN_PHRASE = 12
FIX_CHECK = "python -m inferopt.i18n assets-check"
FIX_UPDATE = "python -m inferopt.i18n assets-update"


@dataclass(frozen=True)
class Prose:
    text: str        # the English
    where: str       # assets/decision_tree.yaml branches/0/conditions/1/title


def _walk(node, steps: list[str], where: str):
    if not steps:
        if isinstance(node, str) and node.strip():
            yield where, node
        return
    step, rest = steps[0], steps[1:]
    if step.endswith("[]"):
        key = step[:-2]
        for i, item in enumerate((node or {}).get(key) or []):
            yield from _walk(item, rest, f"{where}/{key}/{i}")
    elif step == "*":
        for k, v in (node or {}).items():
            yield from _walk(v, rest, f"{where}/{k}")
    elif isinstance(node, dict) and step in node:
        yield from _walk(node[step], rest, f"{where}/{step}")


def extract() -> list[Prose]:
    """Every learner-visible string of the files in FIELDS, in file order (a text may occur in several places)."""
    out = []
    for name, paths in FIELDS.items():
        data = assets.load(name)
        for p in paths:
            for where, text in _walk(data, p.split("."), ""):
                out.append(Prose(text, f"assets/{name} {where.lstrip('/')}"))
    return out


def english() -> dict[str, list[str]]:
    """{English text: [where it occurs]} of every learner-visible asset string."""
    out: dict[str, list[str]] = {}
    for p in extract():
        out.setdefault(p.text, []).append(p.where)
    return out


def catalog(language: str = "zh_CN") -> dict[str, str]:
    """{English: translation} of the asset strings (translated, not fuzzy, not obsolete)."""
    return i18n.catalog(language, DOMAIN)


@lru_cache(maxsize=4)
def _phrases(language: str) -> list[tuple[re.Pattern, str]]:
    """(pattern, translation) of the catalog's phrases that may occur inside a message, longest first;
    a phrase's first letter matches in either case (a title lower-cased inside a sentence)."""
    out = []
    for en, zh in sorted(catalog(language).items(), key=lambda kv: -len(kv[0])):
        if len(en) < MIN_PHRASE or en == zh:
            continue
        head = re.escape(en[0])
        if en[0].isalpha():
            head = f"[{en[0].upper()}{en[0].lower()}]"
        left = r"(?<![\w-])" if re.match(r"\w", en) else ""      # whole words only: never inside another word
        right = r"(?![\w-])" if re.search(r"\w$", en) else ""
        out.append((re.compile(left + head + re.escape(en[1:]) + right), zh))
    return out


def prose(text, language: str | None = None) -> str:
    """Asset text (or a message composed of it) in the current edition; English edition: unchanged."""
    if text is None:
        return text
    text = str(text)
    lang = language or LANGUAGE.get(edition())
    if not lang or not text:
        return text
    table = catalog(lang)
    if text in table:
        return table[text]
    for rx, zh in _phrases(lang):
        if rx.search(text):
            text = rx.sub(lambda _m, z=zh: z, text)
    return localize(text)


# ------------------------------------------------------------------ maintenance
def update(language: str = "zh_CN") -> dict[str, int]:
    """Merge assets.po with today's YAML: new strings as empty entries, entries no longer in FIELDS obsolete."""
    import polib

    path = po_path(DOMAIN, language)
    if path.exists():
        po = polib.pofile(str(path), wrapwidth=0)
    else:
        po = polib.POFile(wrapwidth=0)
        po.metadata = {"Project-Id-Version": "inferopt course assets", "Language": language,
                       "MIME-Version": "1.0", "Content-Type": "text/plain; charset=UTF-8",
                       "Content-Transfer-Encoding": "8bit"}
    now = english()
    counts = {"kept": 0, "new": 0, "obsolete": 0}
    have = {e.msgid: e for e in po}
    for en, where in now.items():
        e = have.get(en)
        if e is None:
            e = polib.POEntry(msgid=en, msgstr="")
            po.append(e)
            counts["new"] += 1
        else:
            e.obsolete = False
            counts["kept"] += 1
        e.occurrences = [(w.split(" ", 1)[0], w.split(" ", 1)[1]) for w in where]
    for e in po:
        if e.msgid not in now and not e.obsolete:
            e.obsolete = True
            counts["obsolete"] += 1
    path.parent.mkdir(parents=True, exist_ok=True)
    po.save(str(path))
    i18n.catalog.cache_clear()
    _phrases.cache_clear()
    return counts
