"""`plan` flags a plan its own performance model says misses the SLO (inferopt/performance/plan_check.py):
the original chapter's plan (4 base instances for 200 QPS = 50 QPS each) is flagged with the predicted P95s and
the binding limit; the same plan with enough instances is not; a tighter SLO flags it again."""
import contextlib
import copy
import io
import json

import pytest

from inferopt.__main__ import main
from inferopt.performance.plan_check import check_plan
from inferopt.performance.predict import predict
from inferopt.planning import planner


def _scenario(per_instance_qps=None, tpot_ms=None):
    sc = copy.deepcopy(planner.load_scenario("llama3-70b-chat"))
    if per_instance_qps is not None:
        sc["capacity"]["per_instance_qps"] = per_instance_qps
    if tpot_ms is not None:
        sc["requirements"]["tpot_p95_ms"] = tpot_ms
    return sc


def test_the_original_plan_is_flagged_with_its_predicted_p95s_and_binding_limit():
    plan = planner.make_plan("llama3-70b-chat")
    chk = check_plan(plan)
    assert plan.capacity.base_instances == 4 and chk.qps_per_instance == 50          # 200 QPS over 4 instances
    assert not chk.meets_slo and chk.ttft_p95_ms > chk.ttft_slo_ms
    # the figures are predict()'s for that operating point, not a second model
    p = predict("llama-3-70b", "H100-SXM-80GB", tp=8, num_gpus=8, weights="fp8", kv_dtype="fp8", input_tokens=800,
                output_tokens=150, request_rate=50, max_num_seqs=200, max_num_batched_tokens=8192,
                gpu_memory_utilization=0.9, max_model_len=plan.memory.max_model_len)
    assert (chk.ttft_p95_ms, chk.tpot_p95_ms, chk.binding_limit) == (p.ttft_p95_ms, p.tpot_p95_ms, p.binding_limit)
    line = chk.line()
    assert line.startswith("WARNING") and chk.binding_limit in line and f"{chk.ttft_p95_ms:,.0f} ms" in line
    assert "median" in line and "worst" in line                                      # the error band goes with it


def test_a_plan_with_enough_instances_is_not_flagged_and_a_tighter_slo_is():
    roomy = planner.make_plan(_scenario(per_instance_qps=25))
    assert roomy.capacity.base_instances == 8
    ok = check_plan(roomy)
    assert ok.qps_per_instance == 25 and ok.meets_slo and not ok.line().startswith("WARNING")
    assert ok.ttft_p95_ms < ok.ttft_slo_ms and ok.tpot_p95_ms < ok.tpot_slo_ms
    tight = check_plan(planner.make_plan(_scenario(per_instance_qps=25, tpot_ms=ok.tpot_p95_ms * 0.9)))
    assert not tight.meets_slo and tight.line().startswith("WARNING")


def _run(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(argv)
    return rc, out.getvalue()


@pytest.mark.parametrize("json_out", [False, True])
def test_the_plan_command_prints_the_check(json_out):
    rc, out = _run(["plan", "llama3-70b-chat"] + (["--json"] if json_out else []))
    assert rc == 0
    if json_out:
        d = json.loads(out)
        assert d["instances"] == 6 and d["performance_model"]["meets_slo"] is False
        assert d["performance_model"]["binding_limit"] == "max_num_seqs"
    else:
        assert "total: 4 + 1 + 1 = 6 instances" in out                                 # the planner's own output
        assert out.strip().splitlines()[-1].startswith("WARNING: the performance model says this plan misses")
