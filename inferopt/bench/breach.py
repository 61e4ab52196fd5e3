"""A count-based canary verdict: "k of n requests over the SLO", with n stated (issue 29).

:func:`inferopt.bench.stats.slo_verdict_counts` passes a P95 gate only on evidence that the P95 is
*under* the limit, which needs n >= 45 requests at 90 % confidence; below that it judges the slowest
request, so one slow request of six stops a good release (chapter 06b's withdrawn run). A canary
gate can ask the other question: do the requests *show* that the release breaks its P95 SLO?

If the release meets the SLO, each request is over the limit with probability at most
``1 - q/100`` (0.05 for a P95), independently, so the number over is at most Binomial(n, 0.05).
The gate fails when at least :func:`breach_count` of n requests are over: so many that a release
meeting the SLO shows them with probability <= ``1 - level``. It is the same rule as the lower
order-statistic bound of ``stats``: the P95 is over the limit with confidence ``level``. A pass is
then "no breach shown by n requests", not "P95 under the limit"; how large a regression n requests
catch is :func:`catch_probability`, and :func:`min_requests_to_catch` is the hold a step needs.

    v = breach_verdict("TTFT", n=7, n_over=1, limit_ms=348)      # 1 of 7 over: passes (2 would fail)
    min_requests_to_catch(0.5)                                   # 7: half over is caught 90 % of the time
"""
from __future__ import annotations

from functools import lru_cache

from inferopt.bench.stats import Verdict, _check, binom_cdf, lower_rank, min_samples_for_upper_bound
from inferopt.errors import CourseError

MAX_REQUESTS = 1_000       # the hold search stops here (a canary step, not a study)


def _count(who: str, **counts) -> None:
    for k, v in counts.items():
        if isinstance(v, bool) or not isinstance(v, int | float) or int(v) != v:
            raise CourseError(f"{who}: {k}={v!r} must be a whole request count (round an increase() first, "
                              "or read raw counter differences)")


@lru_cache(maxsize=4096)
def breach_count(n: int, q: float = 95, level: float = 0.9) -> int | None:
    """The fewest of ``n`` requests over the limit that show the P_q over it at confidence ``level``:
    the smallest c with P(Binomial(n, 1 - q/100) >= c) <= 1 - level. None: no count of n can."""
    _check(q, level, "breach_count")
    _count("breach_count", n=n)
    if n < 1:
        raise CourseError(f"breach_count: n={n}; give 1 or more requests")
    s = lower_rank(int(n), q, level)   # c over the limit <=> the (n - c + 1)-th fastest is over it: stats' own rule
    return None if s is None else int(n) - s + 1


def catch_probability(n: int, over_share: float, q: float = 95, level: float = 0.9) -> float:
    """P(the gate fails) for a release with ``over_share`` of its requests over the limit, judged on n."""
    if not 0 <= over_share <= 1:
        raise CourseError(f"catch_probability: over_share={over_share} must lie between 0 and 1")
    c = breach_count(n, q, level)
    return 0.0 if c is None else 1 - binom_cdf(c - 1, int(n), over_share)


def min_requests_to_catch(over_share: float, power: float = 0.9, q: float = 95, level: float = 0.9) -> int:
    """The fewest requests with which the gate fails a release that has ``over_share`` of its requests
    over the limit with probability >= ``power`` (and a release meeting the SLO at most 1 - level)."""
    _check(q, level, "min_requests_to_catch")
    if not 1 - q / 100 < over_share <= 1:
        raise CourseError(f"min_requests_to_catch: over_share={over_share} must exceed {1 - q / 100:g} (the share a "
                          f"release meeting its P{q:g} may have over) and be at most 1")
    if not 0 < power < 1:
        raise CourseError(f"min_requests_to_catch: power={power} must lie between 0 and 1, e.g. 0.9")
    for n in range(1, MAX_REQUESTS + 1):
        if catch_probability(n, over_share, q, level) >= power:
            return n
    raise CourseError(f"min_requests_to_catch: more than {MAX_REQUESTS} requests; ask for a larger over_share")


def fail_count(n: int, q: float = 95, level: float = 0.9, tolerate: int = 0) -> int | None:
    """How many of ``n`` requests over the threshold fail a gate: :func:`breach_count`, and more than
    ``tolerate`` (None when no count of n can). ``tolerate=1`` is a controller that lets one slow request pass as
    a blip, as Argo Rollouts' ``failureLimit`` lets failed measurements pass before an analysis fails
    (AnalysisTemplate spec, argo-rollouts docs "Analysis & Progressive Delivery")."""
    _count("fail_count", n=n, tolerate=tolerate)
    c = breach_count(n, q, level)
    k = None if c is None else max(c, int(tolerate) + 1)
    return k if k is not None and k <= int(n) else None


def breach_verdict(name: str, n: int, n_over: int, limit_ms: float, q: float = 95, *, level: float = 0.9,
                   min_n: int = 1, tolerate: int = 0) -> Verdict:
    """The gate on ``n`` finished requests, ``n_over`` of them over ``limit_ms``: fails at
    :func:`breach_count` or more over, and more than ``tolerate`` (:func:`fail_count`); ``passed`` is None
    (hold the step) while n < ``min_n``."""
    _check(q, level, "breach_verdict")
    _count(f"breach_verdict({name!r})", n=n, n_over=n_over, min_n=min_n, tolerate=tolerate)
    n, n_over, min_n = int(n), int(n_over), int(min_n)
    if n < 1 or not 0 <= n_over <= n or min_n < 1:
        raise CourseError(f"breach_verdict({name!r}): need 1 <= n, 0 <= n_over <= n and min_n >= 1, got n={n}, "
                          f"n_over={n_over}, min_n={min_n} (no request in the window means there is nothing to judge)")
    share = f"{n_over} of {n} requests > {limit_ms:g} ms"
    if n < min_n:
        return Verdict(None, "too few requests", f"{name}: {share}; hold until {min_n} have finished")
    c = fail_count(n, q, level, tolerate)
    conf = f"{level:.0%}"
    if c is not None and n_over >= c:
        return Verdict(False, "breach count",
                       f"{name} P{q:g} > {limit_ms:g} ms with {conf} confidence ({share}; a release meeting its P{q:g} "
                       f"shows {c} or more with probability <= {1 - level:.0%}): fails")
    need = min_samples_for_upper_bound(q, level)
    return Verdict(True, "breach count",
                   f"{name}: {share}, fewer than the {c if c is not None else n + 1} that would fail the gate (a P{q:g} "
                   f"breach at {conf} confidence" + (f", more than {int(tolerate)} tolerated" if tolerate else "")
                   + f"): passes (no breach shown; a P{q:g} <= {limit_ms:g} ms statement at {conf} "
                   f"needs n >= {need})")
