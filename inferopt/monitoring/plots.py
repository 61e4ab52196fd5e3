"""Plotly figures for the monitoring chapter: service-layer metrics over a load run.

All inputs are plain rows (dicts) so a figure can be rebuilt from stored numbers; times are in
seconds from the start of the run.
"""
from __future__ import annotations

import math

from inferopt.monitoring.metrics_parse import (
    delta,
    histogram_quantile,
    kv_cache_usage,
    prefix_cache_hit_rate,
    queue_length,
    running_requests,
)


def timeseries_rows(samples, baseline) -> list:
    """One row per /metrics sample: t_s, running, waiting, kv_cache_usage (0..1), and since the
    baseline snapshot: finished requests, prefix hit rate and TTFT/TPOT P95 (seconds, None
    while nothing finished)."""
    rows = []
    for t, snap in samples:
        win = delta(snap, baseline)
        ttft_b = win.buckets("vllm:time_to_first_token_seconds")
        tpot_b = win.buckets("vllm:request_time_per_output_token_seconds")
        ttft = histogram_quantile(0.95, ttft_b)
        tpot = histogram_quantile(0.95, tpot_b)
        rows.append({"t_s": round(t, 2), "running": running_requests(snap), "waiting": queue_length(snap),
                     "kv_cache_usage": kv_cache_usage(snap),
                     "finished": win.buckets("vllm:e2e_request_latency_seconds")[-1][1],
                     "prefix_hit_rate": prefix_cache_hit_rate(win),
                     "ttft_p95_s": None if math.isnan(ttft) else ttft,
                     "tpot_p95_s": None if math.isnan(tpot) else tpot})
    return rows


def load_run_figure(rows, title: str = "Service-layer metrics during a load run"):
    """Three stacked panels: batch and queue; KV use and prefix hit rate; TTFT/TPOT P95."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    t = [r["t_s"] for r in rows]
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.07,
                        subplot_titles=("requests running / waiting (vllm:num_requests_*)",
                                        "KV-cache use and prefix-cache hit rate (0..1)",
                                        "P95 since the run started (s, from histogram buckets)"))
    fig.add_trace(go.Scatter(x=t, y=[r["running"] for r in rows], name="running", mode="lines+markers"), 1, 1)
    fig.add_trace(go.Scatter(x=t, y=[r["waiting"] for r in rows], name="waiting", mode="lines+markers"), 1, 1)
    fig.add_trace(go.Scatter(x=t, y=[r["kv_cache_usage"] for r in rows], name="KV use", mode="lines+markers"), 2, 1)
    fig.add_trace(go.Scatter(x=t, y=[r["prefix_hit_rate"] for r in rows], name="prefix hit rate",
                             mode="lines+markers"), 2, 1)
    fig.add_trace(go.Scatter(x=t, y=[r["ttft_p95_s"] for r in rows], name="TTFT P95", mode="lines+markers"), 3, 1)
    fig.add_trace(go.Scatter(x=t, y=[r["tpot_p95_s"] for r in rows], name="TPOT P95", mode="lines+markers"), 3, 1)
    fig.update_xaxes(title_text="seconds since the load started", row=3, col=1)
    fig.update_layout(title=title, height=720, template="plotly_white")
    return fig
