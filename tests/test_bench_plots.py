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
