"""The original chapter's own words in the Chinese edition: where a cell or widget shows what the original said
(its knowledge tree, trade-off table, learning path), the zh edition shows the original's Chinese.

- ``assets/original/ch08.zh.txt``: the passages of the original, copied verbatim with their citation (the
  repository stays self-contained); ``seed_problems(seed)`` holds the copy to the seed text where it is present;
- ``assets/original_zh.yaml``: English asset string -> the original's words; ``quote_problems()`` checks each
  quote is the original's (each run between spaces, or before a full-width parenthesis, occurs in the passages,
  punctuation folded: the original mixes ``,`` and ``，``) and that ``assets.po`` translates the string with
  exactly that quote.
"""
from __future__ import annotations

import re

from inferopt import assets
from inferopt.paths import REPO_ROOT

PASSAGES = REPO_ROOT / "assets" / "original" / "ch08.zh.txt"
SEED_NAME = "ch08-inference-optimization-selection.zh.txt"
_FOLD = str.maketrans({"，": ",", "（": "(", "）": ")", "：": ":", "、": ",", "“": '"', "”": '"'})


def seed_file():
    """The seed chapter beside the checkout (``../shared/seed``, also from a worktree one level deeper), or None."""
    for up in (REPO_ROOT.parent, REPO_ROOT.parent.parent):
        path = up / "shared" / "seed" / SEED_NAME
        if path.exists():
            return path
    return None


def _fold(text: str) -> str:
    return re.sub(r"\s+", "", text.translate(_FOLD))


def passage_lines() -> list[str]:
    """The copied lines of the original (our '#' comments left out)."""
    return [ln for ln in PASSAGES.read_text(encoding="utf-8").splitlines() if not ln.startswith("#")]


def seed_problems(seed_text: str) -> list[str]:
    """Each copied line that is not a line of the seed."""
    lines = set(seed_text.splitlines())
    return [f"{PASSAGES.name}: line not in the original: {ln!r}" for ln in passage_lines() if ln not in lines]


def quotes() -> list[dict]:
    return assets.load("original_zh.yaml")["quotes"]


def quote_problems(quote_list: list[dict] | None = None, table: dict | None = None) -> list[str]:
    """A quote whose words are not the original's, or whose English asset string assets.po translates otherwise."""
    from inferopt.i18n import prose

    text = _fold("\n".join(passage_lines()))
    table = table if table is not None else prose.catalog()
    shown = prose.english()
    out = []
    for q in quote_list if quote_list is not None else quotes():
        missing = [run for run in re.split(r"\s+|(?=（)", q["zh"]) if run and _fold(run) not in text]
        if missing:
            out.append(f"{q['section']} {q['zh']!r}: not the original's words ({', '.join(missing)})")
        if q["en"] not in shown:
            out.append(f"{q['section']} {q['en']!r} is no learner-visible asset string (inferopt.i18n.prose.FIELDS)")
        elif table.get(q["en"]) != q["zh"]:
            out.append(f"{q['section']} {q['en']!r}: assets.po shows {table.get(q['en'])!r}, not the original's "
                       f"{q['zh']!r}")
    return out
