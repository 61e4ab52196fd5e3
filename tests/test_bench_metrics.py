"""Metric definitions of inferopt.bench.metrics, checked against hand-computed values and numpy."""
import math

import numpy as np
import pytest

from inferopt.bench.metrics import SLO, RequestRecord, max_level_meeting, percentile, summarize, table
from inferopt.errors import CourseError


def rec(i, ttft, e2e, n, start=0.0, itl=None, prompt=100, error=None):
    return RequestRecord(request_id=i, prompt_tokens=prompt, output_tokens=n, ttft_s=ttft, e2e_s=e2e,
                         start_s=start, itl_s=itl or [], error=error)


def test_tpot_is_decode_time_over_n_minus_one():
    r = rec(0, 0.5, 3.6, 32)
    assert r.tpot_s == pytest.approx((3.6 - 0.5) / 31)
    assert rec(1, 0.5, 0.5, 1).tpot_s is None          # one token: no decode interval
    assert rec(2, None, None, 0, error="HTTP 500").tpot_s is None


def test_percentiles_match_numpy_linear():
    vals = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]
    for q in (50, 90, 95, 99):
        assert percentile(vals, q) == pytest.approx(float(np.percentile(vals, q)))
    assert math.isnan(percentile([], 50))
    with pytest.raises(CourseError):
        percentile(vals, 120)


def test_summary_throughput_and_goodput():
    records = [rec(0, 0.2, 2.2, 21, start=0.0, itl=[0.1] * 20),
               rec(1, 0.4, 4.4, 21, start=0.0, itl=[0.2] * 20),
               rec(2, None, None, 0, start=1.0, error="HTTP 503")]
    slo = SLO(ttft_ms=300, tpot_ms=150)
    s = summarize(records, duration_s=4.0, slo=slo, concurrency=2)
    assert s["completed"] == 2 and s["failed"] == 1 and s["concurrency"] == 2
    assert s["output_throughput_tok_s"] == pytest.approx(42 / 4.0)
    assert s["total_throughput_tok_s"] == pytest.approx((42 + 200) / 4.0)
    assert s["request_throughput_rps"] == pytest.approx(0.5)
    assert s["tpot_p50_ms"] == pytest.approx(150.0)          # (100 + 200) / 2
    assert s["itl_p50_ms"] == pytest.approx(150.0)
    # only request 0 meets both SLOs (request 1: TTFT 400 > 300); goodput counts requests per second
    assert s["goodput_rps"] == pytest.approx(1 / 4.0)
    assert s["slo_attainment"] == pytest.approx(1 / 3)
    assert s["meets_slo"] is False
    # two requests cannot carry a P95: the slowest request is judged, and the text says so
    assert slo.violations(s) == ["TTFT max 400 ms > 300 ms (n=2 < 45: the slowest request is judged)",
                                 "TPOT max 200 ms > 150 ms (n=2 < 45: the slowest request is judged)"]


def test_duration_defaults_to_first_send_to_last_token():
    s = summarize([rec(0, 0.1, 1.0, 10, start=0.5), rec(1, 0.1, 2.0, 10, start=1.0)])
    assert s["duration_s"] == pytest.approx(3.0 - 0.5)


def test_max_level_stops_at_first_miss():
    slo = SLO(tpot_ms=150)
    rows = [{"concurrency": c, "tpot_p95_ms": t, "failed": 0} for c, t in ((1, 100), (2, 120), (4, 160), (8, 140))]
    assert max_level_meeting(rows, slo) == 2      # 8 passing after 4 failed does not count
    assert max_level_meeting(rows, SLO(tpot_ms=50)) is None


def test_slo_rejects_bad_values():
    with pytest.raises(CourseError, match="positive number of milliseconds"):
        SLO(ttft_ms=-5)
    with pytest.raises(CourseError, match="percentile"):
        SLO(ttft_ms=500, percentile=97)


def _steady(n, ttft=0.1, step=0.001):
    return [rec(i, ttft + step * i, 1.0 + step * i, 21, itl=[0.05] * 20) for i in range(n)]


def test_a_table_of_8_requests_refuses_to_print_a_p95():
    s = summarize(_steady(8), concurrency=8)
    assert not math.isnan(s["ttft_p95_ms"])              # the summary keeps the figure ...
    line = table([s], ["concurrency", "completed", "ttft_p50_ms", "ttft_p95_ms", "tpot_p95_ms", "e2e_p95_ms",
                       "itl_p99_ms"]).splitlines()[1].split()
    # ... the table shows the P50, and in place of every tail percentile the count it would need
    assert line == ["8", "8", f"{s['ttft_p50_ms']:.1f}", "n<45", "n<45", "n<45", "n<230"]
    # from 45 requests on the P95 is printed; the ITL P99 from 230 gaps on (here 45 x 20 = 900 gaps)
    big = summarize(_steady(45))
    row = table([big], ["ttft_p95_ms", "itl_p99_ms"]).splitlines()[1].split()
    assert row == [f"{big['ttft_p95_ms']:.1f}", f"{big['itl_p99_ms']:.1f}"]
    # a row with no sample size (a model's prediction) is printed as given
    assert table([{"ttft_p95_ms": 12.0}]).splitlines()[1].split() == ["12.0"]


def test_a_decision_on_8_requests_judges_the_slowest_not_a_p95():
    slo = SLO(ttft_ms=110)
    s = summarize(_steady(8, ttft=0.09, step=0.003))     # TTFTs 90 ... 111 ms: P95 109.95 ms, slowest 111 ms
    assert s["ttft_p95_ms"] <= 110 < s["ttft_max_ms"]
    assert not slo.summary_meets(s) and "the slowest request is judged" in slo.violations(s)[0]
    # the same P95 from 45 requests passes only when its order-statistic upper bound is within the limit
    s45 = summarize(_steady(45, ttft=0.06, step=0.001))   # 60 ... 104 ms: the 45th fastest bounds the P95
    assert s45["ttft_p95_bound_ms"] == pytest.approx(104.0) and slo.summary_meets(s45)
    assert not SLO(ttft_ms=103).summary_meets(s45) and "upper bound" in SLO(ttft_ms=103).violations(s45)[0]
    # and max_level_meeting, which sizes a concurrency, follows the same verdict
    rows = [{**summarize(_steady(8, ttft=0.09, step=0.003)), "concurrency": 1, "failed": 0}]
    assert max_level_meeting(rows, slo) is None


def test_table_is_fixed_width_text():
    t = table([{"concurrency": 1, "ttft_p50_ms": 12.345}], ["concurrency", "ttft_p50_ms"])
    assert t.splitlines() == ["concurrency  ttft_p50_ms", "          1         12.3"]


def test_record_round_trip():
    r = rec(3, 0.1, 1.1, 11, itl=[0.1] * 10)
    d = r.to_dict()
    assert d["tpot_s"] == pytest.approx(0.1)
    assert RequestRecord.from_dict(d) == r


def _metrics(n, ttft_sum, tpot_sum):
    lines = []
    for name, total in (("vllm:time_to_first_token_seconds", ttft_sum), ("vllm:request_time_per_output_token_seconds",
                                                                          tpot_sum)):
        lines += [f"# TYPE {name} histogram", f'{name}_bucket{{le="+Inf",model_name="m"}} {n}',
                  f'{name}_count{{model_name="m"}} {n}', f'{name}_sum{{model_name="m"}} {total}']
    return "\n".join(lines) + "\n"


def test_engine_means_are_the_window_of_the_engines_own_sums():
    from inferopt.bench.vllm_bench import engine_means

    before, after = _metrics(3, 1.5, 0.3), _metrics(7, 5.5, 0.7)       # 4 requests: TTFT 4.0 s, TPOT 0.4 s in sum
    assert engine_means(before, after) == {"requests": 4, "ttft_ms": pytest.approx(1000.0), "tpot_ms": pytest.approx(100.0)}
    with pytest.raises(CourseError, match="no request finished between the two /metrics scrapes"):
        engine_means(after, after)
