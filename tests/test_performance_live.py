"""The performance model on chapter 2b's branches (inferopt.performance.live; pure, no engine).

The idle figures are chapter 2b's stored calibration (assets/results/perf_cpu_runs.yaml, session 02b);
the relations checked are the ones the chapter relies on: the calibration reproduces its own idle run,
branch D's scene shows the stall and its fix, the dry run of the tuning loop names the change the live
loop makes, and the comparison rows flag a wrong direction."""
from __future__ import annotations

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
