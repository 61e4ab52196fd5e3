"""bench.stats: distribution-free percentile bounds and SLO verdicts hold their stated confidence.

The coverage tests simulate: draw n latencies from a known distribution many times, and count how
often the bound lies on the right side of the true percentile. The order-statistic bound's exact
coverage is a binomial probability (stats.binom_cdf); the simulated share must match it within
sampling error (4 standard errors) and be at least the stated level. The same simulation shows the
percentile bootstrap of the earlier round falling far short (its top can never pass the maximum),
so the test would fail on the old method.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from inferopt.bench import stats
from inferopt.errors import CourseError

TRIALS = 4000
P95_EXP = -math.log(0.05)          # true P95 of a unit exponential


def _tol(p: float) -> float:
    return 4 * math.sqrt(p * (1 - p) / TRIALS) + 1e-9


def test_the_maximum_bounds_a_p95_at_90_percent_from_45_requests():
    assert stats.min_samples_for_upper_bound(95, 0.9) == 45
    assert 0.95 ** 45 < 0.1 < 0.95 ** 44
    assert stats.upper_rank(44, 95, 0.9) is None and stats.upper_rank(45, 95, 0.9) == 45
    assert stats.binom_cdf(44, 45, 0.95) == pytest.approx(1 - 0.95 ** 45)
    assert stats.binom_cdf(3, 10, 0.5) == pytest.approx(sum(math.comb(10, i) for i in range(4)) / 2 ** 10)


@pytest.mark.parametrize("n", [20, 45, 60, 150])
def test_order_statistic_bounds_hold_their_exact_binomial_coverage(n):
    rng = np.random.default_rng(n)
    samples = rng.exponential(size=(TRIALS, n))
    r, s = stats.upper_rank(n), stats.lower_rank(n)
    assert s is not None
    lows = np.array([stats.percentile_bounds(x).lower for x in samples])
    exact_low = 1 - stats.binom_cdf(s - 1, n, 0.95)
    covered = float(np.mean(lows <= P95_EXP))
    assert exact_low >= 0.9 and abs(covered - exact_low) <= _tol(exact_low), (covered, exact_low)
    if r is None:
        assert n < 45 and all(stats.percentile_bounds(x).upper is None for x in samples[:20])
        return
    ups = np.array([stats.percentile_bounds(x).upper for x in samples])
    exact_up = stats.binom_cdf(r - 1, n, 0.95)
    covered = float(np.mean(ups >= P95_EXP))
    assert exact_up >= 0.9 and abs(covered - exact_up) <= _tol(exact_up), (covered, exact_up)


def _bootstrap_high(x, rng, level=0.9, resamples=300):
    boot = np.percentile(rng.choice(x, size=(resamples, x.size), replace=True), 95, axis=1)
    return np.percentile(boot, (1 + level) / 2 * 100)


def test_the_percentile_bootstrap_bug_is_gone():
    # the old method: a "90% CI" whose top never exceeds the sample maximum ("P95 = 437 ms, 90% CI 434-437")
    rng = np.random.default_rng(1)
    samples = rng.exponential(size=(1000, 20))
    boot_cover = float(np.mean([_bootstrap_high(x, rng) >= P95_EXP for x in samples]))
    assert boot_cover < 0.75          # far below the 95 % its upper end claims (the test can fail)
    assert all(_bootstrap_high(x, rng) <= x.max() for x in samples[:50])
    # the new one says there is no upper end from 20 requests, and names the slowest instead
    x = [400.0 + i for i in range(19)] + [437.0]
    line = stats.describe_tail("TTFT", x)
    assert line.startswith("TTFT P95 = ") and "(n=20;" in line
    assert "no upper end below n=59, slowest 437 ms" in line and "bootstrap" not in line
    est, low, high, n = stats.percentile_ci(x)
    assert high is None and low is not None and low <= est and n == 20
    # with enough requests the interval has an upper end that is a sample value
    big = list(np.random.default_rng(2).exponential(size=200) * 100)
    _est, low, high, _n = stats.percentile_ci(big)
    assert high is not None and low < high and high in big


def test_the_share_under_a_threshold_has_a_clopper_pearson_interval_that_covers():
    rng = np.random.default_rng(3)
    threshold = -math.log(1 - 0.8)          # 80 % of a unit exponential lies below it
    hits = 0
    for _ in range(1500):
        _share, low, high, _k, _n = stats.share_under(rng.exponential(size=30), threshold, level=0.9)
        hits += low <= 0.8 <= high
    assert hits / 1500 >= 0.9 - 4 * math.sqrt(0.09 / 1500)
    share, low, high, k, n = stats.share_under([1.0] * 10, 2.0)
    assert (share, k, n, high) == (1.0, 10, 10, 1.0) and low == pytest.approx(0.05 ** (1 / 10), abs=1e-9)
    share, low, high, k, n = stats.share_under([3.0] * 10, 2.0)
    assert (share, low, k) == (0.0, 0.0, 0) and high == pytest.approx(1 - 0.05 ** (1 / 10), abs=1e-9)


def test_slo_verdict_says_its_confidence_or_that_it_judged_on_the_maximum():
    few = [100.0 + i for i in range(30)]
    v = stats.slo_verdict("TTFT", few, 500)
    assert v.passed is True and v.basis.startswith("maximum") and "judged on the maximum" in v.text
    assert "n=30 < 45" in v.text
    assert stats.slo_verdict("TTFT", few, 120).passed is False
    many = list(np.linspace(100, 200, 100))
    v = stats.slo_verdict("TTFT", many, 500)
    assert v.passed is True and v.basis == "order-statistic bound" and "90% confidence" in v.text
    v = stats.slo_verdict("TTFT", many, 50)
    assert v.passed is False and "lower bound" in v.text
    v = stats.slo_verdict("TTFT", many, 196)
    assert v.passed is None and "undecided" in v.text
    # even 3 requests all above the limit are a confident failure: the fastest is a 90% lower bound
    assert stats.slo_verdict("TTFT", [900.0, 950.0, 990.0], 500).passed is False


def test_bad_input_is_one_line():
    for call in (lambda: stats.percentile_bounds([]), lambda: stats.percentile_bounds([1.0, float("nan")]),
                 lambda: stats.percentile_bounds([1.0], level=1.5), lambda: stats.upper_rank(10, q=120)):
        with pytest.raises(CourseError):
            call()


def test_slo_verdict_from_counts_is_slo_verdict_on_the_values():
    """A histogram with a bound at the limit decides as the raw latencies would (chapter 06b's gates)."""
    rng = np.random.default_rng(29)
    cases = 0
    for n in (1, 3, 6, 20, 44, 45, 46, 80, 200):
        for _ in range(40):
            vals = list(rng.lognormal(5, 0.4, size=n))
            limit = float(rng.choice(vals)) + 0.5 if rng.random() < 0.7 else float(rng.uniform(50, 400))
            within = sum(v <= limit for v in vals)
            a, b = stats.slo_verdict("TTFT", vals, limit), stats.slo_verdict_counts("TTFT", n, within, limit)
            assert (a.passed, a.basis) == (b.passed, b.basis), (n, within, limit, a.text, b.text)
            cases += 1
    assert cases == 360
    # small n: judged on the maximum, and the text says so; a single request over the limit fails
    v = stats.slo_verdict_counts("TTFT", 6, 6, 348)
    assert v.passed is True and "judged on the maximum" in v.text and "n=6 < 45" in v.text
    assert stats.slo_verdict_counts("TTFT", 6, 5, 348).passed is False
    assert stats.slo_verdict_counts("TTFT", 100, 100, 348).basis == "order-statistic bound"
    for bad in ((0, 0), (5, 6), (5, -1), (5.5, 5), (True, 1)):
        with pytest.raises(CourseError):
            stats.slo_verdict_counts("TTFT", *bad, 348)
