"""Plot builders: right traces, SLO lines, and the max concurrency meeting the SLOs marked."""
import pytest

from inferopt.bench import plots
from inferopt.bench.metrics import SLO, RequestRecord
from inferopt.errors import CourseError

ROWS = [{"concurrency": c, "ttft_p50_ms": 100.0 * c, "ttft_p95_ms": 150.0 * c, "ttft_p99_ms": 200.0 * c,
         "tpot_p50_ms": 90 + 10.0 * c, "tpot_p95_ms": 100 + 12.0 * c, "tpot_p99_ms": 110 + 15.0 * c,
         "output_throughput_tok_s": 8.0 * c ** 0.7, "failed": 0} for c in (8, 1, 2, 4)]


def test_latency_vs_concurrency_marks_max_level():
    fig = plots.latency_vs_concurrency(ROWS, SLO(ttft_ms=700, tpot_ms=160))
    assert len(fig.data) == 6 and list(fig.data[0].x) == [1, 2, 4, 8]
    texts = [a.text for a in fig.layout.annotations]
    assert "max concurrency meeting SLOs: 4" in texts
    assert any("SLO P95 700 ms" in t for t in texts)


def test_latency_vs_concurrency_marks_the_level_it_is_given():
    """best=: a frontier judged elsewhere (lab 4: order-statistic verdicts) is marked as given; None marks none."""
    slo = SLO(ttft_ms=700, tpot_ms=160)
    for best, want in ((2, ["max concurrency meeting SLOs: 2"]), (None, [])):
        texts = [a.text for a in plots.latency_vs_concurrency(ROWS, slo, best=best).layout.annotations]
        assert [t for t in texts if t.startswith("max concurrency")] == want


def test_pareto_and_cdf_and_before_after():
    fig = plots.pareto(ROWS)
    assert list(fig.data[0].text) == ["concurrency=1", "concurrency=2", "concurrency=4", "concurrency=8"]
    recs = [RequestRecord(i, 10, 5, 0.1 * (i + 1), 1.0, itl_s=[0.2]) for i in range(4)]
    cdf = plots.latency_cdf({"run": recs}, "ttft")
    assert list(cdf.data[0].y) == [0.25, 0.5, 0.75, 1.0] and cdf.data[0].x[0] == pytest.approx(100.0)
    ba = plots.before_after(ROWS[1], ROWS[0])
    assert [a.text for a in ba.layout.annotations] == ["×8.00", "×1.75"]
    with pytest.raises(CourseError, match="not in both"):
        plots.before_after({}, {})
    with pytest.raises(CourseError, match="metric"):
        plots.latency_cdf({"run": recs}, "queue")


# ---- issue 48: a tail percentile is drawn only where the sample carries it --------------------------------------
def _sweep(sizes=((1, 2), (2, 4), (4, 8), (8, 60))):
    """Summaries of made-up runs with these (concurrency, requests) pairs, as inferopt.bench.metrics writes them."""
    import random

    from inferopt.bench.metrics import summarize

    r, out = random.Random(48), []
    for c, n in sizes:
        recs = [RequestRecord(i, 100, 16, r.uniform(0.1, 0.5), r.uniform(0.6, 2.0), start_s=0.1 * i) for i in range(n)]
        out.append(summarize(recs, concurrency=c))
    return out


def _tails_from_few(fig, rows) -> list[str]:
    """Every point of a figure that is a tail percentile of a level whose sample cannot carry it."""
    from inferopt.bench.metrics import tail_withheld

    bad = []
    for tr in fig.data:
        for x, y in zip(tr.x, tr.y, strict=True):
            for s in rows:
                for col in [k for k in s if k.endswith("_ms") and tail_withheld(s, k)]:
                    if x == s["concurrency"] and y is not None and abs(y - round(s[col], 3)) < 1e-9:
                        bad.append(f"{tr.name}: {col} at concurrency {x} (n={s['completed']})")
    return bad


def _old_latency_figure(rows):
    """The figure as it was drawn before issue 48: every percentile at every level, whatever the sample."""
    import plotly.graph_objects as go

    rows = sorted(rows, key=lambda s: s["concurrency"])
    return go.Figure([go.Scatter(x=[s["concurrency"] for s in rows], y=[round(s[f"{m}_{p}_ms"], 3) for s in rows],
                                 name=p.upper()) for m in ("ttft", "tpot") for p in ("p50", "p95", "p99")])


def test_no_tail_percentile_is_drawn_from_too_few_requests():
    """Levels of 2, 4 and 8 requests (lab 4's sweep) get no P95 or P99 point; the level of 60 gets its P95 (60 >= 45)
    but no P99 (230 needed). The predicate rejects the figure as it was drawn before."""
    rows = _sweep()
    fig = plots.latency_vs_concurrency(rows, SLO(ttft_ms=700, tpot_ms=160))
    assert _tails_from_few(fig, rows) == []
    assert len(_tails_from_few(_old_latency_figure(rows), rows)) == 2 * (3 * 2 + 1)   # old: P95 x3, P99 x4, twice
    p95 = [t for t in fig.data if t.name == "P95"]
    assert [list(t.y) for t in p95] == [[None, None, None, round(rows[3][f"{m}_p95_ms"], 3)] for m in ("ttft", "tpot")]
    assert not [t for t in fig.data if t.name == "P99"]          # no level carries a P99: no line at all


def test_the_slowest_request_stands_in_and_says_why():
    rows = _sweep(((1, 2), (2, 4), (4, 8)))
    fig = plots.latency_vs_concurrency(rows, SLO(ttft_ms=700, tpot_ms=160))
    assert [t.name for t in fig.data] == ["P50", "MAX (n<45: no P95)", "P50", "MAX (n<45: no P95)"]
    top = fig.data[1]
    assert list(top.y) == [round(s["ttft_max_ms"], 3) for s in rows] and list(top.customdata) == [2, 4, 8]
    assert "the slowest of n=%{customdata}" in top.hovertemplate and "a P95 needs 45 requests" in top.hovertemplate
    assert [t.showlegend for t in fig.data] == [True, True, False, False]
    # a model's rows (no sample size) keep their percentiles: nothing to withhold, no MAX line
    assert "MAX" not in " ".join(t.name for t in plots.latency_vs_concurrency(ROWS).data)


def test_pareto_and_before_after_plot_the_slowest_where_a_p95_is_not_carried():
    rows = _sweep()
    fig = plots.pareto(rows, latency="tpot_p95_ms", slo_ms=160)
    assert fig.layout.xaxis.title.text == "tpot_max_ms (n=2-8<45: no P95)"       # one kind of number on the axis
    assert list(fig.data[0].x) == [round(s["tpot_max_ms"], 3) for s in rows]
    assert list(plots.pareto(rows[3:], latency="tpot_p95_ms").data[0].x) == [round(rows[3]["tpot_p95_ms"], 3)]
    assert list(plots.pareto(rows, latency="tpot_p50_ms").data[0].x) == [round(s["tpot_p50_ms"], 3) for s in rows]
    ba = plots.before_after(rows[0], rows[2])
    assert list(ba.data[0].x) == ["ttft_max_ms (n=2-8<45: no P95)", "tpot_max_ms (n=2-8<45: no P95)"]
    assert list(ba.data[1].y) == [round(rows[2][m], 3) for m in ("ttft_max_ms", "tpot_max_ms")]
    bare = [{k: v for k, v in s.items() if k != "tpot_max_ms"} for s in rows]
    with pytest.raises(CourseError, match="cannot carry a P95"):
        plots.pareto(bare, latency="tpot_p95_ms")
