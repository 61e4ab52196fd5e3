"""How many requests a tail verdict rests on: the course's order-statistic rule applied to every SLO on a
percentile that the measured value meets (:mod:`inferopt.bench.stats`).

A sample P95 under its SLO says little from a dozen requests: with n requests, the slowest is an upper
bound of the true P_q at confidence ``level`` only when 1 - (q/100)^n >= level, i.e. n >= 45 for a P95
and n >= 230 for a P99 at 90 % (:func:`inferopt.bench.stats.min_samples_for_upper_bound`). So a pass is
said only when an order statistic at or above the rank :func:`~inferopt.bench.stats.upper_rank` gives is
known to lie under the SLO:

- the bound itself (``ttft_p95_bound_ms`` ..., computed by ``--baseline`` from per-request latencies);
- else a higher sample percentile that sits at or above that rank (numpy's linear interpolation, which
  vLLM's ``bench serve``, aiperf and the course use: the sample P_p lies at or above the
  floor((n - 1) p / 100) + 1-th fastest value): a P99 under the SLO bounds the P95 from 100 requests on.

Fewer requests than the rule needs: "not enough requests to say TTFT P95 <= 500 ms: need 45". The fail
side is unchanged: a sample percentile above its SLO sends the diagnosis to its branch (acting on a
miss costs one measured change; stopping on an unproven pass leaves the users' tail unknown).
"""
from __future__ import annotations

import math

from inferopt.bench.results import TAIL_LEVEL
from inferopt.bench.stats import min_samples_for_upper_bound, upper_rank

TAIL_SLOS = ("ttft_p95_ms", "tpot_p95_ms", "ttft_p99_ms", "tpot_p99_ms", "e2e_p95_ms")


def _name(metric: str) -> tuple[str, int]:
    kind, p, _ = metric.split("_")
    return kind.upper(), int(p[1:])


def _rank_of(n: int, p: float) -> int:
    """The rank (1 = fastest) a sample P_p (linear interpolation) lies at or above."""
    return math.floor((n - 1) * p / 100) + 1


def verdict(b, metric: str, slo: float, level: float = TAIL_LEVEL) -> dict:
    """The order-statistic verdict on ``metric`` (a sample percentile at or under ``slo``): a dict with
    metric, passed (True, or None: the sample cannot say), need (requests the rule needs), text."""
    kind, q = _name(metric)
    value, n = getattr(b, metric), b.requests
    need = min_samples_for_upper_bound(q, level)
    head = f"{kind} P{q} {value:g} ms <= {slo:g} ms"
    out = {"metric": metric, "value": value, "slo": slo, "requests": n, "need": need, "level": level}
    if n is None:
        return {**out, "passed": True, "basis": "sample value (request count not given)",
                "text": f"{head} in the sample; the request count was not given, so no confidence is attached "
                        f"(a P{q} shown under its SLO at {level:.0%} needs >= {need} requests: give --requests, or "
                        "read the benchmark's file with --baseline)"}
    n = int(n)
    if n < need:
        return {**out, "passed": None, "basis": "too few requests",
                "text": f"not enough requests to say {kind} P{q} <= {slo:g} ms: need {need}, measured {n} (the "
                        f"slowest of {n} bounds a P{q} with only {1 - (q / 100) ** n:.0%} confidence)"}
    r = upper_rank(n, q, level)
    bound = getattr(b, metric.replace("_ms", "_bound_ms"), None)
    basis = None
    if bound is not None:
        basis = f"the {r}th fastest of {n}, {bound:g} ms, bounds the P{q} at {level:.0%}"
    else:
        for p in (99,) if q < 99 else ():
            higher = getattr(b, f"{metric.split('_')[0]}_p{p}_ms", None)
            if higher is not None and _rank_of(n, p) >= r:
                bound, basis = higher, f"the sample P{p}, {higher:g} ms, lies at or above the {r}th fastest of {n}"
    if bound is None:
        return {**out, "passed": None, "basis": "no bound known",
                "text": f"{head} in the sample of {n}, but nothing known bounds the P{q} at {level:.0%} (it is the "
                        f"{r}th fastest): give the per-request latencies (vllm bench serve --save-detailed, or the "
                        "course's JSON lines) with --baseline"}
    if bound <= slo:
        return {**out, "passed": True, "basis": "order-statistic bound",
                "text": f"{kind} P{q} <= {bound:g} ms <= {slo:g} ms with {level:.0%} confidence ({basis}): passes"}
    return {**out, "passed": None, "basis": "order-statistic bound",
            "text": f"{head} in the sample, but its {level:.0%} upper bound {bound:g} ms is above it ({basis}): "
                    "undecided; measure more requests"}


def tail_verdicts(b, s, failing: list) -> list:
    """The verdict on every tail SLO given, measured, and met by the sample value."""
    fail = {f["metric"] for f in failing}
    out = []
    for m in TAIL_SLOS:
        slo, value = getattr(s, m), getattr(b, m)
        if slo is not None and value is not None and m not in fail and value <= slo:
            out.append(verdict(b, m, slo))
    return out


def measure_more_step(undecided: list) -> str:
    """The next step when no SLO fails and the sample cannot show that some pass."""
    need = max(v["need"] for v in undecided)
    text = "; ".join(v["text"] for v in undecided)
    return (text[0].upper() + text[1:] + f". Do not stop yet: run the same benchmark with at least {need} "
            f"completed requests (e.g. vllm bench serve --num-prompts {need}) and diagnose again.")
