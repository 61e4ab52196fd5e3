"""Checks on every translated unit: it keeps what must not change, and it uses the glossary's terms.

- Preservation: the same numbers, inline code, command-line flags, link targets and math as its
  English source (as sets: a translation may say a number twice or in another order, never another
  number or lose one).
- Glossary (``assets/glossary.yaml``): an English term in the unit (outside inline code and link
  targets) appears in the translation in one of its Chinese forms.
"""
from __future__ import annotations

import re

from inferopt import assets

_CODE = re.compile(r"``([^`]+)``|`([^`]+)`")   # a code span may wrap onto the next line (CommonMark)
_LINK_TARGET = re.compile(r"\]\(([^)\s]+)\)")
_MATH = re.compile(r"\$\$.+?\$\$|\$[^$\n]+\$", re.S)
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*")
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
_MARKER = re.compile(r"^[ \t]*(?:<!--\s*)?(?:BEGIN|END) SOLUTION(?:\s*-->)?[ \t]*$", re.M)   # make labs' markers

def glossary() -> list[dict]:
    """The glossary's terms: {'en': [English forms], 'zh': [Chinese forms, the preferred first]}."""
    return assets.load("glossary.yaml")["terms"]


def _code_spans(text: str) -> list[str]:
    return [" ".join((a or b).split()) for a, b in _CODE.findall(text)]


def _plain(text: str) -> str:
    """The unit without inline code, link targets, math and comments (what numbers and terms are read from)."""
    text = _HTML_COMMENT.sub(" ", text)
    text = _CODE.sub(" ", text)
    text = _LINK_TARGET.sub("]( )", text)
    return _MATH.sub(" ", text)


def _numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in _NUMBER.findall(_plain(text))}


def features(text: str) -> dict[str, set[str]]:
    """What a translation must keep: numbers, inline code, flags, link targets, math, the labs' solution markers."""
    return {"numbers": _numbers(text), "code": set(_code_spans(text)),
            "flags": set(_FLAG.findall(_plain(text))), "links": set(_LINK_TARGET.findall(text)),
            "math": set(_MATH.findall(_CODE.sub(" ", text))),
            "lab markers": {m.strip() for m in _MARKER.findall(text)}}


def preservation_problems(english: str, chinese: str) -> list[str]:
    """What the translation lost or added against its English unit (empty: it keeps everything)."""
    a, b = features(english), features(chinese)
    out = []
    for kind in a:
        lost, added = sorted(a[kind] - b[kind]), sorted(b[kind] - a[kind])
        if lost:
            out.append(f"{kind} missing: {', '.join(lost)}")
        if added:
            out.append(f"{kind} not in the English: {', '.join(added)}")
    return out


def _term_rx(term: str) -> re.Pattern:
    return re.compile(r"(?<![\w-])" + re.escape(term).replace(r"\ ", r"[\s-]+") + r"(?![\w-])", re.I)


def glossary_problems(english: str, chinese: str, terms: list[dict] | None = None) -> list[str]:
    """Glossary terms used in the English unit whose Chinese form is missing from the translation."""
    plain_en, plain_zh = _plain(english), _plain(chinese)
    out = []
    for t in terms if terms is not None else glossary():
        hit = next((e for e in t["en"] if _term_rx(e).search(plain_en)), None)
        if hit and not any(z in plain_zh for z in t["zh"]):
            out.append(f"glossary: {hit!r} should appear as {' / '.join(t['zh'])}")
    return out


def asset_prose_problems(language: str = "zh_CN") -> list[str]:
    """One line per learner-visible asset string without a current translation, or whose translation
    does not keep the English's numbers, flags and inline code or misses a glossary term."""
    from inferopt.i18n.prose import catalog, english

    table, terms = catalog(language), glossary()
    out = []
    for en, where in english().items():
        if en not in table:
            out.append(f"{where[0]}: no Chinese for {en!r}")
            continue
        out += [f"{where[0]}: {p} in {table[en]!r}" for p in preservation_problems(en, table[en])
                + glossary_problems(en, table[en], terms)]
    return out
