"""The original's own words come back as the original wrote them (the zh review of 2026-12-06, §6).

- assets/original/ch08.zh.txt is a verbatim copy of the seed's passages (checked against the seed where the seed
  is beside the checkout, ../shared/seed);
- every quote of assets/original_zh.yaml is the original's words and is what assets.po shows for its English;
- chapter 8's learning-path cells print the original's Chinese in the zh edition and their stored English in
  the English edition; the trade-off figure shows the original's §7.1 words;
- each check rejects a wrong input.
"""
from __future__ import annotations

import contextlib
import io
import json

import pytest

from inferopt.i18n import original, prose
from inferopt.paths import REPO_ROOT

CH08 = REPO_ROOT / "chapters" / "08-learning-path-and-self-check.ipynb"


def test_the_copied_passages_are_the_seed_text():
    lines = [ln for ln in original.passage_lines() if ln.strip()]
    assert len(lines) > 40 and "8.4 心态" in lines
    seed = original.seed_file()
    text = seed.read_text(encoding="utf-8") if seed else original.PASSAGES.read_text(encoding="utf-8")
    assert original.seed_problems(text) == []
    # a line that is not the original's is named
    assert original.seed_problems(text.replace("思想不变(冗余切分 + 通信换显存)", "思想不变")) == [
        "ch08.zh.txt: line not in the original: '  • 工具会变(从 DeepSpeed → FSDP → 下一代),思想不变(冗余切分 + 通信换显存)'"]


def test_every_quote_is_the_originals_words_and_the_zh_edition_shows_it():
    assert len(original.quotes()) >= 40
    assert original.quote_problems() == []


def test_the_quote_check_rejects_invented_words_another_translation_and_an_unshown_string():
    q = {"section": "§8.4", "en": "the idea: shard redundancy, trade communication for memory",
         "zh": "思想不变（冗余切分 + 通信换显存）"}
    assert original.quote_problems([q]) == []
    bad = dict(q, zh="思想永远不变（冗余切分 + 通信换显存）")
    assert original.quote_problems([bad]) == [
        "§8.4 '思想永远不变（冗余切分 + 通信换显存）': not the original's words (思想永远不变)",
        "§8.4 'the idea: shard redundancy, trade communication for memory': assets.po shows "
        "'思想不变（冗余切分 + 通信换显存）', not the original's '思想永远不变（冗余切分 + 通信换显存）'"]
    table = dict(prose.catalog(), **{q["en"]: "理念：消除冗余，用通信换显存"})     # the course's own retelling
    assert original.quote_problems([q], table) == [
        "§8.4 'the idea: shard redundancy, trade communication for memory': assets.po shows "
        "'理念：消除冗余，用通信换显存', not the original's '思想不变（冗余切分 + 通信换显存）'"]
    assert "is no learner-visible asset string" in original.quote_problems([dict(q, en="not shown anywhere")])[0]


def _learning_path_output(monkeypatch, edition: str) -> tuple[str, str]:
    """The stdout of chapter 8's four learning-path cells run in ``edition``, and their stored output."""
    cells = [c for c in json.loads(CH08.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"][:4]
    monkeypatch.setenv("INFEROPT_EDITION", edition)
    out, scope = io.StringIO(), {}
    with contextlib.redirect_stdout(out):
        for c in cells:
            exec("".join(c["source"]), scope)      # the notebook's own code, as a learner's kernel runs it
    stored = "".join("".join(o.get("text", "")) for c in cells for o in c.get("outputs", []))
    return out.getvalue(), stored


@pytest.mark.parametrize("edition", ["en", "zh"])
def test_chapter_8_prints_the_originals_learning_path_in_the_zh_edition(monkeypatch, edition):
    shown, stored = _learning_path_output(monkeypatch, edition)
    if edition == "en":
        assert shown == stored                    # the English edition is unchanged
        return
    for line in ("- 微信公众号 / 知乎: 猛猿、方佳瑞、DefTruth、OneFlow", "- FlashAttention / FlashInfer: Kernel 优化",
                 "工具会变（从 DeepSpeed → FSDP → 下一代）\n  思想不变（冗余切分 + 通信换显存）",
                 "3. 写一个简单的 CUDA / Triton kernel，与 PyTorch 对比性能"):
        assert line in shown
    for english in ("Chinese tech media", "shard redundancy", "changes:", "stays:", "Serve a 7B model"):
        assert english not in shown


def test_the_tradeoff_figure_shows_the_originals_words(monkeypatch):
    from inferopt.widgets.tradeoff_plot import tradeoff_figure

    monkeypatch.setenv("INFEROPT_EDITION", "zh")
    fig = tradeoff_figure()
    texts = json.dumps(fig.to_plotly_json(), ensure_ascii=False)
    for words in ("Activation Checkpointing", "装下大层", "跨机扩展", "Prefill 开销"):
        assert words in texts, words
