"""Widgets and pictures over the decision engine: tree figure, technique table, trade-offs, self-check."""
import pytest

from inferopt.diagnosis import knowledge
from inferopt.diagnosis.decision import diagnose
from inferopt.errors import CourseError
from inferopt.widgets.decision_widget import DecisionWidget, diagnosis_html, tree_figure
from inferopt.widgets.selfcheck import SelfCheck, answer_key, grade, items
from inferopt.widgets.technique_table import TechniqueTable, technique_rows, technique_table_html
from inferopt.widgets.tradeoff_plot import technique_cost_figure, tradeoff_figure, tradeoff_matrix

SLO = {"ttft_p95_ms": 500, "tpot_p95_ms": 50}


def test_tree_figure_highlights_exactly_the_path():
    d = diagnose({"ttft_p95_ms": 300, "tpot_p95_ms": 90}, SLO, {"concurrency": 2}, [])
    fig = tree_figure(d)
    nodes = fig.data[2]
    hot = [t for t, c in zip(nodes.text, nodes.marker.color, strict=True) if c == "#d35400"]
    assert sorted(hot) == ["B", "B2", "baseline"]
    assert len(nodes.text) == 1 + 4 + 11  # baseline, 4 branches, 11 sub-conditions
    leaf_text = [t for t in fig.data[3].text if "<b>speculative_decoding</b>" in t]
    assert len(leaf_text) == 1
    assert "branch B" in fig.layout.title.text
    plain = tree_figure()
    assert all(c != "#d35400" for c in plain.data[2].marker.color)


def test_tree_figure_orders_branches_as_section_4():
    fig = tree_figure()
    nodes = fig.data[2]
    y = dict(zip(nodes.text, nodes.y, strict=True))
    assert y["C"] > y["A"] > y["B"] > y["D"]  # top to bottom: OOM, TTFT, TPOT, tail


def test_diagnosis_html_shows_reasons_conflicts_and_flag_diff():
    d = diagnose({"ttft_p95_ms": 900, "tpot_p95_ms": 30}, SLO, {"shared_prefix_frac": 0.7, "lora_adapters": 4}, [])
    h = diagnosis_html(d)
    assert "A2: Many requests share a prompt prefix" in h
    assert "Multi-LoRA + prefix cache" in h
    assert "- --no-enable-prefix-caching" in h and "+ --enable-prefix-caching" in h
    ok = diagnosis_html(diagnose({"ttft_p95_ms": 100, "tpot_p95_ms": 10}, SLO, None, []))
    assert "All SLOs are met" in ok


def test_decision_widget_follows_its_inputs_and_shows_errors_inside():
    w = DecisionWidget()
    assert w.diagnosis is not None and repr(w).startswith("DecisionWidget(branch=A")
    w.set_inputs(metrics={"ttft_p95_ms": 100, "tpot_p95_ms": 90, "gpu_util": 0.3}, workload={"concurrency": 2})
    assert w.diagnosis.branch == "B" and w.diagnosis.techniques == ["speculative_decoding"]
    # the tree picture inside the widget follows: B and B2 highlighted
    nodes = w.plot_w.data[2]
    hot = sorted(t for t, c in zip(nodes.text, nodes.marker.color, strict=True) if c == "#d35400")
    assert hot == ["B", "B2", "baseline"]
    assert "branch B" in w.plot_w.layout.title.text
    w.metric_w["gpu_util"].value = 85  # a percentage: the widget says so, no traceback
    assert w.diagnosis is None and "fraction" in w.error_w.value and "fraction" in repr(w)
    w.metric_w["gpu_util"].value = 0.3
    assert w.error_w.value == "" and w.diagnosis.branch == "B"
    w.set_inputs(metrics={"oom": True, "ttft_p95_ms": 0, "tpot_p95_ms": 0},
                 workload={"model_weights_gib": 130, "gpu_type": "H100", "num_gpus": 8})
    assert w.diagnosis.branch == "C" and w.diagnosis.path[-1] == "C2"
    assert "text/plain" in w._repr_mimebundle_()


def test_decision_widget_loads_a_benchmark_file(tmp_path):
    w = DecisionWidget()
    w.load_file(str(tmp_path / "missing.json"))
    assert "no such file" in w.error_w.value
    p = tmp_path / "runs.jsonl"
    p.write_text('{"type": "summary", "run": "x", "ttft_p95_ms": 120, "tpot_p95_ms": 95}\n')
    w.set_inputs(workload={"concurrency": 2})
    w.load_file(str(p))
    assert w.metric_w["tpot_p95_ms"].value == 95 and w.diagnosis.branch == "B"


def test_technique_table_filters():
    assert [r["id"] for r in technique_rows("ttft_high", "low")] == ["prefix_cache"]
    assert "chunked_prefill" in [r["id"] for r in technique_rows("tpot_high", "low")]   # erratum A1
    html = technique_table_html(technique_rows())
    assert html.count("<tr>") == 14 and "--no-enable-prefix-caching" in html
    t = TechniqueTable()
    t.symptom_w.value = "tail_latency"
    assert repr(t) == "TechniqueTable(symptom=tail_latency, cost=all, rows=['chunked_prefill', 'pd_disaggregation'])"
    t.cost_w.value = "low"
    assert [r["id"] for r in t.rows] == ["chunked_prefill"]


def test_tradeoff_pictures_come_from_the_data():
    names, labels, z, _ = tradeoff_matrix()
    assert len(names) == 8 and len(labels) == 6
    row = dict(zip(names, z, strict=True))["Quantization"]
    assert row[:4] == [1, 0, 1, -1]  # buys compute and memory, gives up accuracy
    fig = tradeoff_figure()
    assert list(fig.data[0].y) == names
    cost = technique_cost_figure()
    assert len(cost.data[0].y) == 13


def test_selfcheck_key_passes_and_blank_fails_for_every_item():
    plan = "\n".join(f"month {i}: serve a 7B model with vLLM and measure it" for i in range(1, 7))
    for it in items():
        key = answer_key(it["id"]) if it["kind"] != "plan_text" else plan
        assert grade(it["id"], key).correct, it["id"]
        assert not grade(it["id"], None).correct, it["id"]


def test_selfcheck_explains_mistakes():
    g = grade("order", ["ttft_high", "oom", "tpot_high", "tail_latency"])
    assert not g.correct and g.score == "2/4 in place" and any("service does not even start" in f for f in g.feedback)
    g = grade("plan", answer_key("plan") + ["speculative_decoding"])
    assert not g.correct and "should stay off: speculative_decoding" in g.feedback
    key = answer_key("tradeoffs")
    two_wrong = dict(key, zero="accuracy", quantization="communication")
    assert grade("tradeoffs", two_wrong).correct  # 6 of 8 is enough
    assert not grade("tradeoffs", dict(two_wrong, flash_attention="accuracy")).correct
    with pytest.raises(CourseError, match="unknown option"):
        grade("conflicts", ["quantum tunnelling + FP8"])
    with pytest.raises(CourseError, match="does not exist"):
        grade("item8", None)


def test_selfcheck_widget_grades_and_shows_errors():
    s = SelfCheck()
    s.fill("order", ["oom", "ttft_high", "tpot_high", "tail_latency"])
    assert s.check("order").correct
    s.fill("symptoms", {"q_ttft": "speculative_decoding"})
    g = s.check("symptoms")
    assert not g.correct and "Not yet" in s.feedback["symptoms"].value
    assert repr(s) == "SelfCheck(items=7, checked=2, passed=['order'])"
    assert len(knowledge.load("learning_path")["self_check"]) == len(s.children) == 7
