"""Alert rules from the SLOs (seed §6.2), proven with Debian's promtool (check + unit tests that
fire on a breaking series and stay quiet on a good one), and the metrics catalog (§6.1)."""
import copy

import pytest
import yaml

from inferopt.errors import CourseError
from inferopt.monitoring import alerts, catalog, promtool


def test_catalog_three_layers_cover_the_seed():
    data = catalog.load_catalog()
    assert [lay["id"] for lay in data["layers"]] == ["infrastructure", "service", "business"]
    seeds = {m["seed"] for m in catalog.metrics()}
    for item in ("GPU 利用率(per GPU)", "GPU 显存使用率", "GPU 温度", "网络带宽(IB)", "QPS / 实例",
                 "TTFT 分位线(P50, P95, P99)", "TPOT 分位线(P50, P95, P99)", "请求队列长度", "KV Cache 利用率",
                 "业务成功率", "用户停留时长(流式输出场景)", "内容质量(人工抽样)"):
        assert item in seeds, item
    dcgm = {m["metric"] for m in catalog.metrics(source="dcgm")}
    assert {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_TEMP"} <= dcgm
    assert all(m["source"] == "app" for m in catalog.metrics(layer="business"))
    # every counter name ends in _total (checked against the live engine in test_monitoring_live)
    assert all(m["metric"].endswith("_total") for m in catalog.metrics() if m["type"] == "counter")


def test_catalog_schema_rejects_bad_data():
    data = copy.deepcopy(catalog.load_catalog())
    data["layers"][0]["metrics"][0]["type"] = "summaryish"
    with pytest.raises(CourseError, match="metrics_catalog"):
        catalog.validate(data, "metrics_catalog")
    spec = copy.deepcopy(alerts.load_spec())
    spec["alerts"][0]["severity"] = "page-everyone"
    with pytest.raises(CourseError, match="alerts"):
        catalog.validate(spec, "alerts")


def test_promql_metric_names():
    expr = ('(sum by (instance) (increase(vllm:e2e_request_latency_seconds_count{job="vllm"}[5m])) - '
            'sum by (instance, le) (increase(vllm:e2e_request_latency_seconds_bucket{le=~"30(\\\\.0)?"}[5m]))) > 0 '
            'or on (instance) changes(process_start_time_seconds[10m]) > 1e9')
    assert catalog.promql_metric_names(expr) == {"vllm:e2e_request_latency_seconds_count",
                                                 "vllm:e2e_request_latency_seconds_bucket",
                                                 "process_start_time_seconds"}
    assert catalog.base_name("vllm:e2e_request_latency_seconds_bucket") == "vllm:e2e_request_latency_seconds"


def test_rules_follow_the_seed_table():
    rules = alerts.build_rules()["groups"][0]["rules"]
    got = {r["alert"]: (r["labels"]["severity"], r["for"]) for r in rules}
    assert got == {"TTFTP95AboveSLO": ("warning", "5m"), "TPOTP95AboveSLO": ("warning", "5m"),
                   "RequestSlowerThan30s": ("critical", "0m"), "GPUMemoryAbove95": ("critical", "1m"),
                   "InstanceOOM": ("critical", "0m")}
    by = {r["alert"]: r["expr"] for r in rules}
    assert "> 0.5" in by["TTFTP95AboveSLO"] and "> 0.05" in by["TPOTP95AboveSLO"]
    assert 'le=~"30(\\\\.0)?"' in by["RequestSlowerThan30s"]
    assert "DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) > 0.95" == by["GPUMemoryAbove95"]
    assert 'reason="OOMKilled"' in by["InstanceOOM"] and "process_start_time_seconds" in by["InstanceOOM"]
    # every series a rule reads is in the catalog
    names = {m["metric"] for m in catalog.metrics()}
    for expr in by.values():
        assert catalog._base_names(catalog.promql_metric_names(expr)) <= names, expr


def test_demo_durations_and_slos_are_parameters():
    rules = alerts.build_rules(alerts.SLOs(ttft_p95_s=0.05), for_="5s", window="15s")["groups"][0]["rules"]
    assert {r["for"] for r in rules} == {"5s"}
    assert "[15s]" in rules[0]["expr"] and "> 0.05" in rules[0]["expr"]
    with pytest.raises(CourseError, match="duration"):
        alerts.build_rules(for_="5 minutes")
    with pytest.raises(CourseError, match="nearest is 30"):
        alerts.SLOs(max_request_s=28)
    with pytest.raises(CourseError, match="fraction"):
        alerts.SLOs(gpu_memory_fraction=95)
    with pytest.raises(CourseError, match="unknown alert"):
        alerts.build_rules(only=["NoSuchAlert"])


def test_promtool_check_and_unit_tests_pass(tmp_path):
    paths = alerts.write_rules_and_tests(tmp_path)
    check = promtool.check_rules(paths["rules"])
    assert check.ok, check.output
    assert "SUCCESS: 5 rules found" in check.output
    res = promtool.test_rules(paths["tests"])
    assert res.ok, res.output
    tests = yaml.safe_load(paths["tests"].read_text())["tests"]
    assert len(tests) == 5
    for t in tests:   # each test expects a firing alert somewhere and a quiet evaluation somewhere
        assert any(c["exp_alerts"] for c in t["alert_rule_test"]), t["name"]
        assert any(not c["exp_alerts"] for c in t["alert_rule_test"]), t["name"]


def test_demo_rules_pass_promtool_check(tmp_path):
    p = alerts.write_rules_and_tests(tmp_path, alerts.SLOs(ttft_p95_s=0.05, tpot_p95_s=0.02),
                                     for_="5s", window="15s")
    assert set(p) == {"rules"}
    assert promtool.check_rules(p["rules"]).ok


@pytest.mark.parametrize("slo, rule_kw, failing", [
    (alerts.SLOs(ttft_p95_s=1.0), {}, "TTFTP95AboveSLO"),            # threshold too lax: never fires
    (alerts.SLOs(tpot_p95_s=0.01), {}, "TPOTP95AboveSLO"),           # too strict: the good one fires too
    (alerts.SLOs(gpu_memory_fraction=0.99), {}, "GPUMemoryAbove95"),
    (alerts.SLOs(), {"for_": "0m"}, "TTFTP95AboveSLO"),              # fires before 5 min
])
def test_promtool_tests_catch_a_wrong_rule(tmp_path, slo, rule_kw, failing):
    """The unit tests can fail: rules built from other SLOs/durations break the default tests."""
    paths = alerts.write_rules_and_tests(tmp_path)
    paths["rules"].write_text(alerts.rules_yaml(alerts.build_rules(slo, **rule_kw)))
    res = promtool.test_rules(paths["tests"])
    assert not res.ok
    assert "FAILED" in res.output and failing in res.output


def test_promtool_check_rejects_bad_promql(tmp_path):
    bad = alerts.build_rules()
    bad["groups"][0]["rules"][0]["expr"] = \
        "histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[5m]))"
    path = tmp_path / "bad.yml"
    path.write_text(alerts.rules_yaml(bad))
    res = promtool.check_rules(path)
    assert not res.ok and "FAILED" in res.output


def test_missing_promtool_names_the_fix(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("HOME", str(tmp_path))   # no ~/.local/bin/promtool either
    monkeypatch.delenv("INFEROPT_PROMTOOL", raising=False)
    with pytest.raises(CourseError, match="make tools") as exc:   # make setup does not install it (issue 51)
        promtool.promtool()
    assert "apt-get install -y --no-install-recommends prometheus" in str(exc.value)
    assert "without sudo" in str(exc.value) and "make preflight" in str(exc.value)


def test_alert_table_and_cli(tmp_path, capsys):
    from inferopt.__main__ import main

    rows = alerts.alert_table()
    assert [r["severity"] for r in rows] == ["warning", "warning", "critical", "critical", "critical"]
    assert "OOMKilled" in rows[-1]["why"]
    assert main(["alerts", "--out", str(tmp_path), "--ttft-p95-s", "0.25", "--check"]) == 0
    out = capsys.readouterr().out
    assert "SUCCESS" in out and "> 0.25" in (tmp_path / "rules.yml").read_text()


def test_canary_gates_read_catalogued_metrics():
    gates = alerts.canary_gates(alerts.SLOs(ttft_p95_s=0.4))
    assert [g["gate"] for g in gates] == ["TTFT P95", "TPOT P95", "requests > 30 s", "preemptions", "error rate"]
    assert gates[0]["threshold"] == 0.4 and 'version="canary"' in gates[0]["promql"]
    names = {m["metric"] for m in catalog.metrics()}
    for g in gates:
        assert catalog._base_names(catalog.promql_metric_names(g["promql"])) <= names, g["gate"]


def test_canary_gates_read_the_engine_error_rate_where_no_application_counts_it():
    app, engine = (alerts.canary_gates(alerts.SLOs(), errors=e)[-1]["promql"] for e in ("app", "engine"))
    assert "app_chat_requests_total" in app and "http_requests_total" not in app
    assert 'http_requests_total{job="vllm",version="canary",handler=~"/v1/(chat/)?completions",status!="2xx"}' in engine
    assert "or vector(0)" in engine          # no failed answer yet is 0 errors, not "no data"
    names = {m["metric"] for m in catalog.metrics()}
    assert catalog._base_names(catalog.promql_metric_names(engine)) <= names
    with pytest.raises(CourseError, match="'app'.*'engine'"):
        alerts.canary_gates(errors="gateway")


@pytest.mark.parametrize(("pass_if", "threshold", "value", "passed"), [
    ("below", 0.25, 0.2425, True), ("below", 0.25, 0.25, False), ("below", 0.25, 7.1, False),
    ("equal", 0, 0.0, True), ("equal", 0, 5.08, False), ("equal", 0, 1e-9, True),
    ("below", 0.25, None, False), ("below", 0.25, float("nan"), False), ("equal", 0, float("nan"), False),
])
def test_a_gate_passes_only_on_data_that_meets_it(pass_if, threshold, value, passed):
    assert alerts.gate_passes({"gate": "g", "pass_if": pass_if, "threshold": threshold}, value) is passed


def test_gate_thresholds_move_up_to_the_next_bucket_bound():
    on = alerts.slos_on_bucket_bounds(alerts.SLOs(ttft_p95_s=0.18, tpot_p95_s=0.04, max_request_s=30))
    assert (on.ttft_p95_s, on.tpot_p95_s, on.max_request_s) == (0.25, 0.05, 30)
    assert alerts.slos_on_bucket_bounds(alerts.SLOs(ttft_p95_s=0.5, tpot_p95_s=0.05)).ttft_p95_s == 0.5   # on a bound
    with pytest.raises(CourseError, match="above the last finite bucket"):
        alerts.bucket_bound_at_or_above("vllm:request_time_per_output_token_seconds", 100.0)


def test_a_threshold_in_ms_where_seconds_are_due_is_refused():
    """Issue 50: --ttft-p95-s 500 (a ms value) was accepted; a TTFT threshold at or above the whole-request
    one can never trip, so it is refused with the value in seconds to give."""
    with pytest.raises(CourseError, match=r"ttft_p95_s=500 s is not below max_request_s=30 s.*give 0\.5"):
        alerts.SLOs(ttft_p95_s=500)
    with pytest.raises(CourseError, match=r"tpot_p95_s=50 s .*give 0\.05"):
        alerts.SLOs(tpot_p95_s=50)
    assert alerts.SLOs(ttft_p95_s=0.5, tpot_p95_s=0.05).max_request_s == 30.0
