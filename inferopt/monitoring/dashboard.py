"""The Grafana dashboard for the service layer (original chapter §6.1 服务层), as importable JSON.

``build_dashboard(slo)`` answers "what does the on-call screen show?": QPS per instance,
TTFT / TPOT / ITL quantiles with the SLO drawn as a threshold line, queue and running batch,
KV-cache use, prefix-cache hit rate, preemptions, token throughput, requests slower than 30 s
and engine restarts. Every query reads only metrics vLLM 0.32 exposes (tests check each name
against the live engine and run each query through a real Prometheus).

The stored copy is ``assets/monitoring/grafana_dashboard.json`` (import it in Grafana:
Dashboards -> New -> Import; pick the Prometheus data source for ``DS_PROMETHEUS``).
Regenerate it with ``python -m inferopt dashboard --write``; a test fails when it is stale.
"""
from __future__ import annotations

import argparse
import json

from inferopt import assets
from inferopt.monitoring.alerts import SLOs
from inferopt.paths import ASSETS

STORED_NAME = "monitoring/grafana_dashboard.json"
STORED_PATH = ASSETS / STORED_NAME          # where --write puts it; read it with stored_json()
SCHEMA_VERSION = 39          # Grafana 10.x/11.x dashboard JSON schema version
DS = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
SEL = 'job="$job",instance=~"$instance"'


def _q(expr: str, legend: str, ref: str) -> dict:
    return {"refId": ref, "datasource": DS, "expr": expr, "legendFormat": legend, "range": True}


def _quantiles(metric: str, qs=(0.5, 0.95, 0.99)) -> list:
    return [_q(f"histogram_quantile({q}, sum by (le) (rate({metric}_bucket{{{SEL}}}[1m])))",
               f"P{round(q * 100)}", "ABC"[i]) for i, q in enumerate(qs)]


def _panel(pid: int, title: str, targets: list, unit: str, x: int, y: int, w: int = 12, h: int = 8,
           kind: str = "timeseries", threshold: float | None = None, description: str = "") -> dict:
    steps = [{"color": "green", "value": None}]
    if threshold is not None:
        steps.append({"color": "red", "value": threshold})
    defaults = {"unit": unit, "thresholds": {"mode": "absolute", "steps": steps}}
    if kind == "timeseries":
        defaults["custom"] = {"thresholdsStyle": {"mode": "line" if threshold is not None else "off"},
                              "lineWidth": 1, "fillOpacity": 0}
    if unit == "percentunit":
        defaults.update({"min": 0, "max": 1})
    return {"id": pid, "type": kind, "title": title, "description": description, "datasource": DS,
            "gridPos": {"h": h, "w": w, "x": x, "y": y}, "targets": targets,
            "fieldConfig": {"defaults": defaults, "overrides": []},
            "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                        "tooltip": {"mode": "multi", "sort": "none"}} if kind == "timeseries" else
                       {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}}}


def build_dashboard(slo: SLOs | None = None) -> dict:
    """The dashboard as a dict in Grafana's import format (``__inputs`` names the data source)."""
    slo = slo or SLOs()
    if float(slo.max_request_s).is_integer():
        le = f'le=~"{int(slo.max_request_s)}(\\\\.0)?"'
    else:
        le = f'le="{slo.max_request_s}"'
    panels = [
        _panel(1, "Requests per second per instance (QPS / 实例)",
               [_q(f"sum by (instance) (rate(vllm:request_success_total{{{SEL}}}[1m]))", "{{instance}}", "A")],
               "reqps", 0, 0, description="Finished requests per second (vllm:request_success_total)."),
        _panel(2, "Token throughput",
               [_q(f"sum(rate(vllm:generation_tokens_total{{{SEL}}}[1m]))", "output tokens/s", "A"),
                _q(f"sum(rate(vllm:prompt_tokens_total{{{SEL}}}[1m]))", "prompt tokens/s", "B")],
               "short", 12, 0),
        _panel(3, "TTFT quantiles (SLO line: P95 target)", _quantiles("vllm:time_to_first_token_seconds"),
               "s", 0, 8, threshold=slo.ttft_p95_s,
               description="Estimated from histogram buckets (linear interpolation inside a bucket)."),
        _panel(4, "TPOT quantiles (SLO line: P95 target)", _quantiles("vllm:request_time_per_output_token_seconds"),
               "s", 12, 8, threshold=slo.tpot_p95_s,
               description="Per-request time per output token, (e2e - TTFT) / (tokens - 1)."),
        _panel(5, "Inter-token latency and end-to-end latency",
               [_q("histogram_quantile(0.99, sum by (le) "
                   f"(rate(vllm:inter_token_latency_seconds_bucket{{{SEL}}}[1m])))", "ITL P99", "A"),
                _q("histogram_quantile(0.95, sum by (le) "
                   f"(rate(vllm:e2e_request_latency_seconds_bucket{{{SEL}}}[1m])))", "E2E P95", "B")],
               "s", 0, 16),
        _panel(6, "Queue and running batch (请求队列长度)",
               [_q(f"sum(vllm:num_requests_waiting{{{SEL}}})", "waiting", "A"),
                _q(f"sum(vllm:num_requests_running{{{SEL}}})", "running", "B")],
               "short", 12, 16),
        _panel(7, "KV-cache use (KV Cache 利用率)",
               [_q(f"max by (instance) (vllm:kv_cache_usage_perc{{{SEL}}})", "{{instance}}", "A")],
               "percentunit", 0, 24, w=8, kind="gauge", threshold=0.9,
               description="Fraction of KV blocks in use; near 1 means preemptions."),
        _panel(8, "Prefix-cache hit rate",
               [_q(f"sum(rate(vllm:prefix_cache_hits_total{{{SEL}}}[5m])) / "
                   f"sum(rate(vllm:prefix_cache_queries_total{{{SEL}}}[5m]))", "hit rate", "A")],
               "percentunit", 8, 24, w=8),
        _panel(9, "Preemptions per second",
               [_q(f"sum(rate(vllm:num_preemptions_total{{{SEL}}}[5m]))", "preemptions/s", "A")],
               "short", 16, 24, w=8, threshold=0.0),
        _panel(10, f"Requests slower than {slo.max_request_s:g} s (last 5 min)",
               [_q(f"sum(increase(vllm:e2e_request_latency_seconds_count{{{SEL}}}[5m])) - "
                   f"sum(increase(vllm:e2e_request_latency_seconds_bucket{{{SEL},{le}}}[5m]))", "slow requests", "A")],
               "short", 0, 32, kind="stat", threshold=0.5),
        _panel(11, "Engine restarts (last hour)",
               [_q(f"changes(process_start_time_seconds{{{SEL}}}[1h])", "{{instance}}", "A")],
               "short", 12, 32, kind="stat", threshold=0.5),
    ]
    templating = {"list": [
        {"name": "job", "type": "custom", "label": "job", "query": slo.job,
         "current": {"text": slo.job, "value": slo.job}, "options": [], "hide": 0},
        {"name": "instance", "type": "query", "label": "instance", "datasource": DS,
         "query": {"query": 'label_values(vllm:num_requests_running{job="$job"}, instance)', "refId": "inst"},
         "definition": 'label_values(vllm:num_requests_running{job="$job"}, instance)',
         "multi": True, "includeAll": True, "allValue": ".*", "refresh": 2,
         "current": {"text": "All", "value": "$__all"}, "options": [], "hide": 0},
    ]}
    return {
        "__inputs": [{"name": "DS_PROMETHEUS", "label": "Prometheus", "description": "",
                      "type": "datasource", "pluginId": "prometheus", "pluginName": "Prometheus"}],
        "__requires": [{"type": "grafana", "id": "grafana", "name": "Grafana", "version": "10.0.0"},
                       {"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"},
                       {"type": "panel", "id": "timeseries", "name": "Time series", "version": ""},
                       {"type": "panel", "id": "gauge", "name": "Gauge", "version": ""},
                       {"type": "panel", "id": "stat", "name": "Stat", "version": ""}],
        "uid": "inferopt-vllm-service",
        "title": "vLLM service layer (inference SLOs)",
        "description": "Original chapter §6.1: service layer for vLLM 0.32 engines scraped as job $job. "
                       "Generated by inferopt.monitoring.dashboard.",
        "tags": ["vllm", "inference", "slo"],
        "timezone": "browser", "editable": True, "graphTooltip": 1,
        "schemaVersion": SCHEMA_VERSION, "version": 1,
        "time": {"from": "now-1h", "to": "now"}, "refresh": "30s",
        "templating": templating,
        "annotations": {"list": []},
        "panels": panels,
    }


def dashboard_json(slo: SLOs | None = None) -> str:
    """The dashboard JSON text exactly as stored in assets/ (sorted keys, 2-space indent)."""
    return json.dumps(build_dashboard(slo), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def stored_json() -> str:
    """The stored copy's text (``assets/monitoring/grafana_dashboard.json``), read through :mod:`inferopt.assets`."""
    return assets.text(STORED_NAME)


def queries(dashboard: dict) -> list:
    """Every PromQL expression in the dashboard: panel targets and query variables."""
    out = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    for v in dashboard.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            out.append(q)
    return out


def resolve_variables(expr: str, job: str = "vllm") -> str:
    """A dashboard query with Grafana's variables replaced, so Prometheus can run it:
    $job -> job, $instance -> '.*'; label_values(m, l) -> m."""
    import re

    expr = expr.replace("$job", job).replace("$instance", ".*")
    m = re.fullmatch(r"label_values\((.*),\s*\w+\)", expr)
    return m.group(1) if m else expr


def add_subcommand(subparsers) -> None:
    p = subparsers.add_parser("dashboard", help="print or write the Grafana dashboard JSON (service layer)",
                              description=__doc__)
    p.add_argument("--write", action="store_true", help=f"write assets/{STORED_NAME}")
    p.set_defaults(func=_cli)


def _cli(args: argparse.Namespace) -> int:
    text = dashboard_json()
    if args.write:
        STORED_PATH.write_text(text, encoding="utf-8")
        assets.clear_cache()
        print(f"wrote {STORED_PATH}")
    else:
        print(text, end="")
    return 0
