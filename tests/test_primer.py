"""The primer's helpers (chapter 0a) that a cell reads a figure from: checked against hand-worked histograms."""
import math

import pytest

from inferopt.errors import CourseError
from inferopt.monitoring.metrics_parse import histogram_quantile
from inferopt.primer import metric_types, quantile_bucket

# 8 observations: 2 at or below 0.25 s, 3 more up to 0.5 s, 3 more up to 0.75 s (vLLM's stored sample's TTFT shape)
BUCKETS = [(0.1, 0.0), (0.25, 2.0), (0.5, 5.0), (0.75, 8.0), (1.0, 8.0), (math.inf, 8.0)]


def test_the_bucket_holds_the_rank_of_the_quantile():
    assert quantile_bucket(0.95, BUCKETS) == (0.5, 0.75)      # rank 7.6 of 8: the third non-empty bucket
    assert quantile_bucket(0.5, BUCKETS) == (0.25, 0.5)       # rank 4
    assert quantile_bucket(0.25, BUCKETS) == (0.1, 0.25)      # rank 2: the bucket that reaches it, not the next
    assert quantile_bucket(0.01, [(0.5, 1.0), (math.inf, 1.0)]) == (0.0, 0.5)   # the first bucket starts at 0


def test_histogram_quantile_lies_inside_that_bucket():
    for q in (0.25, 0.5, 0.9, 0.95, 0.99):
        lo, hi = quantile_bucket(q, BUCKETS)
        assert lo < histogram_quantile(q, BUCKETS) <= hi


def test_the_stored_sample_gives_the_bucket_around_its_p95():
    m = metric_types()
    lo, hi = m["ttft_p95_bucket_s"]
    assert lo < m["ttft_p95_s"] <= hi


@pytest.mark.parametrize("q, buckets", [(0, BUCKETS), (1.5, BUCKETS), (0.95, []),
                                        (0.95, [(0.5, 0.0), (math.inf, 0.0)])])
def test_a_bad_quantile_or_an_empty_histogram_is_one_clear_error(q, buckets):
    with pytest.raises(CourseError, match="quantile_bucket needs"):
        quantile_bucket(q, buckets)
