"""Checks on every translated unit: it keeps what must not change, and it uses the glossary's terms.

- Preservation: the same numbers, inline code, command-line flags, link targets and math as its
  English source (as sets: a translation may say a number twice or in another order, never another
  number or lose one).
- Glossary (``assets/glossary.yaml``), one term per concept and one concept per term, both ways:
  an English term in the unit (outside inline code and link targets) appears in the translation in its
  Chinese form; a Chinese term marked ``exclusive`` in the translation stands for the concept its English
  unit names (练习 is an exercise, never a lab); and no
  translation uses a form the glossary has retired (``avoid``: 内核 for a GPU kernel, 实时 for live, ...).
  Longer terms are read first and cover the shorter ones inside them (投机解码 is speculative decoding,
  not Decode; Jupyter 内核 is not 内核).
- ``catalog_problems()``: the glossary over every catalog of the edition (the notebooks' .po files,
  ``inferopt.po`` and ``assets.po``).
"""
from __future__ import annotations

import json
import re
from functools import lru_cache

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
    """An English form as whole words, any case, a space also matching a hyphen (KV-cache, compute-bound)."""
    return re.compile(r"(?<![\w-])" + re.escape(term).replace(r"\ ", r"[\s-]+") + r"(?![\w-])", re.I)


def _zh_rx(term: str) -> re.Pattern:
    """A Chinese form: as it is written; one that begins or ends with a Latin word (``kernel``, ``KV Cache``,
    ``Jupyter 内核``) only as a whole word there (never inside ``kernels_dir``), in any case (the original
    writes Kernel 优化 at the head of a phrase)."""
    left = r"(?<![A-Za-z0-9_-])" if re.match(r"[A-Za-z0-9]", term) else ""
    right = r"(?![A-Za-z0-9_-])" if re.search(r"[A-Za-z0-9]$", term) else ""
    return re.compile(left + re.escape(term).replace(r"\ ", r"\s*") + right, re.I if left or right else 0)


def _read(text: str, forms: list[tuple[str, int, re.Pattern]]) -> tuple[dict[int, str], str]:
    """{term index: the form found} of the terms in ``text``, longest form first; each hit is blanked so that a
    shorter term inside it is not read again (speculative decoding is not decoding). Also the text left."""
    found: dict[int, str] = {}
    for form, i, rx in forms:
        if rx.search(text):
            found.setdefault(i, form)
            text = rx.sub(lambda m: "\0" * len(m.group(0)), text)
    return found, text


@lru_cache(maxsize=8)
def _compiled(key: str) -> tuple:
    terms = json.loads(key)
    en = sorted(((e, i, _term_rx(e)) for i, t in enumerate(terms) for e in t["en"]), key=lambda f: -len(f[0]))
    zh = sorted(((z, i, _zh_rx(z)) for i, t in enumerate(terms) for z in t["zh"]), key=lambda f: -len(f[0]))
    avoid = [(a, i, _zh_rx(a)) for i, t in enumerate(terms) for a in t.get("avoid", ())]
    return en, zh, avoid


# a quotation of the original chapter (Chinese inside “…”): its own words, which the glossary does not govern
_ORIGINAL_QUOTE = re.compile(r"“[^”]*[\u4e00-\u9fff][^”]*”")


def glossary_problems(english: str, chinese: str, terms: list[dict] | None = None) -> list[str]:
    """Glossary problems of one translation, both ways: an English term without its Chinese form; a Chinese
    term whose concept the English does not name (the word used for another concept); a retired form. A quotation
    of the original chapter (“…” holding Chinese) is read in neither: it is the original's words, kept as written."""
    terms = terms if terms is not None else glossary()
    en_forms, zh_forms, avoid = _compiled(json.dumps(terms, sort_keys=True, default=str))
    quotes = _ORIGINAL_QUOTE.findall(_plain(english))       # the English quotes the original: the same quotes in
    zh_plain = _plain(chinese)                               # the Chinese are its words too (others are ordinary “”)
    for q in quotes:
        zh_plain = zh_plain.replace(q, " ")
    in_en, _ = _read(_ORIGINAL_QUOTE.sub(" ", _plain(english)), en_forms)
    in_zh, zh_left = _read(zh_plain, zh_forms)
    out = []
    for i, hit in in_en.items():
        if i not in in_zh:
            out.append(f"glossary: {hit!r} should appear as {' / '.join(terms[i]['zh'])}")
    for i, form in in_zh.items():
        if i not in in_en and terms[i].get("exclusive"):
            out.append(f"glossary: {form!r} is the term for {terms[i]['en'][0]!r}, which the English does not say "
                       f"(one concept per term: use another word)")
    for a, i, rx in avoid:
        if rx.search(zh_left):
            out.append(f"glossary: {a!r} is not the course's term; write {terms[i]['zh'][0]} "
                       f"(for {terms[i]['en'][0]!r})")
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


def catalogs(language: str = "zh_CN") -> list:
    """Every catalog of the edition: the notebooks' .po files, the runtime strings' and the asset prose's."""
    from inferopt import i18n

    return sorted((i18n.LOCALE / language / "LC_MESSAGES").rglob("*.po"))


def catalog_problems(language: str = "zh_CN", terms: list[dict] | None = None, only=None) -> list[str]:
    """The glossary, both ways, over every translated entry of every catalog, or of the catalogs ``only`` names
    (one line per problem)."""
    import polib

    from inferopt import i18n

    terms = terms if terms is not None else glossary()
    out = []
    for path in only if only is not None else catalogs(language):
        for e in polib.pofile(str(path)):
            if e.msgstr and not e.obsolete and "fuzzy" not in e.flags:
                short = " ".join(e.msgid.split())[:60]
                out += [f"{path.relative_to(i18n.LOCALE.parent)}: {short!r}: {p}" for p in glossary_problems(e.msgid, e.msgstr,
                                                                                                      terms)]
    return out
