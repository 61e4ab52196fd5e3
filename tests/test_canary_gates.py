"""Chapter 06b's canary gates at the SLO itself (issue 29): the engines carry a bucket bound at each
threshold (``alerts.histogram_bucket_args``, vLLM's ``--custom-histogram-buckets``), and a P95 gate is
``bench.stats.slo_verdict_counts`` on the window's requests, never ``histogram_quantile`` rounded up to
the next default bound; or, opt-in, ``bench.breach.breach_verdict`` (k of n requests over, n stated) with
each rollout step held until the canary has finished n requests. Also the load generator's ``stop_when``
(06b's crash cell stops sending after enough requests have finished on one engine). Nothing here starts an engine; vLLM is imported once."""
from __future__ import annotations

import json
import re
import time
from collections import Counter

import pytest

from inferopt.bench import breach, loadgen, stats
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
    """Answers the gates' PromQL from counts per histogram: {metric: (n, {le: n_within})}: a window's
    difference (``offset``), or the absolute counter (``sum(series)``, a step's baseline and end): what the
    engine had served before (``before``) plus ``hist`` for each step served so far (``steps``)."""

    def __init__(self, hist, preemptions=0.0, errors=0.0, before=None, fresh=False):
        self.hist, self.preemptions, self.errors = hist, preemptions, errors
        self.before, self.steps = before or {}, 0
        self.fresh = fresh        # started for the rollout: "offset" finds no sample, `or vector(0)` answers 0
        self.asked = []

    def _absolute(self, metric, kind, le_re):
        def part(counts):
            n, within = counts
            if kind == "count":
                return float(n)
            hits = [k for le, k in within.items() if re.fullmatch(le_re.replace("\\\\", "\\"), le)]
            return float(hits[0]) if hits else None
        now = part(self.hist[metric])
        if now is None:
            return None
        return (part(self.before[metric]) or 0.0 if metric in self.before else 0.0) + self.steps * now

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
        assert m, expr                                    # a raw counter, not increase()
        if " offset " not in expr or self.fresh:          # the absolute counter: a step's baseline or end
            return self._absolute(m.group(1), m.group(2), m.group(3) or "")
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


def test_stop_when_ends_an_open_loop_without_waiting_out_its_schedule():
    """A schedule of 40 sends over 19.5 s against a closed port (each request fails at once): once three have
    ended the run is over, and the 37 sends still waiting for their time are dropped, not slept through. The
    old loop slept every send to its time before asking stop_when, so the run lasted the whole schedule."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ep = loadgen.Endpoint(f"http://127.0.0.1:{port}", "m")
    spec = RequestSpec(prompt="x", prompt_tokens=1, max_tokens=1)
    schedule = [(i * 0.5, spec) for i in range(40)]
    seen = []
    t0 = time.perf_counter()
    res = loadgen.run(ep, schedule=schedule, progress=False, on_record=seen.append, stop_when=lambda: len(seen) >= 3)
    wall = time.perf_counter() - t0
    assert len(res.records) == 3
    assert wall < schedule[-1][0] / 2 and res.duration_s < schedule[-1][0] / 2, (wall, res.duration_s)
    # an event's request is dropped too, not left waiting for streams that will never come
    tagged = RequestSpec(prompt="x", prompt_tokens=1, max_tokens=1, tag="s")
    seen.clear()
    res = loadgen.run(ep, schedule=[(0.0, tagged), (5.0, tagged), (loadgen.AfterTokens("s", 1), spec)],
                      progress=False, on_record=seen.append, stop_when=lambda: len(seen) >= 1)
    assert len(res.records) == 1 and res.duration_s < 2.5


# --- the count-based verdict: k of n over the SLO, n stated (inferopt.bench.breach) ---

def test_breach_count_is_the_lower_order_statistic_rule_and_holds_its_confidence_exactly():
    for n in range(1, 201):
        c = breach.breach_count(n)
        # the same rule as the lower bound of stats: fewer than s within <=> at least n - s + 1 over
        assert c == n - stats.lower_rank(n) + 1, n
        # a release exactly at its P95 (5 % of requests over) fails with probability <= 10 % ...
        assert 1 - stats.binom_cdf(c - 1, n, 0.05) <= 0.1
        # ... and c is the fewest with that property
        assert c == 1 or 1 - stats.binom_cdf(c - 2, n, 0.05) > 0.1
    # simulated: a release at the SLO is stopped at most ~10 % of the time on 7 requests
    import numpy as np

    rng = np.random.default_rng(29)
    over = rng.binomial(7, 0.05, size=20_000)
    assert np.mean(over >= breach.breach_count(7)) <= 0.1 + 3 * (0.1 * 0.9 / 20_000) ** 0.5


def test_the_hold_is_the_fewest_requests_that_catch_a_regression():
    n = breach.min_requests_to_catch(0.5, power=0.9)
    assert breach.catch_probability(n, 0.5) >= 0.9 > breach.catch_probability(n - 1, 0.5)
    assert breach.min_requests_to_catch(0.25) > n                       # a smaller regression needs a longer hold
    assert breach.catch_probability(n, 0.0) == 0.0 and breach.catch_probability(n, 1.0) == 1.0


def test_one_slow_request_of_a_handful_does_not_stop_a_release_two_do():
    one = breach.breach_verdict("TPOT", 7, 1, 48.0)
    two = breach.breach_verdict("TPOT", 7, 2, 48.0)
    assert one.passed is True and "1 of 7 requests > 48 ms" in one.text and "n >= 45" in one.text
    assert two.passed is False and "90% confidence" in two.text and "2 of 7" in two.text
    # the maximum rule, by contrast, fails on the single slow one
    assert stats.slo_verdict_counts("TPOT", 7, 6, 48.0).passed is False
    held = breach.breach_verdict("TPOT", 3, 0, 48.0, min_n=7)
    assert held.passed is None and "hold until 7" in held.text


def test_a_tolerated_blip_lets_one_slow_request_pass_and_never_more():
    """tolerate=1 (06b's gates): the single request of a 5 % step cannot fail a P95 gate; the breach count still
    decides every step where it is above one, and without the tolerance one of one fails."""
    assert breach.breach_verdict("TTFT", 1, 1, 568.7).passed is False                  # the count alone
    blip = breach.breach_verdict("TTFT", 1, 1, 568.7, tolerate=1)
    assert blip.passed is True and "more than 1 tolerated" in blip.text
    assert breach.fail_count(1, tolerate=1) is None and breach.fail_count(1) == 1
    for n in (4, 6, 7):                                    # the breach count is already 2 there: unchanged
        assert breach.fail_count(n, tolerate=1) == breach.breach_count(n) == 2
        assert breach.breach_verdict("TPOT", n, 2, 48.0, tolerate=1).passed is False
    assert breach.fail_count(2, tolerate=1) == 2 and breach.fail_count(6, tolerate=2) == 3
    one = FakeProm({"vllm:time_to_first_token_seconds": (1, {"0.348": 0}),
                    "vllm:request_time_per_output_token_seconds": (1, {"0.048": 1})})
    assert not all(g["passed"] for g in canary.read_gates(one, SLO, 30, level=0.9, rule="breach"))
    assert all(g["passed"] for g in canary.read_gates(one, SLO, 30, level=0.9, rule="breach", tolerate=1))


def test_breach_functions_reject_wrong_input_in_one_line():
    for bad in ((0, 0), (5, 6), (5, -1), (5.5, 5), (True, 1), (5, "1")):
        with pytest.raises(CourseError):
            breach.breach_verdict("TTFT", *bad, 348)
    for kw in ({"min_n": 0}, {"q": 100}, {"level": 1.0}):
        with pytest.raises(CourseError):
            breach.breach_verdict("TTFT", 5, 0, 348, **kw)
    for call in (lambda: breach.breach_count(0), lambda: breach.catch_probability(5, 1.5),
                 lambda: breach.min_requests_to_catch(0.05), lambda: breach.min_requests_to_catch(0.5, power=1),
                 lambda: breach.min_requests_to_catch(0.051)):
        with pytest.raises(CourseError) as e:
            call()
        assert "\n" not in str(e.value)


def test_read_gates_breach_rule_counts_the_requests_over():
    one_slow = FakeProm({"vllm:time_to_first_token_seconds": (6, {"0.348": 6}),
                         "vllm:request_time_per_output_token_seconds": (6, {"0.048": 5})})
    g = {x["gate"]: x for x in canary.read_gates(one_slow, SLO, 30, level=0.9, rule="breach")}
    assert g["TPOT P95"]["passed"] and g["TPOT P95"]["basis"] == "breach count" and g["TPOT P95"]["n"] == 6
    two_slow = FakeProm({"vllm:time_to_first_token_seconds": (6, {"0.348": 6}),
                         "vllm:request_time_per_output_token_seconds": (6, {"0.048": 4})})
    g = {x["gate"]: x for x in canary.read_gates(two_slow, SLO, 30, level=0.9, rule="breach")}
    assert not g["TPOT P95"]["passed"] and g["TTFT P95"]["passed"]
    assert g["TPOT P95"]["verdict"].startswith("TPOT P95 > 48 ms")   # the gate's name, not "TPOT P95 P95"
    g = {x["gate"]: x for x in canary.read_gates(one_slow, SLO, 30, level=0.9, rule="breach", min_n=7)}
    assert not g["TTFT P95"]["passed"] and "hold until 7" in g["TTFT P95"]["verdict"]
    with pytest.raises(CourseError, match="rule="):
        canary.read_gates(one_slow, SLO, 30, level=0.9, rule="max")
    with pytest.raises(CourseError, match="give level"):
        canary.read_gates(one_slow, SLO, 30, rule="breach")


class FakeGateway:
    """nginx's exact weighted split, counted as requests finish."""

    def __init__(self):
        self.weight, self.log = 0, Counter()

    def set_canary_weight(self, w):
        self.weight = w

    def requests_per_version(self):
        return Counter(self.log)


class _Result:
    def __init__(self, n):
        self.n = n

    def summary(self):
        return {"completed": self.n, "failed": 0}


def test_rollout_holds_each_step_until_the_canary_has_finished_enough(monkeypatch):
    monkeypatch.setattr(canary.time, "sleep", lambda s: None)
    gw, sent = FakeGateway(), []

    def send(weight, enough):
        n, credit = 0, 0
        while not enough():
            credit += weight
            gw.log["canary" if credit >= 100 else "stable"] += 1
            credit -= 100 if credit >= 100 else 0
            n += 1
        sent.append(n)
        prom.steps += 1                                   # the step's requests reach the engine's counters
        return _Result(n)

    prom = FakeProm({"vllm:time_to_first_token_seconds": (7, {"0.348": 7}),
                     "vllm:request_time_per_output_token_seconds": (7, {"0.048": 6})})
    trace = canary.rollout(gw, prom, SLO, send, level=0.9, rule="breach", hold_for=7, progress=False)
    assert [st["decision"] for st in trace] == ["promote", "promote", "done"]
    assert [st["routed"]["canary"] for st in trace] == [7, 7, 7] and sent == [140, 14, 7]
    for bad in (0, 2.5, True):
        with pytest.raises(CourseError, match="hold_for"):
            canary.rollout(gw, prom, SLO, send, level=0.9, rule="breach", hold_for=bad, progress=False)


def test_a_step_counts_its_own_requests_not_what_the_engine_served_before(monkeypatch):
    """A Prometheus started for the rollout has no sample from before its first scrape, so "now minus
    offset" counted the canary's whole history as the step's (06b, 2026-12-03: the 5 % step's one request
    judged as 5, with 4 from section 4's load). The rollout reads each step's baseline when it begins."""
    monkeypatch.setattr(canary.time, "sleep", lambda s: None)
    gw = FakeGateway()
    # the canary served 4 requests before the rollout, all over the TTFT threshold; each step serves 1, fast
    prom = FakeProm({"vllm:time_to_first_token_seconds": (1, {"0.348": 1}),
                     "vllm:request_time_per_output_token_seconds": (1, {"0.048": 1})},
                    before={"vllm:time_to_first_token_seconds": (4, {"0.348": 0}),
                            "vllm:request_time_per_output_token_seconds": (4, {"0.048": 4})}, fresh=True)

    def send(weight):
        gw.log["canary"] += 1
        prom.steps += 1
        return _Result(1)

    base = canary.percentile_counts(prom, SLO)
    assert sorted(base.values()) == [0.0, 4.0, 4.0, 4.0]      # TTFT: 4 served, 0 within; TPOT: 4 and 4
    trace = canary.rollout(gw, prom, SLO, send, level=0.9, rule="breach", progress=False)
    assert [st["decision"] for st in trace] == ["promote", "promote", "done"]
    assert all((g["n"], g["n_within"]) == (1, 1) for st in trace for g in st["gates"] if g.get("metric"))
    # "now minus offset" on this fresh Prometheus: the first step is 4 of 5 over, and rolls back
    prom.steps = 1
    whole = canary.read_gates(prom, SLO, 30, level=0.9, rule="breach")
    ttft = next(g for g in whole if g["gate"] == "TTFT P95")
    assert (ttft["n"], ttft["n_within"], ttft["passed"]) == (5, 1, False)


def test_the_default_rollout_is_the_stored_runs_call_shape(monkeypatch):
    """The default call, rollout(gw, prom, slo, send): send(weight) with one argument, P95 gates from
    histogram_quantile (engines with vLLM's default bounds); the opt-in rules leave that path as it was."""
    monkeypatch.setattr(canary.time, "sleep", lambda s: None)
    gw, weights = FakeGateway(), []

    def send(weight):
        weights.append(weight)
        gw.log["canary"] += 1
        return _Result(1)

    prom = FakeProm({})
    trace = canary.rollout(gw, prom, SLO, send, progress=False)
    assert weights == [5, 50, 100] and [st["decision"] for st in trace] == ["promote", "promote", "done"]
    assert all(g["value"] in (0.2, 0.04) for st in trace for g in st["gates"] if g.get("metric"))
    assert not any(" offset " in q for q in prom.asked)              # no counter differences asked for
    slow = type("SlowProm", (FakeProm,), {"query_value": lambda self, e: 0.5 if e.startswith("histogram_quantile")
                                          else FakeProm.query_value(self, e)})({})
    assert canary.rollout(gw, slow, SLO, send, progress=False)[-1]["decision"] == "roll back"
