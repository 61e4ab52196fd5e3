"""The canary rollout (灰度发布), executed: move the split step by step, judge each step with
chapter 06's gates read from a live Prometheus, and roll back automatically when one fails.

    with NginxGateway(stable=[a], canary=[b]) as gw, PrometheusServer(...) as prom:
        trace = rollout(gw, prom, slo, send=lambda weight: loadgen.run(...), weights=(5, 50, 100))

Each step: set the canary's weight on the gateway, run ``send(weight)`` (the traffic of that
step), wait for Prometheus to scrape what it produced, then evaluate every gate of
:func:`inferopt.monitoring.alerts.canary_gates` over a window that covers the step, on the
canary's series only (``selector``). All gates pass: go to the next weight. One fails, or
cannot be judged for lack of data: set the weight to 0 (every new request goes to the stable
version again) and stop. The trace keeps, for every step, each gate's PromQL, its value, its
threshold and whether it passed, so the decision can be read afterwards.

The gateway and Prometheus are passed in (duck-typed: ``set_canary_weight``,
``requests_per_version``; ``query_value`` and ``scrape_interval``).
"""
from __future__ import annotations

import math
import time

from inferopt.bench.breach import breach_verdict
from inferopt.bench.stats import slo_verdict_counts
from inferopt.errors import CourseError
from inferopt.monitoring.alerts import SLOs, _le_regex, canary_gates, duration_seconds, gate_passes

SELECTOR = 'job="vllm",version="canary"'


def counter_delta(prom, series: str, window_s: int, baseline: dict | None = None):
    """A counter's raw increase, in whole requests (``increase()`` extrapolates to the window's edges and
    gives 4.8 for 4). None: no such series now.

    ``baseline`` ({series: ``sum(series)`` read when the step began}, :func:`percentile_counts`): now minus
    that. Without it, ``sum(series)`` now minus ``window_s`` seconds ago, which counts everything the engine
    ever served when the window reaches back before Prometheus' first scrape of it (a Prometheus started
    for the rollout: the offset finds no sample, and ``or vector(0)`` makes the whole history the step's)."""
    if baseline is not None:
        now = prom.query_value(f"sum({series})")
        if now is None:
            return None
        return now - (baseline.get(series) or 0.0)
    return prom.query_value(f"sum({series}) - (sum({series} offset {int(window_s)}s) or vector(0))")


def _gate_series(g: dict, selector: str) -> tuple:
    """A P95 gate's two counters: its histogram's ``_count`` and the bucket at its threshold."""
    metric = g["metric"]
    return f"{metric}_count{{{selector}}}", f'{metric}_bucket{{{selector},le=~"{_le_regex(g["threshold"])}"}}'


def percentile_counts(prom, slo: SLOs, selector: str = SELECTOR) -> dict:
    """``sum(series)`` now for every series a P95 gate differences: the baseline of a step (None where the
    series does not exist yet: the engine has served nothing, so it counts as 0)."""
    return {series: prom.query_value(f"sum({series})") for g in canary_gates(slo, selector=selector)
            if g.get("metric") for series in _gate_series(g, selector)}


RULES = ("bound", "breach")    # slo_verdict_counts (evidence of a P95 under the limit) | breach_verdict (k of n over)


def _percentile_gate(prom, g: dict, selector: str, window_s: int, level: float, rule: str = "bound",
                     min_n: int = 1, baseline: dict | None = None, tolerate: int = 0) -> dict:
    """A P95 gate judged as :func:`inferopt.bench.stats.slo_verdict` judges raw latencies: from the
    requests of the window (``_count``) and those at or below the threshold (the bucket ``le`` = the
    threshold, which must be a bound of the canary's histogram: :func:`alerts.histogram_bucket_args`)."""
    metric, thr = g["metric"], g["threshold"]
    count_series, within_series = _gate_series(g, selector)
    n = counter_delta(prom, count_series, window_s, baseline)
    row = {**g, "quantile": prom.query_value(g["promql"]), "n": None, "n_within": None, "value": None,
           "passed": False, "basis": "no data", "verdict": f"{g['gate']}: no request of the canary in the window"}
    if n is None or round(n) < 1:
        return row
    within = counter_delta(prom, within_series, window_s, baseline)
    if within is None:
        raise CourseError(f"gate {g['gate']}: the canary's {metric} has no bucket bound at the threshold "
                          f"{thr:g} s, so no count of the requests under it is exact. Start the canary's engine "
                          "with alerts.histogram_bucket_args(slo) (vLLM's --custom-histogram-buckets, chapter 06).")
    name = g["gate"].removesuffix(" P95")            # the verdicts add the percentile themselves
    if rule == "breach":
        v = breach_verdict(name, round(n), round(n) - round(within), thr * 1000, level=level, min_n=min_n,
                           tolerate=tolerate)
    else:
        v = slo_verdict_counts(name, round(n), round(within), thr * 1000, level=level)
    return {**row, "n": round(n), "n_within": round(within), "value": round(within) / round(n),
            "passed": v.passed is True, "basis": v.basis, "verdict": v.text}


def read_gates(prom, slo: SLOs, window_s: int, selector: str = SELECTOR, errors: str = "engine",
               level: float | None = None, rule: str = "bound", min_n: int = 1, baseline: dict | None = None,
               tolerate: int = 0) -> list:
    """Every canary gate evaluated now over the last ``window_s`` seconds: the gate rows of
    :func:`canary_gates` plus ``value`` (None when the query returned no series) and ``passed``.

    The P95 gates are not read from ``histogram_quantile`` (an interpolation inside a bucket, and from
    a handful of requests about the slowest one): each is :func:`slo_verdict_counts` on the requests of
    the window, at confidence ``level`` when there are enough of them, else on the slowest request,
    with the reason in ``verdict``; ``value`` is then the share of requests at or below the threshold.
    An undecided verdict does not pass. ``level=None`` (the default): the P95 gates are Prometheus'
    ``histogram_quantile`` against the threshold (an engine with vLLM's default bucket bounds can be
    read no other way; chapter 06b's canary engines carry bounds at the thresholds and use ``rule="breach"``).
    ``rule="breach"``: each P95 gate is
    :func:`inferopt.bench.breach.breach_verdict` instead (fails when k of the window's n requests over the
    threshold show a P95 breach at ``level`` and are more than ``tolerate``; not judged, so not passed, below
    ``min_n`` requests).
    ``baseline``: the counts read when the step began (:func:`percentile_counts`); the P95 gates count the
    requests since then (see :func:`counter_delta`)."""
    if rule not in RULES:
        raise CourseError(f"read_gates: rule={rule!r}; choose one of {', '.join(RULES)}")
    if rule == "breach" and level is None:
        raise CourseError("read_gates: rule='breach' counts requests at the threshold; give level= (e.g. 0.9)")
    rows = []
    for g in canary_gates(slo, selector=selector, window=f"{int(window_s)}s", errors=errors):
        if g.get("metric") and level is not None:
            rows.append(_percentile_gate(prom, g, selector, window_s, level, rule, min_n, baseline, tolerate))
            continue
        value = prom.query_value(g["promql"])
        rows.append({**g, "value": value, "passed": gate_passes(g, value)})
    return rows


def canary_requests(prom, window_s: int, selector: str = SELECTOR) -> float:
    """Requests the canary finished in the last ``window_s`` seconds, from its e2e histogram."""
    v = prom.query_value(f"sum(increase(vllm:e2e_request_latency_seconds_count{{{selector}}}[{int(window_s)}s]))")
    return 0.0 if v is None or math.isnan(v) else v


def rollout(gateway, prom, slo: SLOs, send, weights=(5, 50, 100), selector: str = SELECTOR,
            errors: str = "engine", progress: bool = True, level: float | None = None, rule: str = "bound",
            hold_for: int | None = None, tolerate: int = 0) -> list:
    """Run the canary through ``weights`` (percent); return the trace, one dict per step:
    {weight, seconds, sent, failed, routed (requests per version at the gateway), canary_requests
    (from Prometheus), gates (see :func:`read_gates`), decision ('promote' | 'done' | 'roll back')}.
    After a roll back the gateway's canary weight is 0.

    ``hold_for=N``: each step holds until the canary has finished N requests (nginx logs a request when
    it ends): ``send(weight, enough)`` gets a predicate that turns True then (give it to
    ``loadgen.run(stop_when=enough)``), and a P95 gate with fewer than N requests does not pass.
    ``tolerate=K`` (``rule="breach"``): a P95 gate lets K slow requests of a step pass as blips
    (:func:`inferopt.bench.breach.fail_count`)."""
    if hold_for is not None and (isinstance(hold_for, bool) or not isinstance(hold_for, int) or hold_for < 1):
        raise CourseError(f"rollout: hold_for={hold_for!r}; give a whole number of canary requests, 1 or more")
    scrape_s = duration_seconds(getattr(prom, "scrape_interval", "1s"))
    trace = []
    for i, weight in enumerate(weights):
        gateway.set_canary_weight(weight)
        routed_before = gateway.requests_per_version()
        # the P95 gates count the requests since this moment (the previous step's were scraped: it waited)
        baseline = percentile_counts(prom, slo, selector) if level is not None else None
        t0 = time.monotonic()
        if hold_for is None:
            result = send(weight)
        else:
            def enough(before=routed_before):
                return gateway.requests_per_version().get("canary", 0) - before.get("canary", 0) >= hold_for
            result = send(weight, enough)
        time.sleep(2 * scrape_s + 0.5)              # the step's last samples are scraped
        seconds = time.monotonic() - t0
        window_s = math.ceil(seconds)
        gates = read_gates(prom, slo, window_s, selector=selector, errors=errors, level=level, rule=rule,
                           min_n=hold_for or 1, baseline=baseline, tolerate=tolerate)
        routed = gateway.requests_per_version() - routed_before
        summary = result.summary()
        ok = all(g["passed"] for g in gates)
        decision = ("promote" if i + 1 < len(weights) else "done") if ok else "roll back"
        trace.append({"weight": weight, "seconds": round(seconds, 1), "sent": summary["completed"] + summary["failed"],
                      "failed": summary["failed"], "routed": dict(routed),
                      "canary_requests": canary_requests(prom, window_s, selector), "gates": gates,
                      "decision": decision})
        if progress:
            failed = [g["gate"] for g in gates if not g["passed"]]
            print(f"step {i + 1}: canary {weight:3d} %, {routed.get('canary', 0)} of {sum(routed.values())} requests "
                  f"on the canary -> {decision}" + (f" (failed: {', '.join(failed)})" if failed else ""))
        if not ok:
            gateway.set_canary_weight(0)
            break
    return trace


def gate_table(trace: list[dict], title: str) -> str:
    """A rollout's trace (``rollout``) as a markdown table: one row per step, one column per gate.

    A P95 gate (one with a ``metric``, marked ``*``) shows the step's canary requests over its threshold ("1 of 4
    over"), the other gates their value; ✅ / ❌ says whether the gate passed, "no data" where it read nothing. The
    title line states each gate's pass condition."""
    if not trace:
        raise CourseError("an empty rollout trace: pass the list rollout(...) returned, one entry per step")
    gates = trace[0]["gates"]
    names = [g["gate"] + ("*" if g.get("metric") else "") for g in gates]
    head = ("| step | canary weight | canary requests (gateway / Prometheus) | " + " | ".join(names)
            + " | decision |\n" + "|---" * (len(names) + 4) + "|\n")
    unit = {"s": lambda v: f"{v * 1000:.0f} ms", "fraction": lambda v: f"{v:.3f}"}

    def cell(g):
        if g.get("metric"):                     # a P95 gate: the step's canary requests over the threshold
            v = "no data" if g["n"] is None else f"{g['n'] - g['n_within']} of {g['n']} over"
        elif g["value"] is None or g["value"] != g["value"]:      # None or NaN: Prometheus had no sample
            v = "no data"
        else:
            v = unit.get(g["unit"], lambda v: f"{v:.1f}")(g["value"])
        return ("✅ " if g["passed"] else "❌ ") + v
    rows = "".join(f"| {i + 1} | {st['weight']} % | {st['routed'].get('canary', 0)} / {st['canary_requests']:.1f} | "
                   + " | ".join(cell(g) for g in st["gates"]) + f" | **{st['decision']}** |\n"
                   for i, st in enumerate(trace))
    limits = ", ".join(f"{g['gate']} ≤ {g['threshold'] * 1000:g} ms" if g.get("metric") else
                       f"{g['gate']} {'<' if g['pass_if'] == 'below' else '='} {g['threshold']:g}" for g in gates)
    return f"**{title}** (pass if {limits})\n\n" + head + rows
