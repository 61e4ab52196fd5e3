"""Counter-based readings of a live run (bench.experiments.per_step / mean_queue_ms) and
bench.stats.describe_tail: no percentile from fewer than 20 samples."""
import pytest

from inferopt.bench.experiments import mean_queue_ms, parse_metrics, per_step
from inferopt.bench.stats import MIN_PERCENTILE_SAMPLES, describe_ci, describe_tail
from inferopt.errors import CourseError


def metrics(gen: float, steps: float, tokens: float, queue_sum: float, queue_n: float) -> dict:
    """A /metrics text in vLLM 0.32's shape (labels model_name and engine), parsed as the notebooks do."""
    lab = 'engine="0",model_name="m"'
    text = f"""# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{{lab}}} {gen}
# HELP vllm:iteration_tokens_total Histogram of number of tokens per engine_step.
# TYPE vllm:iteration_tokens_total histogram
vllm:iteration_tokens_total_bucket{{{lab},le="1.0"}} 0.0
vllm:iteration_tokens_total_bucket{{{lab},le="+Inf"}} {steps}
vllm:iteration_tokens_total_count{{{lab}}} {steps}
vllm:iteration_tokens_total_sum{{{lab}}} {tokens}
# HELP vllm:request_queue_time_seconds Histogram of time spent in WAITING phase for request.
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_bucket{{{lab},le="+Inf"}} {queue_n}
vllm:request_queue_time_seconds_count{{{lab}}} {queue_n}
vllm:request_queue_time_seconds_sum{{{lab}}} {queue_sum}
"""
    return parse_metrics(text)


def test_per_step_is_the_batch_the_engine_decoded():
    before = metrics(gen=100, steps=100, tokens=5000, queue_sum=0.5, queue_n=10)
    # 4 requests x 16 tokens in 16 steps: 4 requests per step
    after = metrics(gen=164, steps=116, tokens=5464, queue_sum=0.9, queue_n=14)
    assert per_step(after, before) == pytest.approx(4.0)
    # one request at a time: 1 per step; a wrong reading (the histogram's token sum) would give 29
    one = metrics(gen=116, steps=116, tokens=5464, queue_sum=0.5, queue_n=10)
    assert per_step(one, before) == pytest.approx(1.0)
    assert per_step(before, before) is None          # no step between the scrapes


def test_mean_queue_ms_from_the_histogram_sum_and_count():
    before = metrics(gen=0, steps=0, tokens=0, queue_sum=0.5, queue_n=10)
    after = metrics(gen=0, steps=0, tokens=0, queue_sum=0.9, queue_n=14)
    assert mean_queue_ms(after, before) == pytest.approx(100.0)   # 0.4 s over 4 requests
    assert mean_queue_ms(before, before) is None


def test_describe_tail_prints_no_percentile_from_few_samples():
    few = [600.0, 650.0, 674.0]
    line = describe_tail("TTFT", few)
    assert line.startswith("TTFT max = 674 ms (n=3;") and "P95 =" not in line
    many = [float(v) for v in range(MIN_PERCENTILE_SAMPLES)]
    assert describe_tail("TTFT", many) == describe_ci("TTFT", many)
    assert "max" in describe_tail("TTFT", many[:-1])      # 19 is still too few
    with pytest.raises(CourseError, match="no values"):
        describe_tail("TTFT", [None])


def test_in_engine_request_seconds_weights_each_sample_by_how_long_it_held():
    """The engine-side half of 05b's Little's-law check: the area under the gauges' step function (each sample holds
    until the next), not the mean of the samples. Uneven gaps show the difference: 2 requests held 2 s, 1 held 1 s."""
    from inferopt.bench.experiments import MetricsPoller

    p = MetricsPoller(srv=None)                   # not started: the timeline is given
    p.timeline = [(0.0, 0.0), (1.0, 2.0), (3.0, 1.0), (4.0, 0.0)]
    assert p.in_engine_request_seconds() == pytest.approx(5.0)
    mean_of_samples = sum(n for _, n in p.timeline) / len(p.timeline) * 4.0
    assert mean_of_samples != pytest.approx(5.0)  # the unweighted reading would be wrong here (3.0)
    p.timeline = [(0.0, 3.0)]
    assert p.in_engine_request_seconds() == 0.0   # one sample spans no time
