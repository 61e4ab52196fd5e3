"""vLLM's rules at run time (inferopt/vllm_oracle/runtime.py): every command the command line emits over the public
cases is asked of the installed vLLM, and none is refused by its config classes for the checkpoint it names: the
plans of every scenario and of the public-case suite (tests/data/public_cases.yaml), the deployment command and every
change `diagnose` emits for the suite's cases with a deployment. The checker is shown to reject a wrong command
(--quantization awq_marlin on a BF16 checkpoint)."""
import contextlib
import copy
import io
import json
import tempfile
from pathlib import Path

import pytest
import yaml

from inferopt.__main__ import main
from inferopt.errors import CourseError
from inferopt.planning.planner import load_scenario, scenario_names
from inferopt.vllm_oracle import runtime

DATA = Path(__file__).parent / "data"
PUBLIC = yaml.safe_load((DATA / "public_cases.yaml").read_text(encoding="utf-8"))["cases"]
_MODEL = {c["id"]: c for c in yaml.safe_load((DATA / "public_cases_model.yaml").read_text(encoding="utf-8"))["cases"]}
for _c in PUBLIC:
    if "input_from" in _c:
        _c["input"] = _MODEL[_c["input_from"]]["input"]


def _merge(a: dict, b: dict) -> dict:
    out = copy.deepcopy(a)
    for k, v in b.items():
        out[k] = _merge(out.get(k, {}), v) if isinstance(v, dict) else v
    return out


def _cli_json(argv: list, files: dict | None = None) -> dict | None:
    """The command's --json answer through main(); None when it refused the input (one line, rc 2)."""
    out, err = io.StringIO(), io.StringIO()
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in (files or {}).items():
            (Path(tmp) / name).write_text(yaml.safe_dump(data), encoding="utf-8")
        argv = [a.replace("{tmp}", tmp) for a in argv]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv)
    return json.loads(out.getvalue()) if rc == 0 else None


def _emitted() -> list:
    """(where, the CLI's `vllm` answer) for every command `plan` and `diagnose` emit over the public cases."""
    out = []
    for name in scenario_names():
        out.append((f"plan {name}", "plan", _cli_json(["plan", name, "--json"])["vllm"]))
    for c in PUBLIC:
        if "plan" in c:
            p = dict(c["plan"])
            sc = _merge(load_scenario(p.pop("scenario")), p)
            got = _cli_json(["plan", "{tmp}/s.yaml", "--json"], {"s.yaml": sc})
            if got is not None:
                out.append((f"plan {c['id']}", "plan", got["vllm"]))
        elif (c.get("input") or {}).get("deployment", {}).get("model") and "argv" not in c:
            got = _cli_json(["diagnose", "--input", "{tmp}/c.yaml", "--json"], {"c.yaml": c["input"]})
            if got is not None and got["vllm"] is not None:
                out.append((f"diagnose {c['id']}", "diagnose", got["vllm"]))
    return out


def refusals(kind: str, answer: dict) -> list:
    """The emitted commands vLLM refuses in one CLI answer, as (what, refusal)."""
    if kind == "plan":
        return [("plan", answer["refusal"])] if answer["ok"] is False else []
    out = [("deployment", answer["verdict"].get("refusal"))] if answer["verdict"].get("ok") is False else []
    return out + [(cid, v["refusal"]) for cid, v in answer["changes"].items() if v["ok"] is False]


@pytest.fixture(scope="module")
def emitted():
    return _emitted()


def test_the_collection_covers_plans_and_diagnoses(emitted):
    kinds = {w.split()[0] for w, _, _ in emitted}
    assert kinds == {"plan", "diagnose"}, kinds
    assert sum(w.startswith("diagnose") for w, _, _ in emitted) >= 3
    assert all(a is not None for _, _, a in emitted)


def test_vllm_refuses_no_command_the_cli_emits_over_the_public_cases(emitted):
    bad = []
    for where, kind, answer in emitted:
        if kind == "plan":
            assert answer["ok"] is True, (where, answer)        # vLLM answered and accepted
        else:
            assert answer["verdict"]["ok"] is True, (where, answer["verdict"])
        bad += [(where, what, refusal) for what, refusal in refusals(kind, answer)]
    assert not bad, bad


def test_the_int4_change_is_another_checkpoint_checked_on_that_checkpoint(emitted):
    """INT4 AWQ/GPTQ is a checkpoint, not a flag: every INT4 change diagnose emits carries no --quantization, names
    the checkpoint kind (and, where the catalog ships one, the checkpoint), and vLLM checked the command that serves
    that checkpoint, not the deployment's BF16 one."""
    seen = 0
    for where, kind, answer in emitted:
        if kind != "diagnose":
            continue
        for cid, v in answer["changes"].items():
            if not cid.endswith("int4_awq_marlin"):
                continue
            seen += 1
            ck = v["checkpoint"]
            assert ck["weight_format"] == "int4" and "AWQ or GPTQ" in ck["kind"], (where, cid, v)
            assert v["command"] is None or "--quantization" not in v["command"], (where, cid, v)
            if ck["checkpoint"]:
                assert v["command"][2] == ck["checkpoint"] != answer["command"][2], (where, cid, v)
                assert v["ok"] is True and v["resolved"]["quantization"] in ("awq", "awq_marlin", "auto_awq",
                                                                             "gptq", "gptq_marlin"), (where, v)
    assert seen >= 1        # the public cases reach the INT4 change (memory candidate or technique)


def test_the_checker_rejects_a_reintroduced_awq_flag_on_a_bf16_checkpoint():
    """The old answer: diagnose's INT4 change as --quantization awq_marlin on the deployment's BF16 checkpoint (as
    memory_view.py and techniques.yaml emitted before). The collection's check counts it as a refused command."""
    dep = {"model": "llama-3.1-8b", "gpu": "H100", "max_model_len": 8192}
    old = runtime.check_changes(dep, [{"id": "memory int4_awq_marlin", "flags_add": ["--quantization", "awq_marlin"]},
                                      {"id": "int4_awq_marlin", "flags_add": ["--quantization", "awq_marlin"]}])
    assert [w for w, _ in refusals("diagnose", old)] == ["memory int4_awq_marlin", "int4_awq_marlin"]
    # the same change as a checkpoint: the command serves the AWQ checkpoint, with no flag, and vLLM accepts it
    ck = runtime.checkpoint_change("llama-3.1-8b", "int4")
    new = runtime.check_changes(dep, [{"id": "int4_awq_marlin", "flags_add": [], "checkpoint": ck}])
    assert refusals("diagnose", new) == []
    assert new["changes"]["int4_awq_marlin"]["command"] == ["vllm", "serve", ck["checkpoint"], "--max-model-len",
                                                            "8192"]


def test_the_checker_rejects_awq_marlin_on_a_bf16_checkpoint():
    """The wrong case: a diagnose answer whose change is --quantization awq_marlin on the BF16 Llama-3.1-8B."""
    dep = {"model": "llama-3.1-8b", "gpu": "H100", "max_model_len": 8192}
    wrong = runtime.check_changes(dep, [{"id": "int4", "flags_add": ["--quantization", "awq_marlin"]},
                                        {"id": "fp8", "flags_add": ["--quantization", "fp8"]}])
    got = refusals("diagnose", wrong)
    assert [w for w, _ in got] == ["int4"] and "Cannot find the config file for awq_marlin" in got[0][1]
    assert "AWQ or GPTQ" in wrong["changes"]["int4"]["needs_checkpoint"]
    # and on the AWQ checkpoint itself the same flag is accepted: the refusal is about the checkpoint
    awq = runtime.check_command(["vllm", "serve", "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4", "--max-model-len",
                                 "8192", "--quantization", "awq_marlin"], gpu="H100")
    assert awq.ok is True, awq


def test_precision_is_a_flag_or_a_checkpoint():
    bf16 = "meta-llama/Llama-3.1-8B"
    assert runtime.precision_flags(bf16, "fp8") == ["--quantization", "fp8"]
    assert runtime.precision_flags(bf16, "bf16") == [] == runtime.precision_flags(bf16, "auto")
    assert runtime.precision_flags("neuralmagic/Meta-Llama-3-70B-Instruct-FP8", "fp8") == []   # stored as FP8
    for want in ("int4", "int8"):
        with pytest.raises(CourseError, match="another checkpoint, not a flag"):
            runtime.precision_flags(bf16, want)
    with pytest.raises(CourseError, match="stored as INT4"):
        runtime.precision_flags("hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4", "fp8")
    # the checkpoint a precision change names: the catalog's INT4 checkpoint of the model where it ships one
    awq = "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4"
    assert runtime.checkpoint_change("llama-3.1-8b", "int4")["checkpoint"] == awq
    assert runtime.checkpoint_change(bf16, "int4")["checkpoint"] == awq
    none = runtime.checkpoint_change("qwen2.5-7b-instruct", "int4")
    assert none["checkpoint"] is None and "AWQ or GPTQ" in none["kind"]
    assert runtime.checkpoint_change("llama-3.1-8b", "fp8") is None          # a flag, not a checkpoint
    assert runtime.checkpoint_text(none) == "serve an AWQ or GPTQ INT4 checkpoint of this model; no --quantization flag"
    # a change to a checkpoint the course does not ship is not asked of vLLM, and says so
    got = runtime.check_changes({"model": "qwen2.5-7b-instruct", "gpu": "H100", "max_model_len": 8192},
                                [{"id": "int4", "flags_add": [], "checkpoint": none}])
    assert got["changes"]["int4"]["ok"] is None and "ships no such checkpoint" in got["changes"]["int4"]["note"]


def test_left_out_lists_only_what_the_command_does_not_set():
    v = runtime.Verdict(("vllm", "serve", "m", "--max-num-seqs", "8", "--no-enable-prefix-caching"), "H100", True,
                        resolved={"max_num_seqs": 8, "max_num_batched_tokens": 8, "enable_prefix_caching": False,
                                  "quantization": None})
    assert set(v.left_out) == {"--max-num-batched-tokens"}
    v2 = runtime.Verdict(("vllm", "serve", "m", "--max-num-batched-tokens", "64"), "H100", True,
                         resolved={"max_num_seqs": 64, "max_num_batched_tokens": 64})
    assert "the cap binds" in v2.left_out["--max-num-seqs"][1]
    refused = runtime.Verdict(("vllm", "serve", "m"), "H100", False, refusal="SchedulerConfig: x")
    assert refused.lines() == ["vLLM 0.32 refuses: `SchedulerConfig: x`"]
    with pytest.raises(CourseError, match="^vLLM 0.32 refuses: `SchedulerConfig: x`$"):
        refused.require()


def test_the_oracle_can_be_switched_off_and_says_so(monkeypatch):
    monkeypatch.setenv(runtime.ORACLE_ENV, "off")
    v = runtime.check_command(["vllm", "serve", "llama-3.1-8b", "--max-model-len", "1234"], gpu="L4")
    assert v.ok is None and "skipped" in v.lines()[0]


def test_lora_slots_follow_vllms_shapes():
    """lora_slot_bytes per layer and slot, from the shapes vLLM's create_lora_weights allocates (Llama-3.1-8B:
    hidden 4096, 32 heads x 128, 8 KV heads, MLP 14336): qkv 3 x r x 4096 + (4096 + 2 x 1024) x r, o r x 4096 + 4096 x r,
    gate_up 2 x r x 4096 + 2 x 14336 x r, down r x 14336 + 4096 x r."""
    from inferopt.planning import memory as M
    from inferopt.planning.model_specs import load_spec

    spec, r = load_spec("llama-3.1-8b"), 16
    per_layer = (3 * r * 4096 + 6144 * r) + (r * 4096 + 4096 * r) + (2 * r * 4096 + 2 * 14336 * r) + (r * 14336 + 4096 * r)
    assert M.lora_slot_bytes(spec, 1, r, 2) == per_layer * 32 * 2
    assert M.lora_slot_bytes(spec, 2, r, 2) < M.lora_slot_bytes(spec, 1, r, 2)     # the split halves shard by TP
    a = M.calculate("llama-3.1-8b", "H100", max_model_len=8192)
    b = M.calculate("llama-3.1-8b", "H100", max_model_len=8192, max_loras=4, max_lora_rank=64)
    assert b.kv_budget_bytes_per_gpu < a.kv_budget_bytes_per_gpu and b.lora_gib_per_gpu > 0


def test_the_memory_widget_asks_vllm_about_its_command():
    """The widget's command goes through the oracle on demand: FP8 weights of the BF16 Llama-3-70B carry
    --quantization fp8 and vLLM accepts them at TP 8; INT4 names the checkpoint to get instead of a flag."""
    from inferopt.widgets.memory_widget import MemoryWidget

    w = MemoryWidget(model="llama-3-70b", gpu="H100-SXM-80GB", tp=8, weight_format="fp8", kv_dtype="fp8")
    cmd = w.command()
    assert cmd[2] == "meta-llama/Meta-Llama-3-70B" and cmd[3:5] == ["--quantization", "fp8"]
    v = w.check_with_vllm()
    assert v.ok is True and v.resolved["quantization"] == "fp8" and "accepts" in w.vllm_w.value
    w.set(weight_format="int4")
    assert w.vllm_w.value == "" and w.check_with_vllm() is None and "another checkpoint" in w.vllm_w.value


def test_the_decision_widget_asks_vllm_about_the_commands_it_emits():
    """On demand, the decision widget's diagnosis goes through the oracle: the deployment's command and each change,
    in one line each; without a deployment it says what to choose."""
    from inferopt.widgets.decision_widget import DecisionWidget

    w = DecisionWidget()
    assert w.check_with_vllm() is None and "model" in w.vllm_w.value
    w.oom_w.value = True
    w.deployment_w.model_w.value = "llama-3.1-8b"
    w.deployment_w.gpu_w.value = "A100-SXM-80GB"
    checked = w.check_with_vllm()
    assert checked["verdict"]["ok"] is True and checked["changes"], checked
    assert "vLLM checked the deployment&#x27;s command" in w.vllm_w.value
    # the INT4 change is the AWQ checkpoint, checked as served (no --quantization flag on the BF16 one)
    for cid, v in checked["changes"].items():
        assert v["ok"] is True, (cid, v)
    assert any(v.get("checkpoint") for v in checked["changes"].values()), checked["changes"]


def test_int8_w8a8_is_a_checkpoint_the_change_names_and_vllm_accepts():
    """W8A8 (INT8) needs a quantized checkpoint, as INT4 does: the change names the catalog's INT8 W8A8 checkpoint of
    Llama-3.1-8B (RedHatAI/...-quantized.w8a8, cited in assets/models/index.yaml) and is checked on it. The old
    answer, --quantization compressed-tensors on the BF16 checkpoint (techniques.yaml's flag), is refused."""
    from inferopt.diagnosis import knowledge

    w8a8 = "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8"
    ck = runtime.checkpoint_change("llama-3.1-8b", "int8")
    assert ck["checkpoint"] == w8a8 and runtime.checkpoint_format(w8a8) == "int8"
    assert runtime.checkpoint_text(ck).startswith(f"serve {w8a8}, an INT8 W8A8 checkpoint")
    tech = next(t for t in knowledge.techniques() if t.id == "w8a8_smoothquant")
    assert tech.checkpoint == "int8" and not tech.enable_flags
    dep = {"model": "llama-3.1-8b", "gpu": "H100", "max_model_len": 8192}
    got = runtime.check_changes(dep, [{"id": "w8a8", "flags_add": [], "checkpoint": ck},
                                      {"id": "old", "flags_add": ["--quantization", "compressed-tensors"]}])
    assert got["changes"]["w8a8"]["ok"] is True, got["changes"]["w8a8"]
    assert got["changes"]["w8a8"]["command"] == ["vllm", "serve", w8a8, "--max-model-len", "8192"]
    assert got["changes"]["w8a8"]["resolved"].get("quantization") == "compressed-tensors"
    assert got["changes"]["old"]["ok"] is False and "INT8 W8A8" in got["changes"]["old"]["needs_checkpoint"]
