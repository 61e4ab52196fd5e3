"""One statement per fact: where two places state the same rule, one is the source and the other must agree.

Each link names the source and the place that repeats it; the test fails when the repetition drifts.

- The decision tree (assets/decision_tree.yaml) is the source of which technique treats which symptom.
  The optimization order (assets/optimization_order.yaml, printed by chapters 04 and 08) lists the
  "typical fixes" of each step: they must be recommendations of that step's branch in the tree.
- Chapter 02's erratum A1 (chunked prefill is no TTFT fix; the tree follows it) is repeated by the
  technique table (assets/techniques.yaml symptoms), the tree's branch A and the optimization order's
  TTFT step: none may list chunked prefill under TTFT.
- Chapter 02's erratum B3 (more concurrency buys throughput, not a lower TPOT): continuous batching is
  not listed as a TPOT fix in the technique table.
- The optimization order's step 4 says disaggregation and SLO-aware scheduling "need the largest
  investment"; assets/cost_ranking.yaml, which ranks the engine's recommendations, may not call them free.
- Chapter 03's pitfall 3.2 rests on chapter 01's per-kernel roofline: the ridge batch it quotes is
  checked against chapter 01's stored output by tests/test_prose_numbers.py (a number naming
  "chapter 1" must be one of chapter 01's printed figures); here: chapter 03 names chapter 1's roofline.
"""
from __future__ import annotations

import json

import pytest

from inferopt import assets
from inferopt.paths import CHAPTERS


def _branch_fixes(branch: dict) -> set:
    found = set()

    def walk(x):
        if isinstance(x, dict):
            for key in ("techniques", "actions"):
                for item in x.get(key, []) or []:
                    found.add(item if isinstance(item, str) else item["id"])
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    walk(branch)
    return found


def order_drift(order: dict, tree: dict) -> list[str]:
    branches = {b["id"]: b for b in tree["branches"]}
    bad = []
    for s in order["steps"]:
        fixes = set(s["techniques"]) | set(s.get("actions", []))
        extra = fixes - _branch_fixes(branches[s["branch"]])
        if extra:
            bad.append(f"optimization_order step {s['step']} ({s['branch']}) lists {sorted(extra)}, "
                       f"which branch {s['branch']} of the decision tree does not recommend")
    return bad


def test_the_optimization_order_lists_only_what_the_tree_recommends():
    assert order_drift(assets.load("optimization_order.yaml"), assets.load("decision_tree.yaml")) == []


def test_a_drifted_order_is_caught():
    order = json.loads(json.dumps(assets.load("optimization_order.yaml")))
    step_a = next(s for s in order["steps"] if s["branch"] == "A")
    step_a["techniques"].append("chunked_prefill")            # the contradiction issue 29 found
    bad = order_drift(order, assets.load("decision_tree.yaml"))
    assert len(bad) == 1 and "chunked_prefill" in bad[0]


def test_chunked_prefill_is_no_ttft_fix_anywhere():
    techniques = {t["id"]: t for t in assets.load("techniques.yaml")["techniques"]}
    assert "ttft_high" not in techniques["chunked_prefill"]["symptoms"]
    tree = {b["id"]: b for b in assets.load("decision_tree.yaml")["branches"]}
    assert "chunked_prefill" not in _branch_fixes(tree["A"]) and "chunked_prefill" in _branch_fixes(tree["D"])
    ttft_step = next(s for s in assets.load("optimization_order.yaml")["steps"] if s["symptom"] == "ttft_high")
    assert "chunked_prefill" not in ttft_step["techniques"]


def test_continuous_batching_is_no_tpot_fix():
    techniques = {t["id"]: t for t in assets.load("techniques.yaml")["techniques"]}
    assert "tpot_high" not in techniques["continuous_batching"]["symptoms"]


# what step 4's reason names, and the ids cost_ranking.yaml ranks them under
STEP4_INVESTMENTS = {"Disaggregation": ("techniques", "pd_disaggregation"),
                     "SLO-aware scheduling": ("actions", "slo_aware_scheduler")}


@pytest.mark.parametrize("words", sorted(STEP4_INVESTMENTS))
def test_what_the_order_calls_the_largest_investment_is_not_free(words):
    step4 = next(s for s in assets.load("optimization_order.yaml")["steps"] if s["step"] == 4)
    assert words in step4["reason"] and "largest investment" in step4["reason"]
    section, item = STEP4_INVESTMENTS[words]
    assert assets.load("cost_ranking.yaml")[section][item] != "free"


def test_chapter_03s_pitfall_3_2_reads_chapter_01s_per_kernel_roofline():
    text = (CHAPTERS / "03-combination-pitfalls.md").read_text()
    section = text[text.index("## 3.2"):text.index("## 3.3")]
    assert "chapter 1's per-kernel roofline" in section and "compute bound, and verifying" not in section
    ch01 = (CHAPTERS / "01-technique-map.md").read_text()
    assert "roofline.step_roofline" in ch01 and "linear_ridge_batch" in ch01


# ----------------------------------------------------------------- issue 48: the kinds the review found
# Each test names its single source, reads every place that restates it, and shows a drifted text rejected.
import re  # noqa: E402

from inferopt.diagnosis import sizing  # noqa: E402

FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _prose(path) -> str:
    return FENCE.sub("", path.read_text(encoding="utf-8"))


def _sentences(text: str) -> list[str]:
    blocks = re.split(r"\n\s*\n|\n\s*(?=- |\d+\. )", text)           # paragraphs and list items
    return [" ".join(s.split()) for b in blocks for s in re.split(r"(?<=[.!?;])\s+(?=[A-Z*(\[`])", b) if s.strip()]


def _drifts(check) -> list[tuple[str, str]]:
    """(file, sentence) for each sentence of a chapter or solution that ``check`` rejects."""
    out = []
    for md in sorted([*CHAPTERS.glob("*.md"), *(CHAPTERS.parent / "solutions").glob("*.md")]):
        out += [(md.name, s) for s in _sentences(_prose(md)) if check(s)]
    return out


def _none(drifts: list, name: str) -> None:
    assert drifts == [], f"{name}:\n" + "\n".join(f"{f}: {s}" for f, s in drifts)


# --- a rule stated beside an output it does not produce: tensor-parallel sizing
def tp_by_the_words(weights_gib: float, gpu_gib: float, usable: float, gpus: int) -> int:
    """TP as sizing.TP_RULE says it: the smallest power of two whose GPUs hold the weights in at most
    WEIGHTS_SHARE of their usable memory (at least 2: the rule fires when one GPU does not hold them)."""
    tp = 2
    while tp < gpus and weights_gib / tp > sizing.WEIGHTS_SHARE * usable * gpu_gib:
        tp *= 2
    return min(tp, gpus)


def tp_rule_drift(sentence: str) -> bool:
    return "smallest power of two" in sentence and sizing.TP_RULE not in sentence


def test_the_tp_rule_in_words_is_what_the_engine_does():
    usable = assets.load("decision_tree.yaml")["thresholds"]["usable_memory_frac"]
    for weights in (20.0, 70.0, 130.4, 140.0, 260.0, 500.0):
        for gpu_gib, gpus in ((80, 8), (80, 4), (40, 8), (24, 8), (141, 8)):
            w = sizing.Workload(model_weights_gib=weights, num_gpus=gpus)
            facts = {"gpu_memory_gib": gpu_gib}
            assert sizing._tp_size(w, facts, {"usable_memory_frac": usable}) == \
                tp_by_the_words(weights, gpu_gib, usable, gpus), (weights, gpu_gib, gpus)
    # the words chapter 02 printed beside its case C ("that holds the weights") give 2 for 130.4 GiB on H100s,
    # the engine (and its output) 4: the old wording is rejected
    naive = next(tp for tp in (2, 4, 8) if 130.4 / tp <= 80)
    assert naive == 2 and tp_by_the_words(130.4, 80, usable, 8) == 4
    assert tp_rule_drift("Tensor parallelism comes first, sized to the smallest power of two that holds the weights.")


def test_every_statement_of_the_tp_rule_reads_the_engines_words():
    note = next(t for t in assets.load("techniques.yaml")["techniques"] if t["id"] == "tensor_parallel")["vllm"]["note"]
    assert sizing.TP_RULE in note
    _none(_drifts(tp_rule_drift), "a TP sizing rule in other words than sizing.TP_RULE")


# --- answers that describe 06b's canary gates: the source is the rule 06b runs (bench.breach)
def gate_drift(sentence: str) -> bool:
    names = re.search(r"\b(?:chapter )?06b's (?:canary|gates?)|\b6b's (?:canary|gates?)", sentence, re.I)
    return bool(names) and ("breach" not in sentence or "slowest request" in sentence)


def test_06b_runs_the_breach_rule():
    text = (CHAPTERS / "06b-scale-out.md").read_text(encoding="utf-8")
    assert 'rule="breach"' in text and "bench.breach.breach_verdict" in text


def test_answers_describe_06bs_gates_as_06b_runs_them():
    _none(_drifts(gate_drift), "a sentence describing 06b's gates otherwise than the breach rule")
    assert gate_drift("Below that, the course judges on the slowest request; chapter 06b's canary gates do exactly "
                      "that on the handful of requests each step serves.")
    assert not gate_drift("Chapter 06b's canary therefore asks the other question (`bench.breach`): do the step's "
                          "requests show a breach?")


# --- two KV capacities for one plan: within a chapter's prose, one number per request length
KV_HOLDS = re.compile(r"KV cache holds [\d,]+ requests of [\d,]+ tokens \(not ~?\d+\) and ([\d,]+) of the real ([\d,]+)-token"
                      r"|KV cache holds ([\d,]+) requests of ([\d,]+)[- ]tokens?", re.I)


def kv_capacity_drift(prose: str) -> dict:
    """{request length: {the capacities stated}} for lengths stated with more than one capacity (a sentence
    that names a layout, TP=..., or 'per instance' states another plan's and is left out)."""
    seen: dict = {}
    for s in _sentences(prose):
        if re.search(r"TP ?= ?\d|per instance|BF16", s):
            continue
        for m in KV_HOLDS.finditer(s):
            pairs = [(m.group(3), m.group(4))]
            if m.group(1):   # "holds 784 requests of 4,096 tokens (not ~200) and 3346 of the real 950-token requests"
                pairs = [re.search(r"holds ([\d,]+) requests of ([\d,]+)", m.group(0)).groups(), (m.group(1), m.group(2))]
            for n, length in pairs:
                seen.setdefault(length.replace(",", ""), set()).add(n.replace(",", ""))
    return {k: v for k, v in seen.items() if len(v) > 1}


def test_a_chapter_states_one_kv_capacity_per_plan():
    for md in sorted([*CHAPTERS.glob("*.md"), *(CHAPTERS.parent / "solutions").glob("*.md")]):
        assert kv_capacity_drift(_prose(md)) == {}, md.name
    ch05 = _prose(CHAPTERS / "05-end-to-end-deployment.md")
    assert KV_HOLDS.search(ch05), "chapter 05 states the plan's KV capacity"
    drifted = ch05.replace("the KV cache holds 3346 requests of 950 tokens",
                           "the KV cache holds 2980 requests of 950 tokens", 1)
    assert drifted != ch05 and kv_capacity_drift(drifted) == {"950": {"3346", "2980"}}
