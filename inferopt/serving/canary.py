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

from inferopt.monitoring.alerts import SLOs, canary_gates, duration_seconds, gate_passes

SELECTOR = 'job="vllm",version="canary"'


def read_gates(prom, slo: SLOs, window_s: int, selector: str = SELECTOR, errors: str = "engine") -> list:
    """Every canary gate evaluated now over the last ``window_s`` seconds: the gate rows of
    :func:`canary_gates` plus ``value`` (None when the query returned no series) and ``passed``."""
    rows = []
    for g in canary_gates(slo, selector=selector, window=f"{int(window_s)}s", errors=errors):
        value = prom.query_value(g["promql"])
        rows.append({**g, "value": value, "passed": gate_passes(g, value)})
    return rows


def canary_requests(prom, window_s: int, selector: str = SELECTOR) -> float:
    """Requests the canary finished in the last ``window_s`` seconds, from its e2e histogram."""
    v = prom.query_value(f"sum(increase(vllm:e2e_request_latency_seconds_count{{{selector}}}[{int(window_s)}s]))")
    return 0.0 if v is None or math.isnan(v) else v


def rollout(gateway, prom, slo: SLOs, send, weights=(5, 50, 100), selector: str = SELECTOR,
            errors: str = "engine", progress: bool = True) -> list:
    """Run the canary through ``weights`` (percent); return the trace, one dict per step:
    {weight, seconds, sent, failed, routed (requests per version at the gateway), canary_requests
    (from Prometheus), gates (see :func:`read_gates`), decision ('promote' | 'done' | 'roll back')}.
    After a roll back the gateway's canary weight is 0."""
    scrape_s = duration_seconds(getattr(prom, "scrape_interval", "1s"))
    trace = []
    for i, weight in enumerate(weights):
        gateway.set_canary_weight(weight)
        routed_before = gateway.requests_per_version()
        t0 = time.monotonic()
        result = send(weight)
        time.sleep(2 * scrape_s + 0.5)              # the step's last samples are scraped
        seconds = time.monotonic() - t0
        window_s = math.ceil(seconds)
        gates = read_gates(prom, slo, window_s, selector=selector, errors=errors)
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
