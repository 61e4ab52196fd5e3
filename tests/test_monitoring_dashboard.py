"""The Grafana dashboard JSON: stored copy up to date, importable structure, queries that read
only catalogued vLLM metrics (names checked against the live engine in test_monitoring_live.py)."""
import json

from inferopt.monitoring import catalog, dashboard


def test_stored_dashboard_is_up_to_date():
    stored = dashboard.STORED_PATH.read_text(encoding="utf-8")
    assert stored == dashboard.dashboard_json(), "run: .venv/bin/python -m inferopt dashboard --write"


def test_dashboard_structure_is_importable():
    d = json.loads(dashboard.STORED_PATH.read_text(encoding="utf-8"))
    for key in ("title", "uid", "schemaVersion", "panels", "templating", "time", "__inputs"):
        assert key in d, key
    assert d["__inputs"][0]["name"] == "DS_PROMETHEUS" and d["__inputs"][0]["pluginId"] == "prometheus"
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids)) >= 8
    cells = set()
    for p in d["panels"]:
        assert p["type"] in {"timeseries", "stat", "gauge"}
        assert p["datasource"] == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not (mine & cells), f"panel {p['id']} overlaps another"
        cells |= mine
        refs = [t["refId"] for t in p["targets"]]
        assert refs and len(refs) == len(set(refs))
        assert all(t["expr"].strip() for t in p["targets"])
    assert {v["name"] for v in d["templating"]["list"]} == {"job", "instance"}


def test_dashboard_reads_only_catalogued_engine_metrics():
    d = dashboard.build_dashboard()
    engine = {m["metric"] for m in catalog.metrics(source="vllm")}
    used = set()
    for q in dashboard.queries(d):
        used |= catalog._base_names(catalog.promql_metric_names(dashboard.resolve_variables(q)))
    assert used <= engine, used - engine
    # the service layer of §6.1 is on screen
    for name in ("vllm:time_to_first_token_seconds", "vllm:request_time_per_output_token_seconds",
                 "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:request_success_total"):
        assert name in used


def test_slo_lines_follow_the_slos():
    from inferopt.monitoring.alerts import SLOs

    d = dashboard.build_dashboard(SLOs(ttft_p95_s=0.3, tpot_p95_s=0.04))
    steps = {p["title"]: p["fieldConfig"]["defaults"]["thresholds"]["steps"] for p in d["panels"]}
    assert steps["TTFT quantiles (SLO line: P95 target)"][-1]["value"] == 0.3
    assert steps["TPOT quantiles (SLO line: P95 target)"][-1]["value"] == 0.04
