"""How sure is a percentile from a handful of requests? Sample counts and bootstrap intervals.

A P95 over 8 requests is, by construction, almost the slowest of the 8: quoting it without the
sample count overstates what was measured. ``percentile_ci`` resamples the requests with
replacement (the percentile bootstrap) and returns the interval that holds the middle
``level`` share of the resampled percentiles; with few requests the interval is wide, and
that width is the honest answer.
"""
from __future__ import annotations

import numpy as np

from inferopt.errors import CourseError

MIN_PERCENTILE_SAMPLES = 20   # the course's rule: no percentile is printed from fewer samples


def percentile_ci(values, q: float = 95, *, level: float = 0.9, resamples: int = 2000,
                  seed: int = 0) -> tuple[float, float, float, int]:
    """(estimate, low, high, n) for the ``q``-th percentile of ``values`` (same unit as values)."""
    vals = np.asarray([v for v in values if v is not None], dtype=float)
    if vals.size == 0:
        raise CourseError("percentile_ci: no values (did every request fail?)")
    if not 0 < level < 1:
        raise CourseError(f"percentile_ci: level={level} must lie between 0 and 1, e.g. 0.9")
    rng = np.random.default_rng(seed)
    boot = np.percentile(rng.choice(vals, size=(resamples, vals.size), replace=True), q, axis=1)
    low, high = np.percentile(boot, [(1 - level) / 2 * 100, (1 + level) / 2 * 100])
    return float(np.percentile(vals, q)), float(low), float(high), int(vals.size)


def describe_ci(name: str, values_ms, q: float = 95, level: float = 0.9) -> str:
    """One line: 'TTFT P95 = 812 ms (n=8; 90% bootstrap CI 640-900 ms)'."""
    est, low, high, n = percentile_ci(values_ms, q, level=level)
    return f"{name} P{q:g} = {est:.0f} ms (n={n}; {level:.0%} bootstrap CI {low:.0f}-{high:.0f} ms)"


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
