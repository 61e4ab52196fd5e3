"""The performance model on chapter 2b's branches (inferopt.performance.live; pure, no engine).

The idle figures are chapter 2b's stored calibration (assets/results/perf_cpu_runs.yaml, session 02b);
the relations checked are the ones the chapter relies on: the calibration reproduces its own idle run,
branch D's scene shows the stall and its fix, the dry run of the tuning loop names the change the live
loop makes, and the comparison rows flag a wrong direction."""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from inferopt import assets
from inferopt.bench.metrics import SLO
from inferopt.diagnosis import tuning
from inferopt.errors import CourseError
from inferopt.performance import live as L
from inferopt.performance.predict import predict

IDLE = next(s["idle"] for s in assets.load("results/perf_cpu_runs.yaml")["sessions"] if s["id"] == "02b")
CAL = SimpleNamespace(input_tokens=IDLE["input_tokens"], output_tokens=IDLE["output_tokens"],
                      ttft_ms=IDLE["ttft_p50"], tpot_ms=IDLE["tpot_p50"], n=4)


@pytest.fixture(scope="module")
def roof():
    return L.session_roof_from(CAL)


def test_session_roof_reproduces_its_idle_run(roof):
    p = L.cpu_predict(roof, input_tokens=CAL.input_tokens, output_tokens=CAL.output_tokens, concurrency=1,
                      num_requests=4)
    assert p.ttft_ms == pytest.approx(CAL.ttft_ms, rel=0.05)
    assert p.tpot_ms == pytest.approx(CAL.tpot_ms, rel=0.05)
    slower = L.session_roof_from(SimpleNamespace(**{**vars(CAL), "tpot_ms": 2 * CAL.tpot_ms}))
    assert slower.bandwidth < roof.bandwidth          # a slower idle decode is a slower memory roof


def test_sweep_throughput_rises_below_concurrency(roof):
    s = L.sweep(roof, [1, 8], input_tokens=100, output_tokens=32)
    assert s[1].throughput_tok_s < s[8].throughput_tok_s < 8 * s[1].throughput_tok_s
    assert s[8].tpot_ms > s[1].tpot_ms


def test_interference_stall_and_its_fix(roof):
    big, small = (L.interference(roof, budget=b) for b in (2048, 256))
    assert big["itl_p99_ms"] > 3 * big["itl_p50_ms"]           # the whole 1,500-token prefill in one step
    assert small["itl_p99_ms"] < 0.5 * big["itl_p99_ms"]       # chunks: the streams' worst gap falls
    assert small["long_ttft_ms"] >= big["long_ttft_ms"]        # every chunk re-reads the weights: no faster
    assert big["long_ttft_ms"] > big["itl_p99_ms"] * 0.9       # the long prompt's TTFT holds the stall


def test_arrivals_are_checked(roof):
    kw = dict(input_tokens=100, output_tokens=8, lengths=[(100, 8), (100, 8)])
    with pytest.raises(CourseError, match="in order"):
        L.cpu_predict(roof, arrivals=[1.0, 0.0], **kw)
    with pytest.raises(CourseError, match="lengths"):
        L.cpu_predict(roof, arrivals=[0.0, 1.0, 2.0], **kw)
    with pytest.raises(CourseError, match="either"):
        L.cpu_predict(roof, arrivals=[0.0, 1.0], concurrency=2, **kw)
    p = L.cpu_predict(roof, arrivals=[0.0, 5.0], **kw)
    assert len(p.requests) == 2 and p.requests[1]["ttft_ms"] == pytest.approx(p.requests[0]["ttft_ms"], rel=0.05)


def test_predict_without_arrivals_unchanged_keys():
    p = predict("llama-3.1-8b", "H100", input_tokens=500, output_tokens=50, concurrency=4)
    assert p.ttft_max_ms >= p.ttft_ms and p.tpot_max_ms >= p.tpot_ms and p.itl_p99_ms >= p.itl_p50_ms
    assert p.requests == []          # per-request figures only for a scripted scene (explicit arrivals)


SLO_2B = SLO(ttft_ms=round(3 * CAL.ttft_ms, 1), tpot_ms=round(2 * CAL.tpot_ms, 1), percentile=95)


@pytest.mark.parametrize("name,branch,change", [("kv_small", "C", "more_kv_memory"), ("prefix_off", "A", "prefix_cache")])
def test_dry_run_of_the_tuning_loop(roof, name, branch, change):
    st = tuning.starts("cpu")[name]
    q = tuning.predicted_step(st, SLO_2B, lambda a, kv: L.tuning_metrics(roof, st, a, kv))
    assert q["branch"] == branch and q["change"].startswith(change + ":")
    assert q["after"][q["metric"]] < 0.5 * q["before"][q["metric"]]
    if name == "kv_small":
        assert q["before"]["preemptions"] > 0 and q["before"]["binding_limit"] == "kv_cache"
        assert q["after"]["preemptions"] == 0


def test_dry_run_stops_when_the_prediction_meets_the_slo(roof):
    st = tuning.starts("cpu")["kv_small"]
    loose = SLO(ttft_ms=1e6, tpot_ms=1e6, percentile=95)
    q = tuning.predicted_step(st, loose, lambda a, kv: L.tuning_metrics(roof, st, a, kv))
    assert q["change"] is None and q["after"] is None


def test_effect_row_and_table():
    ok = L.effect_row("D", "budget", "itl", 2000, 500, 3000, 600)
    assert ok["predicted_effect"] == pytest.approx(0.25) and ok["measured_effect"] == pytest.approx(0.2)
    assert ok["effect_error"] == pytest.approx(0.25) and ok["same_direction"]
    bad = L.effect_row("D", "budget", "ttft", 2000, 2200, 3000, 2700)
    assert not bad["same_direction"]
    text = L.table([ok, bad])
    assert "x0.25" in text and "+25%" in text and "x1.10" in text
    for wrong in ((0, 1, 1, 1), (1, 1, float("nan"), 1), (1, -2, 1, 1)):
        with pytest.raises(CourseError, match="positive"):
            L.effect_row("B", "c", "m", *wrong)
    fig = L.figure([ok, bad])
    assert list(fig.data[1].x) == [ok["measured_effect"], bad["measured_effect"]]


# ---------------------------------------------------------------- the relations chapter 2b asserts of the model
# (inferopt.performance.live.check_*): they hold for any session's speed and reject a wrong prediction
@pytest.mark.parametrize("ttft_x,tpot_x", [(1, 1), (0.3, 0.3), (3, 3), (0.5, 2), (2, 0.5)])
def test_the_model_checks_hold_for_any_session_speed(ttft_x, tpot_x):
    cal = SimpleNamespace(**{**vars(CAL), "ttft_ms": ttft_x * CAL.ttft_ms, "tpot_ms": tpot_x * CAL.tpot_ms})
    r = L.session_roof_from(cal)
    L.check_idle(L.cpu_predict(r, input_tokens=cal.input_tokens, output_tokens=cal.output_tokens, concurrency=1,
                               num_requests=cal.n), cal)
    L.check_sweep(L.sweep(r, [1, 2, 4, 8], input_tokens=100, output_tokens=32))
    preds = {b: L.interference(r, budget=b) for b in (2048, 256)}
    # sent after the streams' 16th token, the long prompt meets them mid-decode at any speed (a fixed 2 s send
    # time found the fastest of these sessions' streams already done)
    assert L.check_interference(preds, 2048, 256)
    assert preds[2048]["long_sent_ms"] < min(q["e2e_ms"] for q in preds[2048]["prediction"].requests[:-1])
    slo = SLO(ttft_ms=3 * cal.ttft_ms, tpot_ms=2 * cal.tpot_ms, percentile=95)
    for name, branch in (("kv_small", "C"), ("prefix_off", "A")):
        st = tuning.starts("cpu")[name]
        L.check_dry_run(tuning.predicted_step(st, slo, lambda a, kv, st=st: L.tuning_metrics(r, st, a, kv)), branch)


def test_check_idle_rejects_a_calibration_that_does_not_reproduce_its_run(roof):
    p = L.cpu_predict(roof, input_tokens=CAL.input_tokens, output_tokens=CAL.output_tokens, concurrency=1,
                      num_requests=CAL.n)
    with pytest.raises(CourseError, match="idle TPOT"):
        L.check_idle(p, SimpleNamespace(**{**vars(CAL), "tpot_ms": 1.5 * CAL.tpot_ms}))
    with pytest.raises(CourseError, match="binding limit"):
        L.check_idle(replace(p, binding_limit="luck"), CAL)


def test_check_sweep_rejects_a_wrong_prediction(roof):
    good = L.sweep(roof, [1, 2, 4, 8], input_tokens=100, output_tokens=32)
    one = good[1]
    wrong = {
        "rise": {**good, 8: replace(good[8], throughput_tok_s=good[4].throughput_tok_s)},                 # flat
        "less than": {**good, 2: replace(good[2], throughput_tok_s=2.2 * one.throughput_tok_s)},          # superlinear
        "TPOT falls": {**good, 8: replace(good[8], tpot_ms=0.9 * good[4].tpot_ms)},
        "binding limit": {**good, 4: replace(good[4], binding_limit="weights")},
        "two concurrencies": {1: one},
    }
    for why, preds in wrong.items():
        with pytest.raises(CourseError, match=why):
            L.check_sweep(preds)


def test_check_interference_rejects_a_wrong_prediction(roof):
    good = {b: L.interference(roof, budget=b) for b in (2048, 256)}
    assert L.check_interference(good, 2048, 256)            # this session's scene overlaps: every relation holds
    big, small = good[2048], good[256]
    wrong = {
        "no stall": {**good, 2048: {**big, "itl_p99_ms": 2 * big["itl_p50_ms"]}},
        "must fall": {**good, 256: {**small, "itl_p99_ms": big["itl_p99_ms"] * 1.01}},
        "cannot make its prefill shorter": {**good, 256: {**small, "long_ttft_ms": 0.8 * big["long_ttft_ms"]}},
        "binding limit": {**good, 256: {**small, "binding_limit": ""}},
    }
    for why, preds in wrong.items():
        with pytest.raises(CourseError, match=why):
            L.check_interference(preds, 2048, 256)


def test_check_dry_run_and_same_change_reject_a_wrong_prediction(roof):
    st = tuning.starts("cpu")["kv_small"]
    q = tuning.predicted_step(st, SLO_2B, lambda a, kv: L.tuning_metrics(roof, st, a, kv))
    L.check_dry_run(q, "C")
    with pytest.raises(CourseError, match="expected branch A"):
        L.check_dry_run(q, "A")
    with pytest.raises(CourseError, match="a change to try"):
        L.check_dry_run({**q, "change": None}, "C")
    worse = {**q, "after": {**q["after"], q["metric"]: 1.1 * q["before"][q["metric"]]}}
    with pytest.raises(CourseError, match="must lower it"):
        L.check_dry_run(worse, "C")
    step = {"branch": q["branch"], "change": q["change"], "metric": q["metric"]}
    L.check_same_change(q, step)
    for bad in ({**step, "change": "prefix_cache: --enable-prefix-caching"}, {**step, "metric": "tpot_p95_ms"},
                {**step, "branch": "A"}):
        with pytest.raises(CourseError, match="the dry run predicted"):
            L.check_same_change(q, bad)


# ---------------------------------------------------------------- the tuning loop's rounds, with the model as engine
def test_tune_all_shares_engine_starts_and_decides_as_one_loop_each(roof, monkeypatch):
    """tune_all starts each round's engines together (here: the model answers for them) and every loop takes
    the decisions it takes alone: two starting points, two rounds of two engines, not four starts."""
    rounds = []

    def fake_round(jobs, slo, tokenizer):
        rounds.append([(loop.start.name, args) for loop, (args, _) in jobs])
        return [L.tuning_metrics(roof, loop.start, args, kv) for loop, (args, kv) in jobs]

    monkeypatch.setattr(tuning, "_measure_round", fake_round)
    st = tuning.starts("cpu")
    both = tuning.tune_all([st["kv_small"], st["prefix_off"]], SLO_2B, tokenizer=object(), log=lambda *_: None)
    assert [len(r) for r in rounds] == [2, 2] and rounds[0][1] == ("prefix_off", ("--no-enable-prefix-caching",))
    alone = [tuning.tune(st[n], SLO_2B, tokenizer=object(), log=lambda *_: None) for n in ("kv_small", "prefix_off")]
    assert [t.to_dict() for t in both] == [t.to_dict() for t in alone]
    assert [t.met for t in both] == [True, True] and [t.steps[0].branch for t in both] == ["C", "A"]


def test_measure_round_starts_together_measures_each_running_then_stops_it(monkeypatch):
    """tuning._measure_round's plumbing without an engine: every server of the round is started (together)
    before the first is measured, each is measured while running and stopped before the next is measured."""
    from inferopt.serving import engine

    events = []

    class FakeServer:
        def __init__(self, *, max_model_len, kv_cache_gib, extra_args, quiet, engines):
            self.args, self.engines, self.running = tuple(extra_args), engines, False

        def start(self):
            events.append(("start", self.args))
            self.running = True
            return self

        def stop(self):
            if self.running:
                events.append(("stop", self.args))
            self.running = False

        def __enter__(self):
            return self.start() if not self.running else self

        def __exit__(self, *exc):
            self.stop()

    def fake_measure(srv, start, tokenizer, slo):
        assert srv.running and srv.engines == 2
        events.append(("measure", srv.args))
        return {"args": srv.args}

    monkeypatch.setattr(engine, "VLLMServer", FakeServer)
    monkeypatch.setattr(tuning, "measure", fake_measure)
    st = tuning.starts("cpu")
    loops = [tuning._Loop(st[n], SLO_2B, 1, lambda *_: None) for n in ("kv_small", "prefix_off")]
    out = tuning._measure_round([(lp, (lp.args, lp.kv)) for lp in loops], SLO_2B, None)
    a, b = (), ("--no-enable-prefix-caching",)
    assert out == [{"args": a}, {"args": b}]
    assert events == [("start", a), ("start", b), ("measure", a), ("stop", a), ("measure", b), ("stop", b)] or \
        events == [("start", b), ("start", a), ("measure", a), ("stop", a), ("measure", b), ("stop", b)]
