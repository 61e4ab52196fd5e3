"""Lab 5's checker: a good (rule, test) pair passes; tests that cannot fail, unknown metric names
and invalid rules are reported; the generated lab's check cells fail until the learner answers."""
import copy

import nbformat
from nbclient import NotebookClient

from inferopt.monitoring.grading import check_rule_and_test
from inferopt.paths import LABS

RULE = {"alert": "KVCacheNearlyFull", "expr": 'max by (instance) (vllm:kv_cache_usage_perc{job="vllm"}) > 0.9',
        "for": "2m", "labels": {"severity": "warning"}, "annotations": {"summary": "KV high on {{ $labels.instance }}"}}
TEST = {"evaluation_interval": "1m", "tests": [{
    "interval": "1m",
    "input_series": [{"series": 'vllm:kv_cache_usage_perc{job="vllm",instance="full:8000"}', "values": "0.97x10"},
                     {"series": 'vllm:kv_cache_usage_perc{job="vllm",instance="ok:8000"}', "values": "0.5x10"}],
    "alert_rule_test": [
        {"eval_time": "1m", "alertname": "KVCacheNearlyFull", "exp_alerts": []},
        {"eval_time": "5m", "alertname": "KVCacheNearlyFull", "exp_alerts": [
            {"exp_labels": {"severity": "warning", "instance": "full:8000"},
             "exp_annotations": {"summary": "KV high on full:8000"}}]}]}]}


def test_good_pair_passes():
    assert check_rule_and_test(RULE, TEST) == []


def test_one_sided_test_is_caught():
    # only the full instance is fed: an always-firing rule passes this test
    t = copy.deepcopy(TEST)
    t["tests"][0]["input_series"] = t["tests"][0]["input_series"][:1]
    problems = check_rule_and_test(RULE, t)
    assert any("always fires" in p for p in problems), problems


def test_wrong_name_and_bad_expectations():
    r = dict(RULE, expr='max by (instance) (vllm:gpu_cache_usage_perc{job="vllm"}) > 0.9')
    problems = check_rule_and_test(r, TEST)
    assert any("vllm:gpu_cache_usage_perc" in p for p in problems)
    t = copy.deepcopy(TEST)
    t["tests"][0]["alert_rule_test"] = t["tests"][0]["alert_rule_test"][:1]
    problems = check_rule_and_test(RULE, t)
    assert any("never expects the alert to fire" in p for p in problems)
    assert check_rule_and_test({"alert": "X"}, TEST)[0].startswith("the rule needs")
    bad = dict(RULE, expr="max by (instance) (vllm:kv_cache_usage_perc > 0.9")
    assert any("promtool check rules failed" in p for p in check_rule_and_test(bad, TEST))


def test_generated_lab_check_cells_fail():
    nb = nbformat.read(LABS / "lab5-monitoring-alerts.ipynb", as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True).execute()
    errors = [c for c in nb.cells if c.cell_type == "code"
              and any(o.get("output_type") == "error" for o in c.outputs)]
    checks = [c for c in nb.cells
              if c.cell_type == "code" and "assert" in c.source and "NotImplementedError" not in c.source]
    assert len(errors) >= 4
    assert all(any(o.get("output_type") == "error" for o in c.outputs) for c in checks)
