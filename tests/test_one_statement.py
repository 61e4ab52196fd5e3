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
