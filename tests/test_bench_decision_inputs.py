"""bench.experiments.decision_inputs keeps the sample size: a summary's ``completed`` reaches ``diagnose`` as
``requests``, so a pass on a tail percentile from a dozen requests is not read as "all SLOs met: stop"."""
from inferopt.bench.experiments import decision_inputs
from inferopt.bench.metrics import RequestRecord, summarize
from inferopt.diagnosis.decision import diagnose


def _records(n: int) -> list:
    """n requests of 8 tokens each, TTFT 40-51 ms and 10 ms between tokens (a real summary's input)."""
    out = []
    for i in range(n):
        ttft = 0.040 + 0.001 * (i % 12)
        out.append(RequestRecord(i, 16, 8, ttft_s=ttft, e2e_s=ttft + 0.07, start_s=0.1 * i, itl_s=[0.010] * 7))
    return out


def test_completed_travels_as_requests():
    m = decision_inputs(summarize(_records(12), duration_s=2.0))
    assert m["requests"] == 12


def test_a_dozen_requests_do_not_stop_the_diagnosis():
    m = decision_inputs(summarize(_records(12), duration_s=2.0))
    d = diagnose(m, {"ttft_p95_ms": 500, "tpot_p95_ms": 50})
    assert "need 45" in d.next_step and "Do not stop yet" in d.next_step, d.next_step
    # the old inputs (no request count) let the same sample stop with only a warning: the check above rejects it
    old = {k: v for k, v in m.items() if k != "requests"}
    d_old = diagnose(old, {"ttft_p95_ms": 500, "tpot_p95_ms": 50})
    assert "Do not stop yet" not in d_old.next_step


def test_enough_requests_pass():
    m = decision_inputs(summarize(_records(200), duration_s=21.0))
    assert m["requests"] == 200
    d = diagnose(m, {"ttft_p95_ms": 500, "tpot_p95_ms": 50})
    assert "Do not stop yet" not in d.next_step
