"""Attributions checked: every sentence that says what the original chapter says quotes it, and each quote is the
original's text (issue 48, "attributions checked").

- An attribution sentence is found by its verb: in English "the original (chapter) says / writes / recommends /
  states / lists / rolls out ..." (also "the original chapter's §6.3 states", "§3.3 of the original says"); in the
  zh edition "原文说 / 原章节写道 / 原章节建议 / 原章节列出 ...". Scanned: the markdown of every chapter and solution
  (English, code cells left out) and every msgstr of their .po catalogs (the zh edition).
- Such a sentence (with the next one where it ends in a colon) must hold a quotation ("...", “...”, 「...」), and
  every quotation in it must occur in the original, whitespace and full-width punctuation folded (the original
  mixes ``,`` and ``，``). The original is Chinese, so a quote is the original's Chinese; an English gloss goes
  beside it, outside the quotation marks.
- The original's text: ``assets/original/ch08.zh.txt`` (the passages the zh edition quotes) and
  ``assets/original/attributed.zh.txt`` (the lines the chapters' attributions quote), each line a verbatim line of the
  seed, which this test checks wherever the seed is beside the checkout (../shared/seed).
"""
from __future__ import annotations

import re

import polib
import pytest

from inferopt.i18n import original
from inferopt.paths import REPO_ROOT

ATTRIBUTED = REPO_ROOT / "assets" / "original" / "attributed.zh.txt"
LOCALE = REPO_ROOT / "locale" / "zh_CN" / "LC_MESSAGES"

EN_VERBS = ("says|said|writes|wrote|recommends|recommended|states|stated|claims|calls|lists|listed|puts|gives|warns|"
            "cites|credits|suggests|argues|reads|asks|promises|rolls out|advises|answers|attributes|quotes|names|"
            "describes|estimates|concludes|sizes")
EN = re.compile(r"\b(?:the original(?: chapter)?(?:'s)?(?: §[\d.]+)?|§[\d.]+ of the original(?: chapter)?)\s*"
                rf"(?:itself\s+|also\s+|only\s+)?(?:{EN_VERBS})\b", re.I)
ZH = re.compile(r"原(?:文|章节|章)(?:的)?(?:\s*§[\d.]+\s*)?(?:中|里)?(?:也|只)?"
                r"(?:说|写道|写|建议|称|认为|列出|推荐|警告|主张|估计|描述|断言|给出的数字)")
QUOTE = re.compile(r"[\"“「]([^\"“”「」\n]{1,300})[\"”」]")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)

def _fold(text: str) -> str:
    return original._fold(text)


def original_lines() -> list[str]:
    lines = original.passage_lines() + ATTRIBUTED.read_text(encoding="utf-8").splitlines()
    return [ln for ln in lines if ln.strip()]


ORIGINAL = _fold("\n".join(original_lines()))


def _sentences(block: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z*\[(“\"「`])|(?<=[。！？])", block) if s.strip()]


def attribution_problems(text: str, where: str, pattern: re.Pattern, original_text: str = ORIGINAL) -> list[tuple]:
    """(where, sentence, why) for each attribution sentence of ``text`` without a quote, or with one that is not
    the original's text."""
    out = []
    for block in re.split(r"\n\s*\n", FENCE.sub("", text)):
        sents = _sentences(block)
        for i, s in enumerate(sents):
            if not pattern.search(s):
                continue
            window = s + (" " + sents[i + 1] if s.rstrip("*").rstrip().endswith((":", "：")) and i + 1 < len(sents)
                          else "")
            quotes = QUOTE.findall(window)
            bad = [q for q in quotes if _fold(q) not in original_text]
            flat = " ".join(s.split())
            if not quotes:
                out.append((where, flat, "says what the original says without quoting it"))
            elif bad:
                out.append((where, flat, f"quotes {bad!r}, which the original does not say"))
    return out


def course_problems() -> list[tuple]:
    out = []
    for md in sorted([*(REPO_ROOT / "chapters").glob("*.md"), *(REPO_ROOT / "solutions").glob("*.md")]):
        out += attribution_problems(md.read_text(encoding="utf-8"), md.name, EN)
    for po_path in sorted(LOCALE.glob("*/*.po")):
        for e in polib.pofile(str(po_path)):
            if not e.obsolete and e.msgstr:
                out += attribution_problems(e.msgstr, po_path.name, ZH)
    return out


def test_the_attributed_lines_are_the_seeds():
    lines = ATTRIBUTED.read_text(encoding="utf-8").splitlines()
    assert len(lines) >= 10 and all(ln.strip() for ln in lines)
    seed = original.seed_file()
    if seed is not None:   # beside the checkout (../shared/seed): each copied line is a line of the original
        seed_lines = set(seed.read_text(encoding="utf-8").splitlines())
        assert [ln for ln in lines if ln not in seed_lines] == []
        assert "灰度 5% → 50% 的流量" not in seed_lines     # (the check above compares whole lines)


def test_every_attribution_quotes_the_original():
    problems = course_problems()
    assert problems == [], "\n".join(f"{w}: {s[:160]}: {why}" for w, s, why in problems)


def test_the_scan_finds_the_attributions_it_must_check():
    # chapter 06's own attributions are found and pass (each quotes the original's line)
    text = (REPO_ROOT / "chapters" / "06-monitoring-and-capacity.md").read_text(encoding="utf-8")
    found = [s for b in re.split(r"\n\s*\n", FENCE.sub("", text)) for s in _sentences(b) if EN.search(s)]
    assert len(found) >= 2 and attribution_problems(text, "06", EN) == []
    assert any("灰度 5% → 50% → 100%" in s for s in found)


@pytest.mark.parametrize("text, pattern, why", [
    ("The original chapter rolls out “灰度 5% → 50% → 100% 全量”.", EN, "does not say"),     # a made-up quote
    ("The original chapter says one instance serves “50 QPS within the SLO”.", EN, "does not say"),   # English
    ("The original says that chunked prefill lowers TTFT.", EN, "without quoting"),           # no quote at all
    ("§3.3 of the original says INT4 is slow.", EN, "without quoting"),
    ("原文说：“必须用 Triton 才有真正加速”。", ZH, "does not say"),
    ("原章节建议在大 batch 时关闭 Marlin。", ZH, "without quoting"),
])
def test_the_check_rejects_a_made_up_or_missing_quote(text, pattern, why):
    problems = attribution_problems(text, "made up", pattern)
    assert len(problems) == 1 and why in problems[0][2]


@pytest.mark.parametrize("text, pattern", [
    ("The original chapter rolls out “灰度 5% → 50% → 100%” (5% → 50% → 100% of the traffic).", EN),
    ("**The original says:** “必须用 Marlin 才有真正加速” (only Marlin gives a real speed-up).", EN),
    ("原文说：“必须用 Marlin 才有真正加速”。", ZH),
    ("The tree of chapter 2 says nothing about it.", EN),                # no attribution, nothing to check
])
def test_a_sentence_that_quotes_the_original_passes(text, pattern):
    assert attribution_problems(text, "made up", pattern) == []
