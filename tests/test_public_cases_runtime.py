"""Issue 50, vLLM's rules at run time: practitioner cases (tests/data/public_cases_runtime.yaml), each sourced, answered
through the command line (`python -m inferopt memory|predict|plan ... --json`, its own main()), whose answers come
from the installed vLLM's config classes (inferopt/vllm_oracle/runtime.py). The checker is shown to reject the answer
the course gave before for every case."""
import contextlib
import copy
import io
import json
import re
import tempfile
from pathlib import Path

import pytest
import yaml

from inferopt.__main__ import main
from inferopt.planning.planner import load_scenario

CASES = yaml.safe_load((Path(__file__).parent / "data" / "public_cases_runtime.yaml").read_text(encoding="utf-8"))["cases"]
KINDS = {"resolved", "refusal", "precision", "lora", "context"}


def _merge(a: dict, b: dict) -> dict:
    out = copy.deepcopy(a)
    for k, v in b.items():
        out[k] = _merge(out.get(k, {}), v) if isinstance(v, dict) else v
    return out


def run_cli(argv: list, scenario: dict | None = None) -> dict:
    """{rc, json, error, command}: the command line's answer (one stderr line when it refuses)."""
    out, err = io.StringIO(), io.StringIO()
    with tempfile.TemporaryDirectory() as tmp:
        if scenario is not None:
            f = Path(tmp) / "scenario.yaml"
            f.write_text(yaml.safe_dump(scenario), encoding="utf-8")
            argv = [str(f) if a == "{scenario}" else a for a in argv]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv)
    lines = err.getvalue().strip().splitlines()
    if rc != 0:
        assert len(lines) == 1 and lines[0].startswith("error: "), err.getvalue()
        return {"rc": rc, "json": None, "error": lines[0][len("error: "):]}
    got = json.loads(out.getvalue())
    return {"rc": rc, "json": got, "error": None, "command": got.get("command_serve") or got["vllm"]["command"]}


def answer(case: dict) -> dict:
    sc = _merge(load_scenario(case["scenario"]), case.get("overrides", {})) if "scenario" in case else None
    return run_cli(list(case["argv"]), sc)


def _has_run(argv: list, run: list) -> bool:
    return any(argv[i:i + len(run)] == run for i in range(len(argv)))


def agrees(expect: dict, got: dict, case: dict) -> bool:
    if "error" in expect:
        return got["rc"] == 2 and re.search(expect["error"], got["error"] or "") is not None
    if "rc" in expect:
        return got["rc"] == expect["rc"]
    if got["rc"] != 0:
        return False
    v = got["json"]["vllm"]
    ok = (v["verdict"] if "verdict" in v else v)["ok"] is True        # diagnose: the deployment's verdict
    if expect.get("changes_accepted"):
        ok = ok and bool(v["changes"]) and all(c["ok"] is True for c in v["changes"].values())
    for cid, argv in expect.get("change_command", {}).items():
        ok = ok and cid in v["changes"] and v["changes"][cid]["command"] == [str(a) for a in argv]
    for cid, run in expect.get("change_command_has", {}).items():
        ok = ok and cid in v["changes"] and _has_run(v["changes"][cid]["command"] or [], [str(a) for a in run])
    for flag, val in expect.get("left_out", {}).items():
        ok = ok and v["left_out"].get(flag) == val
    for key, val in expect.get("resolved", {}).items():
        ok = ok and v["resolved"].get(key) == val
    if "command_has" in expect:
        ok = ok and _has_run(got["command"], expect["command_has"])
    if "command_lacks" in expect:
        ok = ok and not _has_run(got["command"], expect["command_lacks"])
    if "lora_takes_from_kv" in expect:
        ok = ok and _lora_takes_from_kv(case, got) is expect["lora_takes_from_kv"]
    return ok


def _lora_takes_from_kv(case: dict, got: dict) -> bool:
    """The KV budget with the LoRA flags is lower by exactly the LoRA slots than the same run without them."""
    argv = list(case["argv"])
    for flag in ("--max-loras", "--max-lora-rank"):
        i = argv.index(flag)
        del argv[i:i + 2]
    base = run_cli(argv)["json"]
    lora = got["json"]["lora_gib_per_gpu"]
    return lora > 0 and abs(base["kv_budget_gib_per_gpu"] - got["json"]["kv_budget_gib_per_gpu"] - lora) < 1e-9


@pytest.fixture(scope="module")
def answers():
    return {c["id"]: answer(c) for c in CASES}


def test_every_kind_has_sourced_cases():
    assert {c["kind"] for c in CASES} == KINDS
    assert len({c["id"] for c in CASES}) == len(CASES) >= 10
    assert all(c["source"] and c["expert"] and c["expect"] and c["old"] for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_the_cli_gives_the_experts_answer(answers, case):
    got = answers[case["id"]]
    assert agrees(case["expect"], got, case), (case["expect"], got["error"] or got["json"].get("vllm"))


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_the_checker_rejects_the_old_answer(answers, case):
    assert not agrees(case["old"], answers[case["id"]], case), case["old"]


def test_the_old_precision_commands_are_wrong_by_vllms_own_config_classes():
    """The old answers are not only different: vLLM serves the FP8 plan without its flag as BF16 (quantization None),
    and refuses INT4 as a flag on the BF16 checkpoint."""
    from inferopt.vllm_oracle.runtime import check_command

    base = ["vllm", "serve", "meta-llama/Llama-3.1-8B", "--max-model-len", "8192"]
    assert check_command(base, gpu="H100").resolved["quantization"] is None
    assert check_command([*base, "--quantization", "fp8"], gpu="H100").resolved["quantization"] == "fp8"
    v = check_command([*base, "--quantization", "awq_marlin"], gpu="H100")
    assert v.ok is False and "Cannot find the config file for awq_marlin" in v.refusal_line()


def test_the_int4_checkpoint_case_rejects_the_flag_on_the_bf16_checkpoint(answers):
    """The old diagnose answer (INT4 as --quantization awq_marlin on the BF16 checkpoint, refused by vLLM) fails
    the case's expectation, and it is the answer the old checker described."""
    case = next(c for c in CASES if c["id"] == "diagnose-int4-serves-an-awq-checkpoint")
    got = copy.deepcopy(answers[case["id"]])
    assert agrees(case["expect"], got, case)
    old = got["json"]["vllm"]["changes"]["int4_awq_marlin"]
    old.update(ok=False, command=[*got["json"]["vllm"]["command"], "--quantization", "awq_marlin"])
    assert not agrees(case["expect"], got, case) and agrees(case["old"], got, case)
