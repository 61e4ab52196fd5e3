"""The rollout trace as a table (chapter 06b, ``canary.gate_table``), from the gates ``alerts.canary_gates`` defines
and the fields ``rollout`` records; no engine, no Prometheus."""
import pytest

from inferopt.errors import CourseError
from inferopt.monitoring import alerts
from inferopt.serving import canary

SLO = alerts.SLOs(ttft_p95_s=0.348, tpot_p95_s=0.048)


def _step(weight, decision, *, over=0, n=4, preemptions=0.0, errors=0.0):
    gates = []
    for g in alerts.canary_gates(SLO, selector='job="vllm"', window="60s"):
        if g.get("metric"):
            row = {**g, "n": n, "n_within": None if n is None else n - over, "passed": n is not None and over < 2}
        else:
            value = {"preemptions": preemptions, "error rate": errors}.get(g["gate"], 0.0)
            row = {**g, "value": value, "passed": alerts.gate_passes(g, value)}
        gates.append(row)
    return {"weight": weight, "routed": {"canary": n or 0, "stable": 8}, "canary_requests": (n or 0) + 0.3,
            "gates": gates, "decision": decision}


def test_one_row_per_step_and_one_column_per_gate():
    text = canary.gate_table([_step(5, "promote", n=1), _step(50, "roll back", over=1, preemptions=3.0)], "Bad")
    title, _, header, rule, *rows = text.splitlines()
    assert title == ("**Bad** (pass if TTFT P95 ≤ 348 ms, TPOT P95 ≤ 48 ms, requests > 30 s = 0, preemptions = 0, "
                     "error rate < 0.001)")
    assert header.count("|") == rule.count("|") == 10 and "TTFT P95*" in header and "preemptions |" in header
    assert len(rows) == 2
    assert rows[0].startswith("| 1 | 5 % | 1 / 1.3 | ✅ 0 of 1 over |") and rows[0].endswith("**promote** |")
    # the failed gate is marked, the P95 gate shows its count over the threshold, the fraction its three decimals
    assert "| ✅ 1 of 4 over |" in rows[1] and "| ❌ 3.0 |" in rows[1] and "| ✅ 0.000 |" in rows[1]
    assert rows[1].endswith("**roll back** |")


def test_a_gate_that_read_nothing_says_no_data():
    st = _step(5, "roll back", n=None)
    st["gates"][-1].update(value=float("nan"), passed=False)     # Prometheus answered no series
    row = canary.gate_table([st], "t").splitlines()[-1]
    assert row.count("no data") == 3                              # both P95 gates and the error rate
    assert row.count("❌ no data") == 3 and "| ✅ 0.0 |" in row


def test_an_empty_trace_is_one_clear_line():
    with pytest.raises(CourseError, match="empty rollout trace"):
        canary.gate_table([], "t")
