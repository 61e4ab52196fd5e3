"""Chapter 06b's canary gates at the SLO itself (issue 29): the engines carry a bucket bound at each
threshold (``alerts.histogram_bucket_args``, vLLM's ``--custom-histogram-buckets``), and a P95 gate is
``bench.stats.slo_verdict_counts`` on the window's requests, never ``histogram_quantile`` rounded up to
the next default bound. Also the load generator's ``stop_when`` (06b's crash cell stops sending after
enough requests have finished on one engine). Nothing here starts an engine; vLLM is imported once."""
from __future__ import annotations

import json
import re

import pytest

from inferopt.bench import loadgen
from inferopt.bench.workload import RequestSpec
from inferopt.errors import CourseError
from inferopt.monitoring import alerts
from inferopt.serving import canary

SLO = alerts.SLOs(ttft_p95_s=0.348, tpot_p95_s=0.048)


@pytest.fixture(scope="module")
def vllm_buckets():
    from vllm.config.observability import ObservabilityConfig
    from vllm.v1.metrics.buckets import histogram_buckets

    return ObservabilityConfig, histogram_buckets


def test_the_engine_gets_a_bound_at_each_threshold(vllm_buckets):
    config_cls, histogram_buckets = vllm_buckets
    flag, value = alerts.histogram_bucket_args(SLO)
    assert flag == "--custom-histogram-buckets"
    buckets = json.loads(value)
    cfg = config_cls(custom_histogram_buckets=buckets)               # vLLM's own validator accepts them
    ttft = histogram_buckets("time_to_first_token", overrides=cfg.custom_histogram_buckets)
    itl = histogram_buckets("inter_token_latency", overrides=cfg.custom_histogram_buckets)
    assert 0.348 in ttft and 0.048 in itl
    # the defaults stay: every default bound is still there, one bound added per family
    for metric, got in (("vllm:time_to_first_token_seconds", ttft), ("vllm:request_time_per_output_token_seconds", itl)):
        assert set(alerts.histogram_bounds(metric)) <= set(got) and len(got) == len(alerts.histogram_bounds(metric)) + 1
    # a threshold already on a default bound adds nothing
    on = alerts.buckets_at_thresholds(alerts.SLOs(ttft_p95_s=0.5, tpot_p95_s=0.05))
    assert on["time_to_first_token"] == alerts.histogram_bounds("vllm:time_to_first_token_seconds")


class FakeProm:
    """Answers the gates' PromQL from counts per histogram: {metric: (n, {le: n_within})}."""

    def __init__(self, hist, preemptions=0.0, errors=0.0):
        self.hist, self.preemptions, self.errors = hist, preemptions, errors
        self.asked = []

    def query_value(self, expr):
        self.asked.append(expr)
        if expr.startswith("histogram_quantile"):            # an interpolation under each threshold
            return 0.2 if "time_to_first_token" in expr else 0.04
        if "num_preemptions" in expr:
            return self.preemptions
        if "http_requests_total" in expr:
            return self.errors
        if "e2e_request_latency" in expr:
            return 0.0
        m = re.match(r"sum\((vllm:[a-z_]+)_(count|bucket)\{[^}]*?(?:le=~\"([^\"]+)\")?\}\)", expr)
        assert m and " offset " in expr, expr            # a raw counter difference, not increase()
        n, within = self.hist[m.group(1)]
        if m.group(2) == "count":
            return float(n)
        for le, k in within.items():
            if re.fullmatch(m.group(3).replace("\\\\", "\\"), le):
                return float(k)
        return None                                       # no such bound on this engine


def gates(prom):
    return {g["gate"]: g for g in canary.read_gates(prom, SLO, 30, level=0.9)}


def test_a_p95_gate_on_few_requests_is_judged_on_the_slowest_and_says_so():
    ok = FakeProm({"vllm:time_to_first_token_seconds": (6, {"0.348": 6}),
                   "vllm:request_time_per_output_token_seconds": (6, {"0.048": 6})})
    g = gates(ok)
    assert g["TTFT P95"]["passed"] and g["TTFT P95"]["basis"].startswith("maximum")
    assert "judged on the maximum" in g["TTFT P95"]["verdict"] and (g["TTFT P95"]["n"], g["TTFT P95"]["value"]) == (6, 1.0)
    # one request of six over the threshold fails the gate, although histogram_quantile reads 40 ms < 48 ms
    one_slow = FakeProm({"vllm:time_to_first_token_seconds": (6, {"0.348": 6}),
                         "vllm:request_time_per_output_token_seconds": (6, {"0.048": 5})})
    g = gates(one_slow)
    assert g["TTFT P95"]["passed"] and not g["TPOT P95"]["passed"] and g["TPOT P95"]["quantile"] < 0.048


def test_enough_requests_give_a_stated_confidence():
    many = FakeProm({"vllm:time_to_first_token_seconds": (100, {"0.348": 99}),
                     "vllm:request_time_per_output_token_seconds": (100, {"0.048": 80})})
    g = gates(many)
    assert g["TTFT P95"]["passed"] and "90% confidence" in g["TTFT P95"]["verdict"]
    assert not g["TPOT P95"]["passed"] and g["TPOT P95"]["basis"] == "order-statistic bound"


def test_no_request_is_no_data_and_no_bound_at_the_threshold_is_one_clear_line():
    empty = FakeProm({"vllm:time_to_first_token_seconds": (0, {"0.348": 0}),
                      "vllm:request_time_per_output_token_seconds": (0, {"0.048": 0})})
    assert not any(g["passed"] for g in canary.read_gates(empty, SLO, 30, level=0.9)[:2])
    default_buckets = FakeProm({"vllm:time_to_first_token_seconds": (6, {"0.5": 6}),
                                "vllm:request_time_per_output_token_seconds": (6, {"0.05": 6})})
    with pytest.raises(CourseError, match="no bucket bound at the threshold"):
        canary.read_gates(default_buckets, SLO, 30, level=0.9)


def test_stop_when_stops_sending():
    """Against a closed port every request fails at once; stop_when ends the run after three."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]                          # closed again when the block ends
    ep = loadgen.Endpoint(f"http://127.0.0.1:{port}", "m")
    reqs = [RequestSpec(prompt="x", prompt_tokens=1, max_tokens=1) for _ in range(40)]
    seen = []
    res = loadgen.run(ep, reqs, rate=200.0, progress=False, on_record=seen.append, stop_when=lambda: len(seen) >= 3)
    assert 3 <= len(res.records) < 40 and not any(r.ok for r in res.records)
    full = loadgen.run(ep, reqs[:10], rate=200.0, progress=False)
    assert len(full.records) == 10                           # without it every request is sent
    closed = loadgen.run(ep, reqs[:10], concurrency=1, progress=False, stop_when=lambda: True)
    assert closed.records == []
