"""The Chinese edition's terminology standard (assets/glossary.yaml) holds in every catalog, both ways.

- one term per concept: an English concept is always rendered with its one Chinese term, and the words the
  course used before for it (``avoid``) appear in no translation;
- one concept per term: a term marked ``exclusive`` (the words that drifted between concepts: 练习 for lab and
  exercise, 内核 for three kernels, 笔记本 for laptop and notebook) appears only where its English names it;
- the glossary itself gives no form to two concepts, and closes the zh review's terminology table
  (shared/reviews/zh-review-2026-12-06.md §3);
- each check rejects a wrong translation, and a catalog entry that uses a retired word fails the catalog check.
"""
from __future__ import annotations

import shutil

import polib
import pytest

from inferopt import i18n
from inferopt.i18n import checks
from inferopt.i18n.__main__ import check_all


def test_every_catalog_holds_the_glossary_both_ways():
    problems = checks.catalog_problems()
    assert len(checks.catalogs()) >= 20          # 13 chapters, 5 labs, inferopt.po, assets.po
    assert not problems, "\n".join(problems)


def test_no_form_belongs_to_two_concepts():
    terms = checks.glossary()
    seen_en, seen_zh = {}, {}
    for t in terms:
        for e in t["en"]:
            assert e.lower() not in seen_en, f"{e!r} names two concepts: {seen_en[e.lower()]} and {t['en'][0]}"
            seen_en[e.lower()] = t["en"][0]
        for z in t["zh"]:
            assert z not in seen_zh, f"{z!r} is the term of two concepts: {seen_zh[z]} and {t['en'][0]}"
            seen_zh[z] = t["en"][0]
    for t in terms:
        for a in t.get("avoid", ()):
            assert a not in seen_zh, f"{a!r} is retired for {t['en'][0]} but is the term of {seen_zh.get(a)}"


# The review's terminology table (§3) and glossary findings: each retired variant -> the concept it drifted in.
REVIEW_VARIANTS = {
    "内核": "kernel", "笔记本": "notebook", "笔记": "notebook", "单元": "cell", "门限": "gate", "关卡": "gate",
    "张量核心": "Tensor Core", "顺序统计量": "order statistic", "秩次": "nearest-rank", "名次": "nearest-rank", "排名": "nearest-rank",
    "实时": "live engine", "空闲请求": "idle request", "空闲运行": "idle request", "组件": "widget",
    "受内存带宽限制": "memory bound", "受算力限制": "compute bound", "受计算限制": "compute bound",
    "帕累托": "Pareto", "每 token 延迟": "time per output token", "每个输出 token 的时间": "time per output token",
    "KV 缓存": "KV cache", "分页注意力": "PagedAttention", "预填充": "prefill", "解码": "decode",
    "分块预填充": "chunked prefill",
}
REVIEW_MISSING = ["kernel", "notebook", "cell", "lab", "exercise", "widget", "gate", "live engine", "idle request",
                  "Tensor Core", "tokenizer", "order statistic", "nearest-rank", "memory bound", "compute bound", "Pareto"]


def test_the_review_terminology_table_is_closed():
    by_en = {e: t for t in checks.glossary() for e in t["en"]}
    for concept in REVIEW_MISSING:
        assert concept in by_en, f"the glossary has no entry for {concept!r}"
    for word, concept in REVIEW_VARIANTS.items():
        t = by_en[concept]
        # the variant is retired for its concept, or is covered by another concept's term (组件 is a component)
        assert word in t.get("avoid", ()) or any(word in z for u in checks.glossary() for z in u["zh"]
                                                  if u is not t and u.get("exclusive")), (word, concept)
    # the original's own forms are the terms (the original chapter writes them in English)
    for concept, term in [("KV cache", "KV Cache"), ("PagedAttention", "PagedAttention"), ("prefill", "Prefill"),
                          ("decode", "Decode"), ("chunked prefill", "Chunked Prefill"), ("kernel", "kernel")]:
        assert by_en[concept]["zh"][0] == term


# ------------------------------------------------------------------ each direction rejects a wrong translation
@pytest.mark.parametrize("english, chinese, problem", [
    # en -> zh: the concept's term is missing (and the retired word is named)
    ("the KV cache fills up", "KV 缓存满了", "'KV cache' should appear as KV Cache"),
    # a quotation of the original is its own words; the same term outside the quotation is still read
    ("raise concurrency (“Continuous Batching + 提高并发上限”) with continuous batching",
     "提高并发（“Continuous Batching + 提高并发上限”）", "'continuous batching' should appear as 连续批处理"),
    ("the KV cache fills up", "KV 缓存满了", "'KV 缓存' is not the course's term; write KV Cache"),
    ("a long prefill stalls every decode step", "一个长的预填充会卡住每个解码步",
     "'prefill' should appear as Prefill"),
    ("the Marlin kernels", "Marlin 内核", "'内核' is not the course's term; write kernel"),
    ("on a 2-core laptop", "在 2 核笔记本上", "'laptop' should appear as 笔记本电脑"),
    ("a live vLLM engine", "一个实时 vLLM 引擎", "'实时' is not the course's term; write 真实运行"),
    ("every gate passes", "每道关卡都通过", "'关卡' is not the course's term; write 门禁"),
    ("idle requests", "空闲请求", "'空闲请求' is not the course's term; write 空载"),
    ("FP8 tensor cores", "FP8 张量核心", "'张量核心' is not the course's term; write Tensor Core"),
    # zh -> en: an exclusive term used for another concept
    ("[Lab 3](../labs/lab3-live-vllm.ipynb) is a good warm-up", "[练习 3](../labs/lab3-live-vllm.ipynb) 是很好的热身",
     "'练习' is the term for 'exercise', which the English does not say"),
    ("the checks are feedback in your own kernel", "检查只在你自己的 kernel 里给出反馈",
     "'kernel' is the term for 'kernel', which the English does not say"),
    ("a node drain (kernel upgrade)", "节点排空（Jupyter 内核升级）",
     "'Jupyter 内核' is the term for 'your own kernel', which the English does not say"),
    ("the next cell prints it", "下一个组件打印它", "'cell' should appear as 单元格"),
])
def test_the_glossary_check_rejects_a_wobbling_term(english, chinese, problem):
    assert any(problem in p for p in checks.glossary_problems(english, chinese)), \
        checks.glossary_problems(english, chinese)


@pytest.mark.parametrize("english, chinese", [
    ("the KV cache fills up", "KV Cache 满了"),
    ("a long prefill stalls every decode step", "一个长 Prefill 会卡住每个 Decode 步"),
    ("the Marlin kernels", "Marlin kernel"),
    ("if the kernel restarts, the server stops", "Jupyter 内核重启时服务器也会停止"),
    ("a node drain (kernel upgrade)", "节点排空（系统内核升级）"),
    ("on a 2-core laptop the notebook takes a minute", "在 2 核笔记本电脑上整个 notebook 约需一分钟"),
    ("[Lab 3](../labs/lab3-live-vllm.ipynb) is a good warm-up; exercise 1 predicts",
     "[实验 3](../labs/lab3-live-vllm.ipynb) 是很好的热身；练习 1 先预测"),
    # a longer term covers the shorter one inside it: speculative decoding is not Decode, 投机解码 not 解码
    ("speculative decoding gains less at high concurrency", "高并发下投机解码的收益变小"),
    ("promtool's unit tests", "promtool 的单元测试"),
])
def test_the_glossary_check_accepts_the_standard_terms(english, chinese):
    assert checks.glossary_problems(english, chinese) == []


def test_a_catalog_entry_with_a_wobbling_word_fails_the_catalog_check(tmp_path, monkeypatch):
    """A copy of the catalogs in which one chapter entry says 内核 for a GPU kernel and one runtime string
    says 张量核心 for Tensor Core: the catalog check (and `python -m inferopt.i18n check`) names both."""
    shutil.copytree(i18n.LOCALE, tmp_path / "locale")
    monkeypatch.setattr(i18n, "LOCALE", tmp_path / "locale")
    assert checks.catalog_problems() == []
    chapter = i18n.po_path("chapters/03-combination-pitfalls")
    po = polib.pofile(str(chapter), wrapwidth=0)
    entry = next(e for e in po if "Marlin kernel" in e.msgstr)
    entry.msgstr = entry.msgstr.replace("Marlin kernel", "Marlin 内核", 1)
    po.save(str(chapter))
    runtime = i18n.po_path(i18n.RUNTIME_DOMAIN)
    po = polib.pofile(str(runtime), wrapwidth=0)
    entry = next(e for e in po if "Tensor Core" in e.msgstr)
    entry.msgstr = entry.msgstr.replace("Tensor Core", "张量核心", 1)
    po.save(str(runtime))
    problems = checks.catalog_problems()
    assert {p.split(":")[0] for p in problems} == {
        "locale/zh_CN/LC_MESSAGES/chapters/03-combination-pitfalls.po", "locale/zh_CN/LC_MESSAGES/inferopt.po"}
    assert any("03-combination" in p and "'内核' is not the course's term; write kernel" in p for p in problems)
    assert any("inferopt.po" in p and "'张量核心' is not the course's term; write Tensor Core" in p for p in problems)
    everything = check_all()
    assert any("inferopt.po" in p and "'张量核心'" in p for p in everything), everything[-5:]


def test_a_quotation_of_the_original_is_not_read_for_terms():
    """The original's own words inside “…” keep its terms (Continuous Batching, 切块): not the glossary's business."""
    from inferopt.i18n.checks import glossary_problems

    en = "raise concurrency to lower TPOT (“Continuous Batching + 提高并发上限”)."
    assert glossary_problems(en, "提高并发来降低 TPOT（“Continuous Batching + 提高并发上限”）。") == []
    assert glossary_problems(en.replace("“", "").replace("”", ""), "提高并发来降低 TPOT（Continuous Batching + 提高并发上限）。")
