"""PrometheusServer without the engine: start on loopback, query, see a dead target as up == 0,
stop cleanly (process group gone, temporary folder deleted), and clear errors."""
import os

import pytest

from inferopt.errors import CourseError
from inferopt.monitoring.alerts import build_rules
from inferopt.monitoring.prometheus_server import PrometheusServer
from inferopt.serving.engine import free_port


def test_start_query_stop_with_a_dead_target():
    dead = f"127.0.0.1:{free_port()}"
    with PrometheusServer({"vllm": [dead]}, rules=build_rules(for_="1s", window="10s"), self_scrape=True) as prom:
        pid, workdir = prom.proc.pid, prom.workdir
        assert prom.startup_seconds < 30
        assert prom.query_value("vector(1) + 1") == 2.0
        groups = prom.rule_groups()
        assert [r["name"] for r in groups[0]["rules"]] == ["TTFTP95AboveSLO", "TPOTP95AboveSLO",
                                                          "RequestSlowerThan30s", "GPUMemoryAbove95", "InstanceOOM"]
        prom.wait_for_target("prometheus")
        import time
        deadline = time.monotonic() + 20
        while prom.query_value('up{job="vllm"}') is None and time.monotonic() < deadline:
            time.sleep(0.3)
        assert prom.query_value('up{job="vllm"}') == 0.0        # the signal behind an "instance down" page
        with pytest.raises(CourseError, match="not scraped successfully"):
            prom.wait_for_target("vllm", timeout_s=1.5)
        with pytest.raises(CourseError, match="bad_data|parse error"):
            prom.query("sum(")
    assert prom.proc is None and not workdir.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_target_labels_reach_the_series():
    """The canary's version label: Prometheus attaches it to every series of that target."""
    stable, canary = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    with PrometheusServer({"vllm": [stable, f"http://{canary}"]},
                          target_labels={f"http://{canary}": {"version": "canary"}, stable: {"version": "stable"}}) as prom:
        import time
        deadline = time.monotonic() + 20
        while len(prom.query('up{job="vllm"}')) < 2 and time.monotonic() < deadline:
            time.sleep(0.3)
        by_version = {r["metric"]["instance"]: r["metric"].get("version") for r in prom.query('up{job="vllm"}')}
        assert by_version == {stable: "stable", canary: "canary"}
        assert prom.query_value('up{version="canary"}') == 0.0
    with pytest.raises(CourseError, match="not among the targets"):
        PrometheusServer({"vllm": [stable]}, target_labels={canary: {"version": "canary"}})


def test_bad_rules_fail_at_start_with_the_log():
    bad = build_rules()
    bad["groups"][0]["rules"][0]["expr"] = "rate(("
    with pytest.raises(CourseError, match="exited during start-up"):
        PrometheusServer({"vllm": ["127.0.0.1:1"]}, rules=bad).start()


def test_missing_binary_and_bad_targets(monkeypatch):
    monkeypatch.setenv("INFEROPT_PROMETHEUS", "/nonexistent/prometheus")
    with pytest.raises(CourseError, match="INFEROPT_PROMETHEUS"):
        PrometheusServer({"vllm": ["127.0.0.1:1"]}).start()
    monkeypatch.delenv("INFEROPT_PROMETHEUS")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(CourseError, match="make tools"):
        PrometheusServer({"vllm": ["127.0.0.1:1"]}).start()
    with pytest.raises(CourseError, match="port"):
        PrometheusServer({"vllm": ["localhost"]})
    with pytest.raises(CourseError, match="dict"):
        PrometheusServer([])
