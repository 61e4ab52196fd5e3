"""inferopt.monitoring.metrics_parse: parsing vLLM's /metrics, Prometheus-exact quantiles, window deltas.

The stored sample (assets/monitoring/vllm-0.32-metrics-sample.txt) is a real /metrics body of the
CPU engine after 8 requests; test_monitoring_live.py checks it still matches the live engine."""
import math

import pytest

from inferopt.errors import CourseError
from inferopt.monitoring import metrics_parse as mp
from inferopt.paths import ASSETS

SAMPLE = (ASSETS / "monitoring" / "vllm-0.32-metrics-sample.txt").read_text()
INF = math.inf


def test_parse_sample_names_and_types():
    snap = mp.parse_metrics(SAMPLE)
    names = snap.sample_names
    for n in ("vllm:time_to_first_token_seconds_bucket", "vllm:request_time_per_output_token_seconds_count",
              "vllm:kv_cache_usage_perc", "vllm:num_requests_waiting", "vllm:prefix_cache_hits_total",
              "vllm:num_preemptions_total", "process_start_time_seconds"):
        assert n in names, n
    # names that no longer exist in vLLM 0.32
    assert "vllm:gpu_cache_usage_perc" not in names
    assert "vllm:time_per_output_token_seconds_bucket" not in names
    # the client parser names counter families without _total
    assert snap.families["vllm:prefix_cache_hits"] == "counter"
    assert snap.types["vllm:time_to_first_token_seconds_bucket"] == "histogram"


def test_sample_figures():
    snap = mp.parse_metrics(SAMPLE)
    s = mp.summary(snap)
    assert s["requests_finished"] == 8
    assert s["waiting"] == 0 and s["running"] == 0
    assert s["prefix_cache_hit_rate"] == 0.0        # 8 different short prompts: no full block shared
    # TTFT buckets: 2 <= 0.25, 5 <= 0.5, 8 <= 0.75 -> rank 7.6 in (0.5, 0.75]: 0.5 + 0.25 * 2.6/3
    assert s["ttft_p95_s"] == pytest.approx(0.5 + 0.25 * (7.6 - 5) / 3)
    assert snap.buckets("vllm:e2e_request_latency_seconds")[-1] == (INF, 8.0)


def test_histogram_quantile_matches_prometheus_rules():
    b = [(0.1, 0), (0.5, 50), (1.0, 90), (INF, 100)]
    assert mp.histogram_quantile(0.5, b) == pytest.approx(0.5)            # exactly at a bound
    assert mp.histogram_quantile(0.25, b) == pytest.approx(0.1 + 0.4 * 25 / 50)
    assert mp.histogram_quantile(0.7, b) == pytest.approx(0.5 + 0.5 * 20 / 40)
    # rank in +Inf: the highest finite bound, however slow the requests really were
    assert mp.histogram_quantile(0.95, b) == 1.0
    # the first bucket starts at 0
    assert mp.histogram_quantile(0.1, [(1.0, 10), (INF, 10)]) == pytest.approx(0.1)
    assert math.isnan(mp.histogram_quantile(0.9, [(1.0, 0), (INF, 0)]))
    assert mp.histogram_quantile(-0.1, b) == -INF and mp.histogram_quantile(1.5, b) == INF
    # unsorted and non-monotonic input is sorted and made monotonic, as Prometheus does
    assert mp.histogram_quantile(0.5, [(INF, 100), (1.0, 90), (0.5, 50), (0.1, 0)]) == pytest.approx(0.5)
    with pytest.raises(CourseError, match=r"\+Inf"):
        mp.histogram_quantile(0.5, [(0.1, 1), (0.5, 2)])


def test_interpolation_caveat_is_bucket_width():
    """All 100 observations were 0.26 s; the histogram cannot know, P50 lands mid-bucket."""
    b = [(0.25, 0), (0.5, 100), (INF, 100)]
    assert mp.histogram_quantile(0.5, b) == pytest.approx(0.375)      # true value 0.26: error 0.115 s
    assert mp.fraction_below(0.5, b) == 1.0                             # exact at a bound
    with pytest.raises(CourseError, match="not a bucket bound"):
        mp.fraction_below(0.3, b)


def test_delta_is_a_window():
    before = mp.parse_metrics(SAMPLE)
    after_text = SAMPLE.replace(
        'vllm:prefix_cache_queries_total{engine="0",model_name="SmolLM2-135M-Instruct"} 288.0',
        'vllm:prefix_cache_queries_total{engine="0",model_name="SmolLM2-135M-Instruct"} 388.0').replace(
        'vllm:prefix_cache_hits_total{engine="0",model_name="SmolLM2-135M-Instruct"} 0.0',
        'vllm:prefix_cache_hits_total{engine="0",model_name="SmolLM2-135M-Instruct"} 75.0')
    after = mp.parse_metrics(after_text)
    win = mp.delta(after, before)
    assert mp.prefix_cache_hit_rate(win) == pytest.approx(0.75)
    assert mp.prefix_cache_hit_rate(after) == pytest.approx(75 / 388)
    # nothing finished in the window: quantiles are NaN, counts 0
    lat = mp.latency_quantiles(win)
    assert lat["ttft"]["count"] == 0 and math.isnan(lat["ttft"]["p95"])
    # a counter that went down (restart) counts from zero
    assert mp.delta(before, after).value("vllm:prefix_cache_queries_total") == 288.0


def test_bad_input_says_what_to_do():
    with pytest.raises(CourseError, match="empty"):
        mp.parse_metrics("")
    snap = mp.parse_metrics(SAMPLE)
    with pytest.raises(CourseError, match="_total"):
        snap.value("vllm:gpu_cache_usage_perc")
    with pytest.raises(CourseError, match="without _bucket"):
        snap.buckets("vllm:time_to_first_token_seconds_bucket")
