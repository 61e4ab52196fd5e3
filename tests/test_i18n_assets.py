"""The Chinese edition's asset prose: every learner-visible string of assets/ (inferopt.i18n.prose.FIELDS) has a
current Chinese translation in locale/zh_CN/LC_MESSAGES/assets.po, and what the widgets and figures show in the
zh edition holds no English asset prose (ids, flags and numbers stay as they are; the English edition is unchanged)."""
from __future__ import annotations

import html
import re

import pytest

from inferopt import assets
from inferopt.diagnosis.decision import diagnose
from inferopt.i18n import __main__ as cli
from inferopt.i18n import checks, prose

# diagnoses that walk every branch of the tree, with conflicts, skipped and already-on techniques
CASES = [
    dict(metrics={"oom": True, "ttft_p95_ms": 0, "tpot_p95_ms": 0}, slos={"ttft_p95_ms": 500},
         workload={"concurrency": 64, "prompt_tokens": 3000, "output_tokens": 500, "num_gpus": 1,
                   "model_weights_gib": 140, "gpu_type": "H100"}, techniques_on=["paged_attention"]),
    dict(metrics={"ttft_p95_ms": 1800, "tpot_p95_ms": 30, "gpu_util": 0.3}, slos={"ttft_p95_ms": 500},
         workload={"prompt_tokens": 3000, "shared_prefix_frac": 0.7, "concurrency": 32}),
    dict(metrics={"ttft_p95_ms": 200, "tpot_p95_ms": 80, "gpu_util": 0.3}, slos={"ttft_p95_ms": 500, "tpot_p95_ms": 50},
         workload={"concurrency": 4, "prompt_tokens": 5000}, techniques_on=["speculative_decoding", "int4_awq_marlin"]),
    dict(metrics={"ttft_p95_ms": 200, "tpot_p95_ms": 30, "tpot_p99_ms": 300, "queue_len": 5, "preemptions": 2},
         slos={"ttft_p95_ms": 500, "tpot_p95_ms": 50, "tpot_p99_ms": 100},
         workload={"prompt_tokens": 3000, "concurrency": 16}, techniques_on=["chunked_prefill"]),
    dict(metrics={"ttft_p95_ms": 200, "tpot_p95_ms": 80}, slos={"ttft_p95_ms": 500, "tpot_p95_ms": 50},   # 2 conflicts
         workload={"concurrency": 32, "prompt_tokens": 5000, "lora_adapters": 4, "shared_prefix_frac": 0.5},
         techniques_on=["speculative_decoding", "prefix_cache"]),
]


@pytest.fixture(autouse=True)
def _fresh_phrases():
    """The phrase table is cached per language: drop what a test built from a patched catalog
    (autouse fixtures are torn down last, after monkeypatch has put the real catalog back)."""
    yield
    prose._phrases.cache_clear()


@pytest.fixture
def zh(monkeypatch):
    monkeypatch.setenv("INFEROPT_EDITION", "zh")


def _drop(monkeypatch, english: str) -> None:
    """The catalog without the translation of ``english`` (as if its entry were missing)."""
    table = dict(prose.catalog())
    assert english in table
    del table[english]
    monkeypatch.setattr(prose, "catalog", lambda language="zh_CN": table)
    prose._phrases.cache_clear()


def _plain(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", markup))


def _figure_texts(fig) -> list[str]:
    out = [fig.layout.title.text or ""]
    for trace in fig.data:
        for field in ("text", "hovertext", "x", "y", "labels"):
            v = getattr(trace, field, None)
            if v is None or isinstance(v, str):
                out.append(v or "")
            else:
                out += [" ".join(map(str, x)) if isinstance(x, (list, tuple)) else str(x) for x in v]
    return out


def english_left(texts) -> list[str]:
    """The English asset strings (with a translation that differs from them) that occur in ``texts`` outside
    the translations themselves (a name such as PagedAttention stays as it is), also cut short (a figure's label
    ends with an ellipsis): the first 24 characters of each."""
    table = prose.catalog()
    shown = "\n".join(texts)
    for zh in sorted(set(table.values()), key=len, reverse=True):   # a translation may keep an English name
        shown = shown.replace(zh, "\0")
    return sorted(en for en in prose.english() if table.get(en, "") != en and len(en) >= 8
                  and (en in shown or (len(en) > 24 and en[:24] in shown)))


def decision_texts() -> list[str]:
    from inferopt.widgets.decision_widget import DecisionWidget, diagnosis_html, tree_figure

    w = DecisionWidget()
    texts = [_plain(w.result_w.value), *_figure_texts(w.plot_w)]
    for case in CASES:
        d = diagnose(**case)
        texts += [_plain(diagnosis_html(d)), *_figure_texts(tree_figure(d))]
    return texts


def test_every_learner_visible_asset_string_has_current_chinese():
    assert checks.asset_prose_problems() == []
    assert cli.main(["assets-check"]) == 0


def test_every_field_path_names_text():
    """A misspelt path in FIELDS would silently leave a field in English: each one finds strings."""
    for name, paths in prose.FIELDS.items():
        data = assets.load(name)
        for p in paths:
            assert list(prose._walk(data, p.split("."), "")), f"{name}: {p} finds no text"


def test_check_fails_on_a_missing_or_unfaithful_entry(monkeypatch, capsys):
    en = "The model weights alone do not fit"
    _drop(monkeypatch, en)
    assert any(repr(en) in line for line in checks.asset_prose_problems())
    assert cli.main(["assets-check"]) == 1
    assert "no Chinese for 'The model weights alone do not fit'" in capsys.readouterr().out
    assert any("no Chinese for 'The model weights alone do not fit'" in p for p in cli.check_all())   # `check` too
    # a translation that loses a flag, a number, or a glossary term is reported too
    table = dict(prose.catalog())
    flag = "mean prompt tokens (--prompt-tokens)"
    table[flag] = "平均提示词 token 数"
    num = "PD disaggregation pays off on large clusters (8+ GPUs); use chunked prefill first"
    table[num] = "PD 解耦在大集群上才划算；先用 Chunked Prefill"
    term = "Serial decoding is the limit (small batches: each step produces one token)"
    table[term] = "受限于串行（小批量：每步只产出一个 token）"
    monkeypatch.setattr(prose, "catalog", lambda language="zh_CN": table)
    problems = "\n".join(checks.asset_prose_problems())
    assert "flags missing: --prompt-tokens" in problems
    assert "numbers missing: 8" in problems
    assert "glossary: 'decoding' should appear as Decode" in problems


def test_zh_decision_widget_shows_no_english_asset_prose(zh):
    texts = decision_texts()
    assert english_left(texts) == []
    shown = "\n".join(texts)
    assert "光是模型权重就放不下" in shown and "[A] TTFT 过高" in shown
    # ids and flags are never translated
    for kept in ("tensor_parallel", "int4_awq_marlin", "--enable-prefix-caching", "C2", "baseline → A"):
        assert kept in shown


def test_zh_widget_check_fails_on_a_missing_entry(zh, monkeypatch):
    en = "Prompts are long (thousands to tens of thousands of tokens): the prefill itself is slow"
    _drop(monkeypatch, en)
    assert english_left(decision_texts()) == [en]


def test_zh_widget_check_fails_on_a_display_point_that_forgets_to_translate(zh, monkeypatch):
    import inferopt.widgets.decision_widget as dw

    assert [c["id"] for c in diagnose(**CASES[-1]).conflicts] == ["spec_continuous_batching", "multi_lora_prefix_cache"]
    monkeypatch.setattr(dw, "prose", lambda text, language=None: text)
    left = english_left(decision_texts())
    assert "The model weights alone do not fit" in left and "Multi-LoRA + prefix cache" in left


def test_english_edition_unchanged(monkeypatch):
    monkeypatch.setenv("INFEROPT_EDITION", "en")
    from inferopt.widgets.decision_widget import diagnosis_html, tree_figure

    tree = assets.load("decision_tree.yaml")
    hover = _figure_texts(tree_figure())
    for b in tree["branches"]:
        assert b["title"] in hover
        for c in b["conditions"]:
            assert f"{c['id']}: {c['title']}" in hover
    d = diagnose(**CASES[0])
    assert _plain(diagnosis_html(d)).count("The model weights alone do not fit") >= 1
    assert prose.prose("The model weights alone do not fit") == "The model weights alone do not fit"


def test_composed_messages_translate_their_asset_phrases(zh):
    title = "The model weights alone do not fit"
    zh_title = prose.catalog()[title]
    assert prose.prose(f"C2: {title} (weights_fit = false, == false)") == f"C2: {zh_title} (weights_fit = false, == false)"
    # a title lower-cased inside a sentence is found too, a phrase inside another word never
    assert zh_title in prose.prose(f"already on; {title.lower()} persists")
    assert prose.prose("PagedAttention (--block-size 16)").startswith(prose.catalog()["PagedAttention"])
    assert prose.prose("MyPagedAttention") == "MyPagedAttention"
    assert prose.prose("tensor_parallel") == "tensor_parallel"


def test_zh_technique_table_and_tradeoff_figures_show_no_english_asset_prose(zh):
    from inferopt.widgets.technique_table import TechniqueTable, technique_rows
    from inferopt.widgets.tradeoff_plot import technique_cost_figure, tradeoff_figure

    table = TechniqueTable()
    texts = [_plain(table.table_w.value), *[label for label, _ in table.symptom_w.options],
             *_figure_texts(tradeoff_figure()), *_figure_texts(technique_cost_figure())]
    assert english_left(texts) == []
    assert "PagedAttention" in texts[0] and "分页注意力" not in texts[0] and "--enable-prefix-caching" in texts[0]
    # the rows themselves (what the engines and tests read) stay English
    assert any(r["solves"] == "KV cache fragmentation, so few requests fit at once" for r in technique_rows())


def test_zh_diagnose_cli_prints_the_tree_in_chinese():
    import os
    import subprocess
    import sys

    argv = [sys.executable, "-m", "inferopt", "diagnose", "--ttft-p95-ms", "1800", "--tpot-p95-ms", "30",
            "--slo-ttft-p95-ms", "500", "--prompt-tokens", "3000", "--concurrency", "16"]
    out = {ed: subprocess.run(argv, capture_output=True, text=True, check=True,
                              env={**os.environ, "INFEROPT_EDITION": ed}).stdout for ed in ("en", "zh")}
    assert english_left([out["zh"]]) == []
    assert "[A] TTFT 过高（用户等第一个 token 等得太久）" in out["zh"] and "baseline -> A -> A1" in out["zh"]
    assert "[A] TTFT too high (users wait too long for the first token)" in out["en"]
    assert "提示词" not in out["en"] and out["en"].count("\n") == out["zh"].count("\n")


def test_zh_memory_widget_and_figure_speak_chinese(zh):
    from inferopt.widgets.memory_widget import MemoryWidget, memory_figure

    w = MemoryWidget()
    shown = "\n".join(_plain(c.value) for c in w.children if isinstance(getattr(c, "value", None), str))
    assert "每块 GPU 的运行时显存" in shown and "vLLM 能启动" in shown
    for english in ("Runtime memory per GPU", "vLLM starts", "activation peak (forward)", "same plan"):
        assert english not in shown
    fig = memory_figure(w.result)
    assert "显存利用率" in fig.layout.title.text and fig.layout.yaxis.title.text == "每块 GPU 的 GiB"
    assert [t.name for t in fig.data] == ["权重", "KV Cache", "运行时缓冲", "空闲"]


def _widget_texts(widget) -> list[str]:
    """Every text a learner reads in an ipywidgets tree: HTML values, descriptions, option labels."""
    out, todo = [], [widget]
    while todo:
        w = todo.pop()
        todo += list(getattr(w, "children", ()))
        if isinstance(getattr(w, "value", None), str) and type(w).__name__ == "HTML":
            out.append(_plain(w.value))
        out.append(getattr(w, "description", "") or "")
        out += [o[0] if isinstance(o, tuple) else str(o) for o in getattr(w, "_options_labels", ()) or ()]
    return out


def test_zh_self_check_shows_no_english_asset_prose(zh):
    from inferopt.widgets.selfcheck import SelfCheck

    quiz = SelfCheck()
    quiz.fill("order", ["tpot_high", "oom", "ttft_high", "tail_latency"])   # wrong: feedback quotes the order's reasons
    quiz.fill("plan", ["speculative_decoding"])
    quiz.check_all()
    texts = _widget_texts(quiz)
    assert english_left(texts) == []
    shown = "\n".join(texts)
    assert "勾选所有属于已知陷阱的组合（§3）。" in shown and "投机解码 + 量化过的草稿模型" in shown
    assert "放不下之前服务根本起不来" in shown          # the order's reason, in the wrong order's feedback
    # the answers stay keyed by the English labels the grader reads
    assert "speculative decoding + a quantized draft model" in quiz.controls["conflicts"]


def test_zh_knowledge_map_figure_and_the_data_the_chapters_read(zh):
    from inferopt.widgets.knowledge_map import knowledge_map_figure
    from inferopt.widgets.tradeoff_plot import tradeoff_matrix

    texts = _figure_texts(knowledge_map_figure())
    assert english_left(texts) == []
    assert "模块 4：推理优化" in texts and "tensor_parallel" in "\n".join(texts)
    # the pure data the chapter's cells compute on stays English in every edition (07 asserts on it)
    assert tradeoff_matrix()[1][2].startswith("memory")


def test_knowledge_map_figure_in_english_is_the_yaml():
    from inferopt.widgets.knowledge_map import knowledge_map_figure

    kmap = assets.load("knowledge_map.yaml")
    labels = list(knowledge_map_figure().data[0].labels)
    assert labels[0] == kmap["root"] and kmap["modules"][3]["name"] in labels


def test_a_six_month_plan_written_in_chinese_is_counted_in_words():
    """Chinese puts no spaces between words: a concrete Chinese line is not graded "too short"."""
    from inferopt.widgets.selfcheck import _words, grade

    plan = "\n".join(f"第{m}个月复现一篇推理优化论文并写总结" for m in "一二三四五六")
    assert all(len(line.split()) == 1 for line in plan.splitlines())        # what split() alone saw
    assert grade("learning_plan", plan).correct
    assert not grade("learning_plan", "\n".join(["读论文"] * 6)).correct     # still too short: 1 word
    assert _words("month 1: read the vLLM scheduler") == 6                 # English: space-separated, as before
