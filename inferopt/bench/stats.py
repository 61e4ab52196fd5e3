"""How sure is a percentile from a handful of requests? Distribution-free bounds and SLO verdicts.

A P95 over 8 requests is, by construction, almost the slowest of the 8: quoting it without the
sample count overstates what was measured, and a percentile *bootstrap* interval cannot help: it
resamples the measured values, so its upper end never exceeds the sample maximum, even when the
true P95 lies above every value measured (with 20 requests that happens with probability
0.95^20 ≈ 0.36). The stored "P95 = 437 ms, 90% CI 434-437" of an earlier round was such an interval.

What holds for any latency distribution (the order-statistic, or binomial, argument): each request
falls below the true ``q``-th percentile x_q with probability q, independently, so the number of
requests below x_q is Binomial(n, q). The r-th smallest of n values, X_(r), lies at or above x_q
exactly when fewer than r requests fall below it:

    P(X_(r) >= x_q) = P(Binomial(n, q) <= r - 1)          (an upper bound when this is >= level)
    P(X_(s) <= x_q) = P(Binomial(n, q) >= s)              (a lower bound when this is >= level)

With the maximum as the bound (r = n), P(max >= x_q) = 1 - q^n: a one-sided 90% statement that the
P95 is at most the slowest request needs 1 - 0.95^n >= 0.9, i.e. n >= 45 (0.95^45 ≈ 0.099). Below
that no sample value is an upper bound at that confidence, and :func:`slo_verdict` judges on the
maximum (all requests under the limit, or not) and says so. The share of requests under a
threshold has the exact binomial (Clopper-Pearson) interval of :func:`share_under`.

References: order-statistic confidence intervals for quantiles, e.g. Hahn & Meeker, *Statistical
Intervals* (Wiley, 1991), §5.2; Clopper & Pearson, Biometrika 26 (1934) 404-413.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from inferopt.errors import CourseError
from inferopt.slo import min_samples_for_upper_bound  # defined with the SLO type

MIN_PERCENTILE_SAMPLES = 20   # the course's rule: no percentile is printed from fewer samples


def _check(q: float, level: float, who: str) -> None:
    if not 0 < q < 100:
        raise CourseError(f"{who}: q={q} must lie between 0 and 100 (a percentile, e.g. 95)")
    if not 0 < level < 1:
        raise CourseError(f"{who}: level={level} must lie between 0 and 1, e.g. 0.9")


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(Binomial(n, p) <= k), exact (sums the probabilities; n up to a few thousand)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if p <= 0:
        return 1.0
    if p >= 1:
        return 0.0
    lp, lq = math.log(p), math.log1p(-p)
    logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq
            for i in range(k + 1)]
    top = max(logs)
    return min(1.0, math.exp(top) * sum(math.exp(v - top) for v in logs))


@lru_cache(maxsize=4096)
def upper_rank(n: int, q: float = 95, level: float = 0.9) -> int | None:
    """The smallest rank r (1 = fastest) with P(X_(r) >= true P_q) >= level; None when n is too small."""
    _check(q, level, "upper_rank")
    p = q / 100
    for r in range(1, n + 1):
        if binom_cdf(r - 1, n, p) >= level:
            return r
    return None


@lru_cache(maxsize=4096)
def lower_rank(n: int, q: float = 95, level: float = 0.9) -> int | None:
    """The largest rank s with P(X_(s) <= true P_q) >= level; None when n is too small."""
    _check(q, level, "lower_rank")
    p = q / 100
    for s in range(n, 0, -1):
        if 1 - binom_cdf(s - 1, n, p) >= level:
            return s
    return None


@dataclass(frozen=True)
class PercentileBounds:
    """A percentile and its distribution-free bounds (same unit as the values)."""
    q: float
    level: float          # the confidence of each one-sided bound (two-sided interval: both hold, 2 x level - 1)
    n: int
    estimate: float       # the sample percentile (numpy's linear interpolation)
    lower: float | None   # X_(s): the true P_q is >= lower with probability >= level
    upper: float | None   # X_(r): the true P_q is <= upper with probability >= level; None: too few values
    lower_rank: int | None
    upper_rank: int | None
    maximum: float


def _values(values, who: str) -> np.ndarray:
    vals = np.sort(np.asarray([v for v in values if v is not None], dtype=float))
    if vals.size == 0:
        raise CourseError(f"{who}: no values (did every request fail?)")
    if not np.all(np.isfinite(vals)):
        raise CourseError(f"{who}: the values contain NaN or infinity; pass measured latencies only")
    return vals


def percentile_bounds(values, q: float = 95, *, level: float = 0.9) -> PercentileBounds:
    """The sample P_q and its one-sided order-statistic bounds, each at confidence ``level``."""
    _check(q, level, "percentile_bounds")
    vals = _values(values, "percentile_bounds")
    n = int(vals.size)
    r, s = upper_rank(n, q, level), lower_rank(n, q, level)
    return PercentileBounds(q, level, n, float(np.percentile(vals, q)),
                            None if s is None else float(vals[s - 1]), None if r is None else float(vals[r - 1]),
                            s, r, float(vals[-1]))


def percentile_ci(values, q: float = 95, *, level: float = 0.9) -> tuple[float, float | None, float | None, int]:
    """(estimate, low, high, n): a two-sided ``level`` interval from order statistics (each side (1+level)/2).

    ``high`` is None when n is too small for any sample value to be an upper bound at that
    confidence (n < 59 for a two-sided 90 % interval of the P95): there is then no honest upper end.
    """
    b = percentile_bounds(values, q, level=(1 + level) / 2)
    return b.estimate, b.lower, b.upper, b.n


def share_under(values, threshold: float, *, level: float = 0.9) -> tuple[float, float, float, int, int]:
    """(share, low, high, k, n): the share of values <= threshold, with its exact Clopper-Pearson interval.

    ``low``/``high`` bound the true share with two-sided confidence ``level``."""
    _check(50, level, "share_under")
    vals = _values(values, "share_under")
    n, k = int(vals.size), int(np.sum(vals <= threshold))
    alpha = (1 - level) / 2

    def solve(f, target):          # f is monotone in p on [0, 1]; bisection to 1e-12
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            if f(mid) > target:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2

    low = 0.0 if k == 0 else solve(lambda p: 1 - (1 - binom_cdf(k - 1, n, p)), 1 - alpha)   # P(X >= k) = alpha
    high = 1.0 if k == n else solve(lambda p: binom_cdf(k, n, p), alpha)                  # P(X <= k) = alpha
    return k / n, low, high, k, n


@dataclass(frozen=True)
class Verdict:
    """An SLO verdict on a percentile and the evidence it rests on."""
    passed: bool | None    # None: the data cannot decide at the stated confidence
    basis: str             # 'order-statistic bound' or 'maximum (too few requests for a P95 bound)'
    text: str


def slo_verdict(name: str, values_ms, limit_ms: float, q: float = 95, *, level: float = 0.9) -> Verdict:
    """Is the true P_q of ``values_ms`` under ``limit_ms``? Said at confidence ``level``, or on the maximum.

    - enough values (n >= :func:`min_samples_for_upper_bound`): passes when the order-statistic upper
      bound is <= limit, fails when the lower bound is > limit, else undecided at that confidence;
    - fewer: the slowest request decides, and the text says that this is a verdict on the maximum,
      not a P_q statement (a lower bound above the limit is still a confident failure).
    """
    b = percentile_bounds(values_ms, q, level=level)
    need = min_samples_for_upper_bound(q, level)
    conf = f"{level:.0%}"
    if b.lower is not None and b.lower > limit_ms:
        return Verdict(False, "order-statistic bound",
                       f"{name} P{q:g} > {limit_ms:g} ms with {conf} confidence (n={b.n}: the {b.lower_rank}th "
                       f"fastest, {b.lower:.0f} ms, is a lower bound of the P{q:g}): fails")
    if b.upper is not None:
        if b.upper <= limit_ms:
            return Verdict(True, "order-statistic bound",
                           f"{name} P{q:g} <= {b.upper:.0f} ms <= {limit_ms:g} ms with {conf} confidence "
                           f"(n={b.n}: the {b.upper_rank}th fastest is an upper bound): passes")
        return Verdict(None, "order-statistic bound",
                       f"{name} P{q:g} undecided at {conf}: the bounds {b.lower:.0f}-{b.upper:.0f} ms (n={b.n}) "
                       f"contain the limit {limit_ms:g} ms; measure more requests")
    ok = b.maximum <= limit_ms
    return Verdict(ok, "maximum (too few requests for a P95 bound)",
                   f"{name} max = {b.maximum:.0f} ms {'<=' if ok else '>'} {limit_ms:g} ms: judged on the maximum, "
                   f"since n={b.n} < {need} requests cannot bound a P{q:g} at {conf} confidence: "
                   f"{'passes' if ok else 'fails'}")


def describe_ci(name: str, values_ms, q: float = 95, level: float = 0.9) -> str:
    """One line: 'TTFT P95 = 437 ms (n=20; 90% order-statistic interval 430 ms-none: n < 59 bounds no top)'."""
    est, low, high, n = percentile_ci(values_ms, q, level=level)
    need = min_samples_for_upper_bound(q, (1 + level) / 2)
    top = f"{high:.0f} ms" if high is not None else f"no upper end below n={need}, slowest {max(values_ms):.0f} ms"
    bottom = f"{low:.0f} ms" if low is not None else "no lower end"
    return f"{name} P{q:g} = {est:.0f} ms (n={n}; {level:.0%} distribution-free interval {bottom} to {top})"


def describe_tail(name: str, values_ms, q: float = 95, level: float = 0.9,
                  min_n: int = MIN_PERCENTILE_SAMPLES) -> str:
    """``describe_ci`` when there are at least ``min_n`` values; else the slowest value, named as such.

    With fewer than 20 requests a P95 is an interpolation between the slowest few, not a tail
    estimate: 'TTFT max = 674 ms (n=2; fewer than 20 requests, so no P95)'."""
    vals = [v for v in values_ms if v is not None]
    if not vals:
        raise CourseError(f"describe_tail({name!r}): no values (did every request fail?)")
    if len(vals) < min_n:
        return f"{name} max = {max(vals):.0f} ms (n={len(vals)}; fewer than {min_n} requests, so no P{q:g})"
    return describe_ci(name, vals, q, level)


def slo_verdict_counts(name: str, n: int, n_within: int, limit_ms: float, q: float = 95, *,
                       level: float = 0.9) -> Verdict:
    """:func:`slo_verdict` from two counts: ``n`` requests, ``n_within`` of them at or below ``limit_ms``.

    Every rule of :func:`slo_verdict` depends on the values only through that count: the r-th fastest
    is <= limit exactly when at least r requests are, and the maximum is <= limit when all n are. So a
    histogram with a bucket bound *at* the limit gives the same verdict as the raw latencies (this is
    how chapter 06b's canary gates read Prometheus): ``n`` is the histogram's ``_count``, ``n_within``
    its bucket ``le=limit``.
    """
    _check(q, level, "slo_verdict_counts")
    if isinstance(n, bool) or isinstance(n_within, bool) or int(n) != n or int(n_within) != n_within:
        raise CourseError(f"slo_verdict_counts({name!r}): n={n!r} and n_within={n_within!r} must be whole "
                          "request counts (round an increase() first, or read raw counter differences)")
    n, n_within = int(n), int(n_within)
    if n < 1 or not 0 <= n_within <= n:
        raise CourseError(f"slo_verdict_counts({name!r}): need 1 <= n and 0 <= n_within <= n, got n={n}, "
                          f"n_within={n_within} (no request in the window means there is nothing to judge)")
    r, s = upper_rank(n, q, level), lower_rank(n, q, level)
    need = min_samples_for_upper_bound(q, level)
    conf = f"{level:.0%}"
    share = f"{n_within} of {n} requests <= {limit_ms:g} ms"
    if s is not None and n_within < s:
        return Verdict(False, "order-statistic bound",
                       f"{name} P{q:g} > {limit_ms:g} ms with {conf} confidence ({share}: the {s}th fastest, a lower "
                       f"bound of the P{q:g}, is above the limit): fails")
    if r is not None:
        if n_within >= r:
            return Verdict(True, "order-statistic bound",
                           f"{name} P{q:g} <= {limit_ms:g} ms with {conf} confidence ({share}: the {r}th fastest is "
                           "an upper bound): passes")
        return Verdict(None, "order-statistic bound",
                       f"{name} P{q:g} undecided at {conf} ({share}); measure more requests")
    ok = n_within == n
    return Verdict(ok, "maximum (too few requests for a P95 bound)",
                   f"{name}: {share}, so the slowest is {'within' if ok else 'over'} the limit: judged on the maximum, "
                   f"since n={n} < {need} requests cannot bound a P{q:g} at {conf} confidence: "
                   f"{'passes' if ok else 'fails'}")
