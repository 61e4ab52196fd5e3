"""Practitioner cases of issue #28's kinds (tests/data/public_cases_oracle.yaml), each with its source and the
expert's first answer: start-up refusals and accepted values through the installed vLLM (inferopt/vllm_oracle),
hardware rules and checkpoint formats through the course's fast path. The checker is shown to reject a wrong
answer of each kind."""
import pytest
import yaml

from inferopt.paths import REPO_ROOT
from inferopt.planning import hardware
from inferopt.planning import memory as M
from inferopt.planning.model_specs import load_spec
from inferopt.vllm_oracle import client

CASES = yaml.safe_load((REPO_ROOT / "tests" / "data" / "public_cases_oracle.yaml").read_text())["cases"]
COMMANDS = [c for c in CASES if c["kind"] in ("refusal", "accepts")]


@pytest.fixture(scope="module")
def verdicts():
    got = client.check_pairs([(c["command"], c["gpu"]) for c in COMMANDS])
    return {c["id"]: v for c, v in zip(COMMANDS, got, strict=True)}


def answer(case: dict, verdicts: dict):
    """What the course (its oracle or its fast path) answers for a case, in the case's own terms."""
    if case["kind"] in ("refusal", "accepts"):
        return verdicts[case["id"]]
    if case["kind"] == "hardware":
        return hardware.supports(case["gpu"], case["rule"])
    return M.resolve_weight_format(load_spec(case["model"]), "auto")


def agrees(case: dict, got) -> bool:
    if case["kind"] == "refusal":
        return got["ok"] is False and case["says"] in got["refusal"]
    if case["kind"] == "accepts":
        return got["ok"] is True and all(got["resolved"].get(k) == v for k, v in case["resolved"].items())
    if case["kind"] == "hardware":
        return got is case["supports"]
    return got == case["format"]


def test_the_file_has_30_cases_of_every_kind_each_with_a_source():
    assert len(CASES) >= 30 and len({c["id"] for c in CASES}) == len(CASES)
    assert {c["kind"] for c in CASES} == {"refusal", "accepts", "hardware", "checkpoint"}
    assert all(c["source"] for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_the_course_gives_the_experts_answer(verdicts, case):
    got = answer(case, verdicts)
    assert agrees(case, got), (case, got)


WRONG = {  # one wrong expert answer per kind: the checker must reject it
    "refusal": ("mml-auto", {"says": "greater than the derived max_model_len"}),
    "accepts": ("util-above-one", {"resolved": {"gpu_memory_utilization": 1.2}}),
    "hardware": ("fp8-kv-t4", {"supports": True}),
    "checkpoint": ("awq-sized-int4", {"format": "bf16"}),
}


@pytest.mark.parametrize("kind", list(WRONG))
def test_the_checker_rejects_a_wrong_answer(verdicts, kind):
    cid, wrong = WRONG[kind]
    case = next(c for c in CASES if c["id"] == cid)
    bad = {**case, "kind": kind, **wrong}
    assert not agrees(bad, answer(case, verdicts)), bad
