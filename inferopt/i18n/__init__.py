"""The course's editions (English, 中文): one lookup for every string a widget or a check shows.

- ``edition()``: ``"en"`` or ``"zh"``. The one setting is the environment variable ``INFEROPT_EDITION``
  (``make lab EDITION=zh`` passes it). Without it, a kernel started in the Chinese edition's folder
  (``zh/chapters``, ``zh/labs``) is Chinese, so a Chinese notebook opened from an English JupyterLab still speaks Chinese.
- ``tr(text, **values)``: the edition's form of an English string (``text`` is the key, as in gettext;
  ``{name}`` placeholders are filled from ``values`` after the lookup).
- ``localize(message)``: the edition's form of a message composed elsewhere (a lab check's hint, a
  ``CourseError``): whole-message and fragment templates of the catalog (``{name}`` matches any text,
  itself localized). ``errors.OneLine`` shows its line through it, so a lab check's hint is Chinese
  in the Chinese labs without the checks knowing about editions.

The text of ``assets/`` a learner reads (tree conditions, technique names and reasons, pitfalls, the self-check)
is a second gettext domain, ``locale/zh_CN/LC_MESSAGES/assets.po``, shown through ``inferopt.i18n.prose.prose``
where a widget, figure or the CLI displays it (``python -m inferopt.i18n assets-update|assets-check``).

The strings live in ``locale/zh_CN/LC_MESSAGES/inferopt.po`` (gettext, keyed by the English text;
read with ``polib`` the first time a Chinese string is needed). An English string without a
translation shows in English; ``tests/test_i18n.py`` fails on every ``tr("...")`` in ``inferopt/``
whose translation is missing or fuzzy. The notebooks' translation tools are ``inferopt.i18n.build``
(``python -m inferopt.i18n``).
"""
from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path

from inferopt import errors
from inferopt.paths import REPO_ROOT

EDITIONS = ("en", "zh")
ENV = "INFEROPT_EDITION"
LOCALE = REPO_ROOT / "locale"
ZH_ROOT = REPO_ROOT / "zh"
LANGUAGE = {"zh": "zh_CN"}   # edition -> gettext language folder under locale/
RUNTIME_DOMAIN = "inferopt"  # locale/zh_CN/LC_MESSAGES/inferopt.po: widgets, checks, messages


def edition() -> str:
    """``en`` or ``zh``: ``INFEROPT_EDITION`` if set, else ``zh`` in a ``zh/chapters`` or ``zh/labs`` folder, else ``en``."""
    value = os.environ.get(ENV, "").strip().lower()
    if value:
        if value not in EDITIONS:
            raise errors.CourseError(f"{ENV}={value!r} is not an edition of the course; use one of "
                                     f"{', '.join(EDITIONS)} (e.g. make lab EDITION=zh)")
        return value
    try:
        cwd = Path.cwd().resolve()
    except OSError:
        return "en"
    # a kernel runs in its notebook's folder: zh/chapters or zh/labs of this checkout or of a copy of it
    return "zh" if cwd.name in ("chapters", "labs") and cwd.parent.name == "zh" else "en"


def po_path(domain: str, language: str = "zh_CN") -> Path:
    """The .po file of a domain (``inferopt``, or a notebook such as ``chapters/01-technique-map``)."""
    return LOCALE / language / "LC_MESSAGES" / f"{domain}.po"


@lru_cache(maxsize=8)
def catalog(language: str = "zh_CN", domain: str = RUNTIME_DOMAIN) -> dict[str, str]:
    """{English: translation} of a domain's strings (translated, not fuzzy, not obsolete): the runtime strings
    (``inferopt``: widgets, checks, messages) by default, the asset prose with ``domain="assets"``."""
    import polib

    path = po_path(domain, language)
    if not path.exists():
        return {}
    return {e.msgid: e.msgstr for e in polib.pofile(str(path))
            if e.msgstr and not e.obsolete and "fuzzy" not in e.flags}


def tr(text: str, **values) -> str:
    """``text`` in the current edition, with ``{name}`` placeholders filled from ``values``."""
    lang = LANGUAGE.get(edition())
    out = catalog(lang).get(text, text) if lang else text
    return out.format(**values) if values else out


def columns(text: str) -> int:
    """Terminal columns of a text: a Chinese character takes two."""
    import unicodedata
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def pad(text: str, width: int, right: bool = False) -> str:
    """``text`` padded to ``width`` terminal columns, left- or right-aligned: a table that lines up in either edition."""
    fill = " " * max(0, width - columns(text))
    return fill + text if right else text + fill


_FIELD = re.compile(r"\{(\w+)\}")


@lru_cache(maxsize=4)
def _templates(language: str) -> list[tuple[re.Pattern, re.Pattern, str]]:
    """(whole-message pattern, fragment pattern, translation) per catalog entry with placeholders, longest first.
    A placeholder matches any text (``{n}``: a number or a word); in a fragment, one at either end matches a word
    (``Task {n}``)."""
    out = []
    for msgid, msgstr in catalog(language).items():
        parts = _FIELD.split(msgid)          # literal, name, literal, name, ...
        literal = "".join(parts[0::2])
        if len(parts) == 1 or len(literal.strip()) < 3:
            continue
        whole = frag = ""
        seen = set()
        for i, part in enumerate(parts):
            if i % 2 == 0:
                whole += re.escape(part)
                frag += re.escape(part)
            elif part in seen:
                whole += f"(?P={part})"
                frag += f"(?P={part})"
            else:
                seen.add(part)
                edge = i == 1 and parts[0] == "" or i == len(parts) - 2 and parts[-1] == ""
                # {n} is a number (36,352) or a word (``Task {n}``): never the rest of a message it begins
                whole += f"(?P<{part}>[\\w.,+-]+)" if part == "n" else f"(?P<{part}>.+?)"
                frag += f"(?P<{part}>[\\w.]+)" if edge else f"(?P<{part}>.+?)"
        out.append((len(literal), re.compile(whole, re.S), re.compile(frag, re.S), msgstr))
    out.sort(key=lambda t: -t[0])
    return [(w, f, s) for _n, w, f, s in out]


def fill_template(template: str, values: dict) -> str:
    """``template`` with each ``{name}`` of ``values`` replaced; every other brace kept as written (a quoted JSON
    object, a Prometheus ``{{ $labels.instance }}``), unlike ``str.format``."""
    return _FIELD.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), template)


def localize(message: str, _depth: int = 0) -> str:
    """A composed English message in the current edition: a whole-message template of the catalog if
    one matches, else every fragment template (literal text at both ends) replaced where it occurs."""
    lang = LANGUAGE.get(edition())
    if not lang or _depth > 4 or not message:
        return message
    table = catalog(lang)
    if message in table:
        return table[message]
    templates = _templates(lang)

    def fill(m, s):
        return fill_template(s, {k: localize(v, _depth + 1) for k, v in m.groupdict().items()})

    for whole, _frag, msgstr in templates:
        m = whole.fullmatch(message)
        if m and all(_balanced(v) for v in m.groupdict().values()):
            return fill(m, msgstr)
    out = message
    for _whole, frag, msgstr in templates:
        out = frag.sub(lambda m, s=msgstr: fill(m, s), out)
    for english, chinese in _plain(lang):   # plain phrases inside the message, longest first
        if english in out:
            out = out.replace(english, chinese)
    return out


def _balanced(text: str) -> bool:
    """No bracket closed that the text did not open: a placeholder never takes the end of a parenthesis (a
    template that begins and ends with one would otherwise match any message holding its words). An open one
    may stay open: a reason cut at 120 characters."""
    depth = []
    for ch in text:
        if ch in "([":
            depth.append(ch)
        elif ch in ")]" and (not depth or depth.pop() != "([)]"[")]".index(ch)]):
            return False
    return True


@lru_cache(maxsize=4)
def _plain(language: str) -> list[tuple[str, str]]:
    """The catalog's phrases without placeholders (over 12 characters), longest first: a phrase inside a longer
    one (``runtime memory`` in ``estimated runtime memory``) never replaces part of it."""
    return sorted(((e, z) for e, z in catalog(language).items() if "{" not in e and len(e) > 12),
                  key=lambda kv: -len(kv[0]))


errors.OneLine.localize = staticmethod(localize)
