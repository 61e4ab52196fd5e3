"""The public-case suite (issue 19): practitioner cases from vLLM's docs and issue threads, each with
its source and the first answer an experienced vLLM user gives (tests/data/public_cases.yaml).
Each case runs through `diagnose` or `plan`; the expected answer is checked, and the checker itself
is shown to reject a wrong answer."""
import copy
import re
from pathlib import Path

import pytest
import yaml

from inferopt.diagnosis.decision import diagnose
from inferopt.errors import CourseError
from inferopt.planning.planner import load_scenario, make_plan

DATA = yaml.safe_load((Path(__file__).parent / "data" / "public_cases.yaml").read_text(encoding="utf-8"))["cases"]
# a case may take its input (and source) from a sourced case of the model's suite: `input_from: <its id>`
_MODEL = {c["id"]: c for c in yaml.safe_load((Path(__file__).parent / "data" / "public_cases_model.yaml")
                                            .read_text(encoding="utf-8"))["cases"]}
for _c in DATA:
    if "input_from" in _c:
        _c["input"] = _MODEL[_c["input_from"]]["input"]
        _c["source"] = ((_c["source"] + "; ") if "source" in _c else "") + _MODEL[_c["input_from"]]["source"] + (
            " (tests/data/public_cases_model.yaml " + _c["input_from"] + ")")
KINDS = {"hardware", "cost", "start", "topology", "inputs", "plan", "sample", "saturation", "model"}


def _merge(a: dict, b: dict) -> dict:
    out = copy.deepcopy(a)
    for k, v in b.items():
        out[k] = _merge(out.get(k, {}), v) if isinstance(v, dict) else v
    return out


def run_cli(case):
    """(answer, error) through the path a user takes: the case's input written to a file and read by
    `python -m inferopt diagnose --input FILE --json` (or the `alerts` command with the case's argv), run by the
    command line's own main(); the answer is the Diagnosis the JSON describes, the error its one stderr line."""
    import contextlib
    import io
    import json
    import tempfile

    from inferopt.__main__ import main
    from inferopt.diagnosis.report import Diagnosis

    out, err = io.StringIO(), io.StringIO()
    with tempfile.TemporaryDirectory() as tmp:
        if "argv" in case:
            argv = [a.replace("{tmp}", tmp) for a in case["argv"]]
        else:
            f = Path(tmp) / "case.yaml"
            f.write_text(yaml.safe_dump(case["input"]), encoding="utf-8")
            argv = ["diagnose", "--input", str(f), "--json"]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv)
    lines = err.getvalue().strip().splitlines()
    if rc != 0:
        assert len(lines) == 1 and lines[0].startswith("error: "), err.getvalue()
        return None, CourseError(lines[0][len("error: "):])
    if argv[0] != "diagnose":
        return None, None
    return Diagnosis(**json.loads(out.getvalue())), None


def run_case(case):
    """(answer, error): the Diagnosis or DeploymentPlan, or the CourseError it raised."""
    if case.get("cli"):
        return run_cli(case)
    try:
        if "plan" in case:
            p = dict(case["plan"])
            sc = _merge(load_scenario(p.pop("scenario")), p)
            return make_plan(sc), None
        i = case["input"]
        return diagnose(i.get("metrics", {}), i.get("slos", {}), i.get("workload"), i.get("techniques_on"),
                        i.get("deployment")), None
    except CourseError as exc:
        return None, exc


def check(case, ans, err) -> list[str]:
    """The ways the answer differs from the expert's (empty: agrees)."""
    e, bad = case["expect"], []
    if "error" in e:
        if err is None or not re.search(e["error"], str(err)):
            bad.append(f"expected an error matching {e['error']!r}, got {err or 'an answer'}")
        return bad
    if err is not None:
        return [f"unexpected error: {err}"]
    if e.get("answered"):   # a command that writes files (alerts): it ran, no error
        return bad
    if "command_has" in e:
        bad += [f"command lacks {f}" for f in e["command_has"] if f not in ans.command.flags]
        return bad
    ids = [c["id"] for c in ans.changes]
    if "first_flags" in e and ans.flags[:len(e["first_flags"])] != e["first_flags"]:
        bad.append(f"first change {ans.flags} is not {e['first_flags']}")
    if "first_id" in e and (not ids or ids[0] != e["first_id"]):
        bad.append(f"first change {ids[:1]} is not {e['first_id']}")
    if "first_kind" in e and (not ans.changes or ans.changes[0]["cost_kind"] != e["first_kind"]):
        bad.append(f"first change's kind is not {e['first_kind']}")
    if "last_id" in e and (not ans.actions or ans.actions[-1]["id"] != e["last_id"]):
        bad.append(f"last item is {[a['id'] for a in ans.actions][-1:]} not {e['last_id']}")
    if "change_order" in e:
        got = [i for i in ids if i in e["change_order"]]
        if got != e["change_order"]:
            bad.append(f"changes in order {got}, expected {e['change_order']}")
    if "action_order" in e:
        got = [a["id"] for a in ans.actions if a["id"] in e["action_order"]]
        if got != e["action_order"]:
            bad.append(f"actions in order {got}, expected {e['action_order']}")
    if "change_before" in e:
        a, b = e["change_before"]
        if a not in ids or b not in ids or ids.index(a) > ids.index(b):
            bad.append(f"{a} does not come before {b} in {ids}")
    if "techniques_order" in e and ans.techniques != e["techniques_order"]:
        bad.append(f"techniques {ans.techniques} != {e['techniques_order']}")
    bad += [f"{t} not recommended" for t in e.get("techniques_has", []) if t not in ans.techniques]
    bad += [f"{t} recommended" for t in e.get("techniques_lacks", []) if t in ans.techniques]
    conf = [c["id"] for c in ans.conflicts]
    bad += [f"pitfall {c} fires" for c in e.get("conflicts_lacks", []) if c in conf]
    bad += [f"pitfall {c} missing" for c in e.get("conflicts_has", []) if c not in conf]
    bad += [f"no warning says {w!r}" for w in e.get("warnings_has", []) if not any(w in x for x in ans.warnings)]
    for tid, text in e.get("skipped_cites", {}).items():
        s = next((s for s in ans.skipped if s["id"] == tid), None)
        if s is None or text not in s["reason"]:
            bad.append(f"{tid} not skipped citing {text}")
    if "next_has" in e and e["next_has"] not in ans.next_step:
        bad.append(f"next step lacks {e['next_has']!r}")
    bad += [f"next step lacks {t!r}" for t in e.get("next_has_all", []) if t not in ans.next_step]
    if e.get("no_flags") and (ans.flags or ans.flags_remove):
        bad.append(f"flags offered before the step is profiled: {ans.flags + ans.flags_remove}")
    if "next_lacks" in e and e["next_lacks"] in ans.next_step:
        bad.append(f"next step says {e['next_lacks']!r}")
    if "saturated" in e and (ans.saturation or {}).get("saturated") != e["saturated"]:
        bad.append(f"saturation {ans.saturation and ans.saturation.get('saturated')}, expected {e['saturated']}")
    if "fleet_instances" in e and ((ans.saturation or {}).get("fleet") or {}).get("instances") != e["fleet_instances"]:
        bad.append(f"fleet {((ans.saturation or {}).get('fleet') or {}).get('instances')}, expected {e['fleet_instances']}")
    for flag in e.get("flag_not_offered", []):
        if any(flag in c["flags_add"] for c in ans.changes):
            bad.append(f"offers {flag}")
    for flag in e.get("flag_offered", []):
        if not any(flag in c["flags_add"] for c in ans.changes):
            bad.append(f"does not offer {flag}")
    if "first_predicted" in e and (not ans.changes or "predicted" not in ans.changes[0]):
        bad.append("the first change carries no predicted after-metrics")
    if "requests_need" in e:
        need = [v["need"] for v in (ans.sample or {}).get("verdicts", []) if v["passed"] is None]
        if e["requests_need"] not in need:
            bad.append(f"no verdict asks for {e['requests_need']} requests (asks for {need})")
    if "warning_has" in e and not any(e["warning_has"] in w for w in ans.warnings):
        bad.append(f"no warning with {e['warning_has']!r}")
    if "branch" in e and ans.branch != e["branch"]:
        bad.append(f"branch {ans.branch} != {e['branch']}")
    und = [u["id"] for u in ans.undecided]
    bad += [f"{u} not undecided" for u in e.get("undecided_has", []) if u not in und]
    bad += [f"{u} asked for" for u in e.get("undecided_lacks", []) if u in und]
    if e.get("no_changes") and ans.changes:
        bad.append(f"changes offered without the facts: {ids}")
    for flags in e.get("not_offered", []):
        if any(c["flags_add"] == flags for c in ans.changes):
            bad.append(f"offers {flags}")
    if e.get("all_labelled"):
        items = ans.recommendations + ans.actions
        if not items or any(not i.get("cost_kind") or not i.get("cost_label") for i in items):
            bad.append("an item has no cost kind")
    if e.get("all_after_start"):
        mem_changes = [i for i in ans.recommendations + ans.actions if i.get("after")]
        if not mem_changes or any(not i["after"]["will_start"] for i in mem_changes):
            bad.append("a memory change after which vLLM does not start is offered")
    return bad


def test_the_new_kinds_are_answered_through_the_cli():
    """Issue 50's kinds (inputs checked for meaning, sample size, saturation) run the command a user runs."""
    new = [c for c in DATA if c["kind"] in ("sample", "saturation", "model") or c.get("issue") == 50]
    assert len(new) >= 10 and all(c.get("cli") for c in new)


def test_the_suite_has_30_sourced_cases_covering_every_kind():
    assert len(DATA) >= 30
    assert {c["kind"] for c in DATA} == KINDS
    for c in DATA:
        assert re.search(r"https://|vllm/\S+\.py", c["source"]), c["id"]
        assert c["expert"] and c["expect"], c["id"]
    assert len({c["id"] for c in DATA}) == len(DATA)


@pytest.mark.parametrize("case", DATA, ids=[c["id"] for c in DATA])
def test_public_case(case):
    ans, err = run_case(case)
    assert check(case, ans, err) == [], case["expert"]


def test_the_checker_rejects_wrong_answers():
    """Each kind of expectation fails on an answer that is not the expert's."""
    by_id = {c["id"]: c for c in DATA}
    wrong = [
        ("t4-oom-fp8-weight-only", {"first_flags": ["--quantization", "awq_marlin"]}),
        ("prefix-cache-low-hits-layout-first", {"first_id": "fp8"}),
        ("a100-16k-prompts-token-budget-first", {"first_kind": "hardware"}),
        ("16-gpus-two-nodes-pp", {"first_flags": ["--tensor-parallel-size", "16"]}),
        ("p99-below-p95", {"error": "no such error"}),
        ("no-slo-set-one", {"next_has": "All SLOs are met"}),
        ("t4-int4-small-batch-has-marlin", {"conflicts_has": ["int4_no_marlin_large_batch"]}),
        ("t4-int4-small-batch-has-marlin", {"warnings_has": ["does not load it on a T4"]}),
        ("v100-int4-batch-16-no-marlin", {"conflicts_has": ["int4_no_marlin_large_batch"]}),   # the old answer
        ("start-remedy-order", {"change_order": ["start_tp", "start_kv_dtype", "start_max_model_len"]}),
        ("plan-writes-max-model-len", {"command_has": ["--pipeline-parallel-size"]}),
    ]
    # issue 50: each new kind, checked against the answer the CLI gave before it (the old answer is wrong)
    wrong += [
        ("context-longer-than-the-model", {"branch": "A"}),             # it was diagnosed, not refused
        ("alert-threshold-in-ms", {"answered": True}),                   # 500 s was written into the rules
        ("ttft-slo-above-the-whole-request", {"branch": "A"}),
        ("aiperf-tutorial-20-requests", {"next_has": "All SLOs are met"}),
        ("vllm-bench-12-prompts", {"next_has": "All SLOs are met"}),
        ("rate-sweep-past-the-roof", {"saturated": False}),                # no roof was named before
        ("rate-sweep-past-the-roof", {"fleet_instances": 5}),              # sized on the roof (3.45 req/s), not goodput
        ("concurrency-still-rising", {"saturated": True}),
        ("p99-slo-from-200-requests", {"next_has": "All SLOs are met"}),
        ("prompt-plus-output-past-max-model-len", {"branch": "B"}),
        ("model-eager-left-on", {"first_id": "speculative_decoding"}),   # the tree's answer before the model's joined
        ("model-tp8-for-a-gpu-sized-model", {"no_changes": True}),
        ("model-seq-cap-binds", {"no_changes": True}),
        # before: the unexplained run got the tree's spec-decode flags and no gap; the ranked change named no
        # branch, limit or fit
        ("model-unexplained-measure-with-the-gap", {"first_flags": ["--speculative-config"]}),
        ("model-unexplained-measure-with-the-gap", {"next_has": "Apply"}),
        ("model-change-names-branch-limit-and-fit", {"next_lacks": "Decision tree branch"}),
    ]
    for cid, exp in wrong:
        case = {**by_id[cid], "expect": exp}
        ans, err = run_case(case)
        assert check(case, ans, err), f"{cid}: the wrong expectation {exp} was accepted"
