"""Chapter 05's capacity check sizes its verdict to its evidence: Little's law first, then the model's range over
every stated-not-fitted factor (inferopt/performance/capacity_check.py), never one point, and never a latency
for a queue that grows."""
from __future__ import annotations

import copy

import pytest

from inferopt.errors import CourseError
from inferopt.performance import capacity_check as cc
from inferopt.performance.predict import predict
from inferopt.planning import planner


@pytest.fixture(scope="module")
def checked():
    plan = planner.make_plan("llama3-70b-chat")
    return plan, cc.check(plan)


def test_the_original_rate_is_judged_by_the_range_and_the_growing_queue_is_named(checked):
    plan, chk = checked
    tp8 = chk.layout(8)
    assert chk.rate == 50 and chk.little.latency_cap_s == 4.0
    assert tp8.verdict(chk.rate) == "misses" and tp8.high < chk.rate
    assert tp8.at_plan["queue_grows"] and tp8.at_plan["limit"] == "max_num_seqs"
    assert tp8.at_plan["tpot_ms"] > chk.little.tpot_cap_ms          # Little's cap is what the model says binds
    for lay in chk.layouts:
        assert lay.low <= lay.qps["nominal"] <= lay.high
        assert lay.verdict(chk.rate) in ("holds", "misses", "the model cannot say")
    assert set(chk.sensitivity) == set(cc.stated_ranges())


@pytest.mark.parametrize("qps, rate, expect", [
    ({"slow": 60, "nominal": 70, "fast": 80}, 50, "holds"),
    ({"slow": 20, "nominal": 30, "fast": 45}, 50, "misses"),
    ({"slow": 25, "nominal": 40, "fast": 75}, 50, "the model cannot say"),
    ({"slow": 10, "nominal": 5, "fast": 10}, 8, "the model cannot say"),     # not monotone: the nominal point counts
])
def test_a_verdict_is_never_stronger_than_its_range(qps, rate, expect):
    lay = cc.Layout(tp=8, replicas=1, qps=qps, at_plan={}, kv_requests=0)
    assert lay.verdict(rate) == expect


def test_the_slow_end_of_every_range_is_slower_in_the_model(checked):
    plan, _ = checked
    req = plan.scenario["requirements"]
    tpot = {}
    for end in ("slow", "fast"):
        prof, roof = cc._setting(req["gpu"], end)
        tpot[end] = predict(req["model"], req["gpu"], tp=8, weights="fp8", kv_dtype="fp8", input_tokens=800,
                            output_tokens=150, concurrency=64, profile=prof, roof=roof).tpot_ms
    assert tpot["slow"] > tpot["fast"]


def test_a_range_in_the_wrong_order_is_refused():
    bad = copy.deepcopy(cc.stated_ranges())
    bad["allreduce_latency_us"].update(slow=6.0, fast=16.0)          # a smaller latency is the fast end
    with pytest.raises(CourseError, match="allreduce_latency_us"):
        cc.check_ranges(bad)
    cc.check_ranges(copy.deepcopy(cc.stated_ranges()))


def test_the_command_to_ship_is_the_layout_whose_range_starts_highest(checked):
    plan, chk = checked
    s = cc.ship(plan, chk)
    assert s.layout.low == max(lay.low for lay in chk.layouts) and s.per_instance_qps == s.layout.low
    assert len(s.commands) == s.layout.replicas and all(f"--tensor-parallel-size {s.layout.tp}" in c or s.layout.tp == 1
                                                        for c in s.commands)
    assert s.fleet.instances >= 6 and s.max_num_seqs >= plan.scenario["plan"]["max_num_seqs"]
    assert {name for name, _ in s.others} == {lay.name for lay in chk.layouts} - {s.layout.name}
