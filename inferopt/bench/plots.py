"""Plotly figures of benchmark summaries and records (pure: data in, figure out).

- ``latency_vs_concurrency``: TTFT and TPOT percentiles against concurrency with the SLO lines,
  and the maximum concurrency that meets every SLO marked;
- ``pareto``: output throughput against latency (each point a concurrency level), the
  throughput-latency trade-off curve;
- ``latency_cdf``: empirical CDFs of a per-request metric for several runs;
- ``before_after``: grouped bars of one optimization's effect on chosen metrics.
Figures carry no timestamps or random ids, so a figure from fixed data is deterministic.

A tail percentile (P90, P95, P99) is drawn only where its level's sample can carry it, by the rule the tables
follow (:func:`inferopt.bench.metrics.tail_withheld`: a P95 from at least 45 requests, the fewest whose slowest
bounds it at 90 %). Where it cannot, the figure draws what the sample does carry, the slowest request
(``{metric}_max_ms``), and its legend and hover say why: a P95 of 8 requests is an interpolation between the two
slowest, not a tail estimate, and a line through it reads as one.
"""
from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from inferopt.bench.metrics import SLO, max_level_meeting, sample_size, tail_withheld
from inferopt.errors import CourseError

_COLORS = {"p50": "#1f77b4", "p90": "#2ca02c", "p95": "#ff7f0e", "p99": "#d62728"}


def _levels(summaries, key):
    if not summaries:
        raise CourseError("no summaries to plot: run a sweep first")
    if any(key not in s for s in summaries):
        raise CourseError(f"every summary needs a {key!r} value to be plotted against")
    return sorted(summaries, key=lambda s: s[key])


def latency_vs_concurrency(summaries, slo: SLO | None = None, key: str = "concurrency",
                           percentiles=("p50", "p95", "p99"), title: str | None = None, best="auto") -> go.Figure:
    """Two panels: TTFT and TPOT percentiles (ms) against ``key``; SLO lines; max level meeting SLOs.

    ``best``: the level to mark as the largest meeting the SLOs ("auto": the summaries' P95s decide, as
    ``max_level_meeting`` does; a level or None: a verdict made elsewhere, e.g. on order-statistic bounds)."""
    rows = _levels(summaries, key)
    x = [s[key] for s in rows]
    log = key == "concurrency"
    # on a log axis plotly places annotations (and the axis range) in log10 units; traces and shapes in data units
    at = (lambda v: math.log10(v)) if log else (lambda v: v)
    fig = make_subplots(rows=1, cols=2, subplot_titles=("TTFT (ms)", "TPOT (ms)"))
    in_legend: set[str] = set()
    for col, metric in ((1, "ttft"), (2, "tpot")):
        withheld: dict[str, int] = {}          # 'P95' -> the requests it needs, where some level has fewer
        for p in percentiles:
            column = f"{metric}_{p}_ms"
            held = [tail_withheld(s, column) for s in rows]
            withheld.update({p.upper(): h[1] for h in held if h})
            y = [None if h else round(s[column], 3) for s, h in zip(rows, held, strict=True)]
            if all(v is None for v in y):
                continue                       # no level carries it: no line at all (the MAX line says why)
            fig.add_trace(go.Scatter(x=x, y=y, mode="lines+markers", name=p.upper(), legendgroup=p,
                                     line={"color": _COLORS.get(p)}, showlegend=p not in in_legend,
                                     hovertemplate=f"{key}=%{{x}}<br>{metric.upper()} {p.upper()} %{{y:.0f}} ms"
                                                   "<extra></extra>"), row=1, col=col)
            in_legend.add(p)
        if withheld:
            _add_max(fig, rows, x, key, metric, withheld, col, show="max" not in in_legend)
            in_legend.add("max")
        limit = getattr(slo, f"{metric}_ms", None) if slo else None
        if limit is not None:
            fig.add_hline(y=limit, line_dash="dash", line_color="black", row=1, col=col,
                          annotation_text=f"SLO P{slo.percentile} {limit:g} ms", annotation_position="top left")
    if slo is not None:
        if best == "auto":
            best = max_level_meeting(rows, slo, key=key)
        if best is not None:
            for col in (1, 2):
                fig.add_vline(x=best, line_dash="dot", line_color="green", row=1, col=col)   # shapes: data units
            fig.add_annotation(x=at(best), y=0.02, yref="y domain", xref="x", showarrow=False, xanchor="right",
                               xshift=-4, yanchor="bottom", text=f"max {key} meeting SLOs: {best}",
                               font={"color": "green"})
    if log:
        pad = 0.08 * max(at(max(x)) - at(min(x)), 0.5)
        fig.update_xaxes(type="log", range=[at(min(x)) - pad, at(max(x)) + pad], tickvals=x, ticktext=[str(v) for v in x])
    fig.update_xaxes(title_text=key)
    fig.update_layout(title=title or f"Latency percentiles vs {key}", template="plotly_white", height=420,
                      legend={"title": {"text": "percentile"}})
    return fig


def _why(withheld: dict[str, int]) -> tuple[str, int]:
    """The lowest tail percentile withheld and the requests it needs: ('P95', 45)."""
    p = min(withheld, key=withheld.get)
    return p, withheld[p]


def _add_max(fig, rows, x, key, metric, withheld, col, show) -> None:
    """The slowest request of each level, in place of the tail percentiles its sample cannot carry."""
    column = f"{metric}_max_ms"
    if not any(_number(s.get(column)) for s in rows):
        return                                 # a hand-built row without its slowest request: nothing to draw
    p, need = _why(withheld)
    fig.add_trace(go.Scatter(
        x=x, y=[round(s[column], 3) if _number(s.get(column)) else None for s in rows],
        customdata=[sample_size(s, metric) for s in rows], mode="lines+markers", name=f"MAX (n<{need}: no {p})",
        legendgroup="max", line={"color": "#7f7f7f", "dash": "dot"}, showlegend=show,
        hovertemplate=(f"{key}=%{{x}}<br>{metric.upper()} max %{{y:.0f}} ms, the slowest of n=%{{customdata}}"
                       f"<br>a {p} needs {need} requests<extra></extra>")), row=1, col=col)


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _carried(rows, column: str) -> tuple[str, str | None]:
    """The column a figure plots for ``column`` over these rows, and the reason when it is not ``column`` itself:
    a tail percentile that some row's sample cannot carry becomes the slowest request (``{metric}_max_ms``) for
    every row, so that one axis holds one kind of number."""
    held = [h for h in (tail_withheld(s, column) for s in rows) if h]
    if not held:
        return column, None
    metric, p = column.split("_")[0], column.split("_")[1].upper()
    top = f"{metric}_max_ms"
    if not all(_number(s.get(top)) for s in rows):
        raise CourseError(f"{column}: {min(n for n, _ in held)} requests cannot carry a {p} (it needs {held[0][1]}) "
                          f"and the summaries have no {top} to show instead; pass summaries from "
                          "inferopt.bench.metrics.summarize, or a column the sample carries (e.g. the p50)")
    ns = sorted({n for n, _ in held})
    span = f"{ns[0]}" if len(ns) == 1 else f"{ns[0]}-{ns[-1]}"
    return top, f"{top} (n={span}<{held[0][1]}: no {p})"


def pareto(summaries, latency: str = "tpot_p95_ms", throughput: str = "output_throughput_tok_s",
           key: str = "concurrency", slo_ms: float | None = None, title: str | None = None) -> go.Figure:
    """Throughput (y) against a latency percentile (x); each point labelled with its level."""
    rows = _levels(summaries, key)
    column, why = _carried(rows, latency)
    fig = go.Figure(go.Scatter(x=[round(s[column], 3) for s in rows], y=[round(s[throughput], 3) for s in rows],
                               mode="lines+markers+text", text=[f"{key}={s[key]}" for s in rows],
                               textposition="top center", name="measured"))
    if slo_ms is not None:
        fig.add_vline(x=slo_ms, line_dash="dash", annotation_text=f"SLO {slo_ms:g} ms")
    fig.update_layout(title=title or "Throughput vs latency (each point one concurrency level)",
                      xaxis_title=why or column, yaxis_title=throughput, template="plotly_white", height=420)
    return fig


def latency_cdf(runs: dict, metric: str = "ttft", title: str | None = None) -> go.Figure:
    """Empirical CDFs of a per-request metric ('ttft', 'tpot', 'e2e' or 'itl') in ms; runs = {name: records}."""
    if metric not in ("ttft", "tpot", "e2e", "itl"):
        raise CourseError(f"metric={metric!r}: use 'ttft', 'tpot', 'e2e' or 'itl'")
    fig = go.Figure()
    for name, records in runs.items():
        if metric == "itl":
            vals = [g for r in records if r.ok for g in r.itl_s]
        else:
            vals = [getattr(r, f"{metric}_s") for r in records if r.ok]
        vals = sorted(v * 1000.0 for v in vals if v is not None)
        if not vals:
            continue
        n = len(vals)
        fig.add_trace(go.Scatter(x=[round(v, 3) for v in vals], y=[(i + 1) / n for i in range(n)],
                                 mode="lines", line_shape="hv", name=str(name)))
    fig.update_layout(title=title or f"{metric.upper()} CDF", xaxis_title=f"{metric.upper()} (ms)",
                      yaxis_title="fraction of requests ≤ x", template="plotly_white", height=400)
    return fig


def before_after(before: dict, after: dict, metrics=("ttft_p95_ms", "tpot_p95_ms"),
                 labels=("before", "after"), title: str | None = None) -> go.Figure:
    """Grouped bars: the chosen summary metrics before and after one change, with the ratio."""
    missing = [m for m in metrics if m not in before or m not in after]
    if missing:
        raise CourseError(f"metrics {missing} are not in both summaries; pick from {sorted(before)}")
    shown = [_carried([before, after], m) for m in metrics]     # a tail neither sample carries: the slowest
    cols, names = [c for c, _ in shown], [why or c for c, why in shown]
    fig = go.Figure()
    for lab, s in zip(labels, (before, after), strict=True):
        fig.add_trace(go.Bar(x=names, y=[round(s[c], 3) for c in cols], name=lab))
    for c, name in zip(cols, names, strict=True):
        if before[c]:
            fig.add_annotation(x=name, y=max(before[c], after[c]), text=f"×{after[c] / before[c]:.2f}",
                               showarrow=False, yshift=12)
    fig.update_layout(barmode="group", title=title or "Before / after one change", template="plotly_white",
                      height=380)
    return fig
