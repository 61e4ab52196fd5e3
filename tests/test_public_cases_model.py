"""Practitioner cases answered through the performance model (tests/data/public_cases_model.yaml): each
runs through `diagnose` (its model view) or, for a plan, through `predict`; the expert's answer is checked,
and for every kind the checker rejects a wrong answer."""
import copy
from pathlib import Path

import pytest
import yaml

from inferopt.diagnosis.decision import diagnose
from inferopt.performance.predict import predict

DATA = yaml.safe_load((Path(__file__).parent / "data" / "public_cases_model.yaml").read_text(encoding="utf-8"))["cases"]
KINDS = {"max_num_seqs", "frontend", "kv_reads", "compute_prefill", "enforce_eager", "tp_replicas", "unexplained",
         "littles_law"}


def run_case(case):
    if "predict" in case:
        return predict(**case["predict"])
    i = case["input"]
    return diagnose(i["metrics"], i["slos"], i["workload"], None, i["deployment"]).model


def check(case, ans) -> list[str]:
    """The ways the model's answer differs from the expert's (empty: agrees)."""
    e, bad = case["expect"], []
    if "predict" in case:
        s = case["slos"]
        met = ans.ttft_p95_ms <= s["ttft_p95_ms"] and ans.tpot_p95_ms <= s["tpot_p95_ms"]
        if met != e["slo_met"]:
            bad.append(f"SLO met {met} (TTFT P95 {ans.ttft_p95_ms:.0f} ms, TPOT P95 {ans.tpot_p95_ms:.1f} ms), "
                       f"expected {e['slo_met']}")
        return bad
    if not ans.get("ran"):
        return [f"the model did not run: {ans.get('why')}"]
    ids = [c["id"] for c in ans["candidates"]]
    if "binding_limit" in e and ans["binding_limit"] != e["binding_limit"]:
        bad.append(f"binding limit {ans['binding_limit']}, expected {e['binding_limit']}")
    if "binding_limit_not" in e and ans["binding_limit"] == e["binding_limit_not"]:
        bad.append(f"binding limit is {ans['binding_limit']}")
    if "explains" in e and ans["explains"] != e["explains"]:
        bad.append(f"explains={ans['explains']}, expected {e['explains']}")
    if "first_candidate" in e and (not ids or ids[0] != e["first_candidate"]):
        bad.append(f"first candidate {ids[:1]}, expected {e['first_candidate']}")
    bad += [f"candidates lack {c}" for c in e.get("candidates_has", []) if c not in ids]
    bad += [f"candidates offer {c}" for c in e.get("candidates_lacks", []) if c in ids]
    if "summary_has" in e and e["summary_has"] not in ans.get("summary", ""):
        bad.append(f"summary lacks {e['summary_has']!r}")
    return bad


def test_the_suite_has_twenty_sourced_cases_of_every_kind():
    assert len(DATA) >= 20 and len({c["id"] for c in DATA}) == len(DATA)
    assert {c["kind"] for c in DATA} == KINDS
    for c in DATA:
        assert len(c["source"]) > 30 and c["expert"] and c["expect"], c["id"]


@pytest.mark.parametrize("case", DATA, ids=[c["id"] for c in DATA])
def test_case_agrees_with_the_expert(case):
    assert check(case, run_case(case)) == []


def _wrong(case) -> dict:
    """The case with a wrong expected answer of its kind."""
    c = copy.deepcopy(case)
    e = c["expect"]
    if "slo_met" in e:
        e["slo_met"] = not e["slo_met"]
    elif "binding_limit" in e:
        e["binding_limit"] = "interconnect" if e["binding_limit"] != "interconnect" else "compute"
    elif "first_candidate" in e:
        e["first_candidate"] = "add_replica"
    elif e.get("explains") is False:
        e["explains"] = True
    else:
        e["candidates_has"] = [*e.get("candidates_has", []), "fp8_kv" if "fp8_kv" not in e.get("candidates_lacks", [])
                               else "api_servers"]
    return c


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_checker_rejects_a_wrong_answer_of_each_kind(kind):
    cases = [c for c in DATA if c["kind"] == kind]
    for case in cases:
        wrong = _wrong(case)
        assert check(wrong, run_case(wrong)), f"{case['id']}: a wrong answer passed"
