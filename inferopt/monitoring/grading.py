"""Checks for lab 5: is a learner's alert rule valid, does it read real vLLM metrics, and does
their promtool test really tell a breaking series from a good one?

``check_rule_and_test(rule, test)`` returns a list of problems (empty = passed). The test must
(1) pass against the learner's rule, and (2) FAIL against two broken variants of it: one that
never fires (``vector(1) < 0``) and one that always fires where data exists (``>= 0``), so a
test that only checks one side, or checks nothing, is caught.
"""
from __future__ import annotations

import copy
import re
import tempfile
from pathlib import Path

import yaml

from inferopt import assets
from inferopt.monitoring.catalog import promql_metric_names
from inferopt.monitoring.metrics_parse import parse_metrics
from inferopt.monitoring.promtool import check_rules, test_rules

SAMPLE = "monitoring/vllm-0.32-metrics-sample.txt"


def exposed_names() -> set:
    """Sample names the vLLM 0.32 engine exposes (from the stored /metrics sample, which a live
    test keeps equal to the engine's)."""
    return parse_metrics(assets.text(SAMPLE)).sample_names


def _run(rule: dict, test: dict, folder: Path):
    (folder / "rules.yml").write_text(yaml.safe_dump({"groups": [{"name": "lab5", "rules": [rule]}]},
                                                     sort_keys=False), encoding="utf-8")
    t = dict(test, rule_files=["rules.yml"])
    (folder / "rules_test.yml").write_text(yaml.safe_dump(t, sort_keys=False), encoding="utf-8")
    return check_rules(folder / "rules.yml"), test_rules(folder / "rules_test.yml")


def check_rule_and_test(rule: dict, test: dict) -> list:
    """Problems with a learner's (rule, promtool test) pair; [] when everything holds."""
    problems = []
    if not isinstance(rule, dict) or not isinstance(test, dict):
        return ["rule and test must be dicts (a rule as in a rule file; a test file with 'tests')"]
    for key in ("alert", "expr", "for", "labels"):
        if key not in rule:
            problems.append(f"the rule needs '{key}'")
    if problems:
        return problems
    if rule["labels"].get("severity") not in ("warning", "critical"):
        problems.append("labels.severity must be 'warning' or 'critical'")
    names = promql_metric_names(rule["expr"])
    unknown = sorted(n for n in names if n not in exposed_names())
    if not names:
        problems.append("the expression reads no metric")
    if unknown:
        problems.append(f"the engine does not expose {unknown} (check /metrics: counters end in _total)")
    cases = [c for t in test.get("tests", []) for c in t.get("alert_rule_test", [])
             if c.get("alertname") == rule["alert"]]
    if not any(c.get("exp_alerts") for c in cases):
        problems.append("the test never expects the alert to fire")
    if not any(not c.get("exp_alerts") for c in cases):
        problems.append("the test never checks that the alert stays quiet")
    with tempfile.TemporaryDirectory(prefix="lab5-") as d:
        folder = Path(d)
        chk, res = _run(rule, test, folder)
        if not chk.ok:
            return problems + ["promtool check rules failed: " + chk.output.strip().replace(d + "/", "")]
        if not res.ok:
            return problems + ["promtool test rules failed against your rule: "
                               + res.output.strip().replace(d + "/", "")]
        never = dict(copy.deepcopy(rule), expr="vector(1) < 0")
        _, r1 = _run(never, test, folder)
        if r1.ok:
            problems.append("your test also passes for a rule that never fires: "
                            "expect the alert on the breaking series")
        unthresholded = re.sub(r"\s*(>|<|>=|<=|==|!=)\s*[0-9.e+-]+\s*$", "", rule["expr"])
        always = dict(copy.deepcopy(rule), expr=unthresholded + " >= 0")
        _, r2 = _run(always, test, folder)
        if r2.ok:
            problems.append("your test also passes for a rule that always fires: add a series that must stay quiet")
    return problems
