"""Monitoring against the live engine: every metric name in the catalog, the rules and the
dashboard is one the engine really exposes; a real Prometheus scrapes it, runs every dashboard
query, agrees with our quantile arithmetic, and fires an alert when the SLO is set below what
the CPU engine can meet under load."""
import threading
import time

import pytest

from inferopt.monitoring import alerts, catalog, dashboard, load
from inferopt.monitoring import metrics_parse as mp
from inferopt.monitoring.prometheus_server import PrometheusServer
from inferopt.paths import ASSETS

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def live_snapshot(live_server):
    live_server.chat("Say hello.", max_tokens=4)      # histograms have observations
    return mp.parse_metrics(live_server.metrics_text())


def _engine_names(exprs):
    names = set()
    for e in exprs:
        names |= catalog.promql_metric_names(dashboard.resolve_variables(e))
    return {n for n in names if n.startswith(("vllm:", "process_"))}


def test_every_name_in_catalog_rules_and_dashboard_is_exposed(live_snapshot):
    exposed = live_snapshot.sample_names
    catalog_names = {m["metric"] for m in catalog.metrics(source="vllm")}
    for m in catalog.metrics(source="vllm"):
        suffixes = ("_bucket", "_count", "_sum") if m["type"] == "histogram" else ("",)
        for s in suffixes:
            assert m["metric"] + s in exposed, m["metric"] + s
        assert live_snapshot.types[m["metric"] + suffixes[0]] == m["type"], m["metric"]
    rule_exprs = [r["expr"] for r in alerts.build_rules()["groups"][0]["rules"]]
    dash_exprs = dashboard.queries(dashboard.build_dashboard())
    used = _engine_names(rule_exprs + dash_exprs)
    assert used, "no engine metric found in rules and dashboard"
    missing = sorted(used - exposed)
    assert not missing, f"rules/dashboard read metrics the engine does not expose: {missing}"
    assert catalog._base_names(used) <= catalog_names


def test_counters_end_in_total_and_old_names_are_gone(live_snapshot):
    for name, kind in live_snapshot.types.items():
        if kind == "counter" and name.startswith("vllm:"):
            assert name.endswith("_total"), name
    for old in ("vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds_bucket"):
        assert old not in live_snapshot.sample_names


def test_histogram_bounds_in_spec_match_the_engine(live_snapshot):
    for metric, bounds in alerts.load_spec()["histogram_bounds_s"].items():
        live = [b for b, _ in live_snapshot.buckets(metric)][:-1]
        assert live == [float(b) for b in bounds], metric
    assert 30.0 in [b for b, _ in live_snapshot.buckets("vllm:e2e_request_latency_seconds")]
    raw = [lab["le"] for lab, _ in live_snapshot.select("vllm:e2e_request_latency_seconds_bucket")]
    assert "30.0" in raw        # the text Prometheus 2.x keeps in the le label


def test_stored_sample_has_the_live_names(live_snapshot):
    sample = mp.parse_metrics((ASSETS / "monitoring" / "vllm-0.32-metrics-sample.txt").read_text())

    def vllm(names):
        return {n for n in names if n.startswith("vllm:")}

    assert vllm(sample.sample_names) == vllm(live_snapshot.sample_names)


def test_live_prometheus_scrapes_queries_and_fires(live_server):
    slo = alerts.SLOs(ttft_p95_s=0.05, tpot_p95_s=0.02)      # below what the CPU engine can meet
    rules = alerts.build_rules(slo, for_="3s", window="10s", only=["TTFTP95AboveSLO", "TPOTP95AboveSLO"])
    with PrometheusServer({"vllm": [live_server.base_url]}, rules=rules) as prom:
        workdir = prom.workdir
        target = prom.wait_for_target("vllm")
        assert 0 < target["last_scrape_duration_s"] < 1.0
        for q in dashboard.queries(dashboard.build_dashboard()):      # every dashboard query runs
            prom.query(dashboard.resolve_variables(q))
        for errors in alerts.ERROR_SOURCES:                              # and every canary gate
            for g in alerts.canary_gates(selector='job="vllm"', errors=errors):
                prom.query(g["promql"])
        box = {}
        t = threading.Thread(target=lambda: box.setdefault("r", load.run_load(
            live_server, concurrency=2, duration_s=8, max_tokens=16)))
        t0 = time.monotonic()
        t.start()
        try:
            fired = prom.wait_for_alert("TTFTP95AboveSLO", state="firing", timeout_s=45)
        finally:
            t.join()
        assert fired["alert"]["labels"]["severity"] == "warning"
        assert fired["first_pending_after_s"] is None or fired["seconds"] - fired["first_pending_after_s"] >= 2.5
        assert time.monotonic() - t0 < 45
        assert box["r"].completed > 0 and not box["r"].errors
        groups = prom.rule_groups()
        assert all(r["health"] == "ok" for g in groups for r in g["rules"])
        # our bucket interpolation gives Prometheus' answer on the same cumulative buckets
        time.sleep(1.5)                              # one more scrape after the load ended
        ours = mp.histogram_quantile(0.95, mp.parse_metrics(live_server.metrics_text())
                                     .buckets("vllm:time_to_first_token_seconds"))
        theirs = prom.query_value("histogram_quantile(0.95, sum by (le) (vllm:time_to_first_token_seconds_bucket))")
        assert theirs == pytest.approx(ours, rel=1e-9)
    assert not workdir.exists()
