"""Every command the course emits goes through the installed vLLM (inferopt/vllm_oracle): the planner's
launch commands, the techniques' flags, diagnose's changes and the memory calculator's candidates for
deployments on several GPUs, the pitfalls' avoid_flags, the sized actions and the notebooks' engines
(as serving/gpu_commands builds them). vLLM's parser and EngineArgs.create_engine_config run on the
target GPU (target_platform); a command vLLM refuses fails here with vLLM's own message."""
import json

import pytest

from inferopt.diagnosis import knowledge
from inferopt.diagnosis.decision import diagnose
from inferopt.planning.planner import load_scenario, make_plan, scenario_names
from inferopt.serving import gpu_commands as G
from inferopt.vllm_oracle import client

BASE = "vllm serve llama-3.1-8b --max-model-len 8192"
# the INT4 changes are "serve an AWQ checkpoint": --quantization awq_marlin on the BF16 checkpoint is refused
# (VllmConfig: Cannot find the config file for awq_marlin), so they are checked on the AWQ checkpoint
AWQ = "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4"


def _base_for(flags: list) -> str:
    return f"vllm serve {AWQ} --max-model-len 8192" if "awq_marlin" in flags or "awq" in flags else BASE


def _emitted() -> list:
    """(where, argv, gpu) for every command the course emits."""
    out = []
    for name in scenario_names():
        req = load_scenario(name)["requirements"]
        cmd = make_plan(name).command.module_argv
        out.append((f"plan {name}", cmd, req["gpu"]))
    for tech, flags in G.technique_flags():
        out.append((f"technique {tech}", [*_base_for(flags).split(), *flags], "H100"))
    for p in knowledge.load("pitfalls")["pitfalls"]:
        # "<bf16 draft>" names a draft of the target's tokenizer; Llama-3.1-8B's config stands in for it (vLLM
        # checks the vocabularies match: SmolLM2's 49152 against Llama's 128256 is refused)
        flags = [f.replace("<bf16 draft>", "llama-3.1-8b") for f in p["avoid_flags"]]
        out.append((f"pitfall {p['id']}", [*_base_for(flags).split(), *flags], "H100"))
    for gpu in ("H100", "A100", "L4", "T4", "V100"):
        for case in ({"oom": True}, {"ttft_p95_ms": 2000, "tpot_p95_ms": 80, "preemptions": 5, "queue_len": 4}):
            d = diagnose(case, {"ttft_p95_ms": 500, "tpot_p95_ms": 50},
                         {"prompt_tokens": 3000, "output_tokens": 200, "concurrency": 64, "num_gpus": 2},
                         None, {"model": "llama-3.1-8b", "gpu": gpu, "max_model_len": 8192})
            for c in d.changes:
                if c["flags_add"]:
                    out.append((f"diagnose {gpu} {c['id']}", [*_base_for(c["flags_add"]).split(), *c["flags_add"]], gpu))
            for c in (d.memory or {}).get("candidates", []):
                out.append((f"memory {gpu} {c['id']}", [*_base_for(c["flags"]).split(), *c["flags"]], gpu))
    for where, kw in G.notebook_configurations():
        out.append((f"notebook {where}", G.gpu_command(kw, gpu="L4"), "L4"))
    return out


EMITTED = _emitted()
CHECKPOINTS = {AWQ: {"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128,
                                             "zero_point": True, "version": "gemm"}, "torch_dtype": "float16"}}


@pytest.fixture(scope="module")
def verdicts():
    pairs = [(argv, gpu) for _, argv, gpu in EMITTED]
    return client.check_pairs(pairs)


def test_the_collection_covers_every_kind():
    kinds = {w.split()[0] for w, _, _ in EMITTED}
    assert kinds == {"plan", "technique", "pitfall", "diagnose", "memory", "notebook"}
    assert len(EMITTED) > 40


# Commands vLLM refuses (or the oracle cannot decide) today, each with vLLM's reason and who fixes it. A listed
# command that vLLM accepts fails below, so the list cannot go stale.
KNOWN = {
    "technique w8a8_smoothquant (enable)": ("CompressedTensorsConfig.__init__() missing", "assets/techniques.yaml owner: "
                                            "--quantization compressed-tensors needs a W8A8 checkpoint (vLLM reads "
                                            "its config.json; the flag alone on a BF16 checkpoint is refused)"),
    "technique pd_disaggregation (enable)": ("num_stages", "oracle limitation: the KV-connector config reaches a "
                                             "stubbed CUDA extension on this CPU build (target_platform.NOT_RUN)"),
}


@pytest.mark.parametrize("i", range(len(EMITTED)), ids=[w for w, _, _ in EMITTED])
def test_vllm_accepts_every_command_the_course_emits(verdicts, i):
    where, argv, gpu = EMITTED[i]
    v = verdicts[i]
    if where in KNOWN:
        assert v.get("ok") is not True and KNOWN[where][0] in (v.get("refusal") or v.get("error") or ""), \
            f"{where}: vLLM now accepts it (or refuses for another reason): update KNOWN ({v})"
        return
    assert v.get("ok") is not False, f"{where} on {gpu}: vLLM 0.32 refuses: {v.get('refusal')}\n  {' '.join(argv)}"
    assert v.get("ok") is True, f"{where} on {gpu}: the oracle could not decide: {v}"


def test_the_old_recommendations_are_refused():
    """The test is not blind: what the course said before is refused with vLLM's message."""
    old = [([*BASE.split(), "--speculative-config", json.dumps({"method": "ngram", "num_speculative_tokens": 4,
                                                                  "disable_by_batch_size": 8})], "H100"),
           ([*BASE.split(), "--kv-cache-dtype", "fp8"], "T4"),
           ([*BASE.split(), "--quantization", "awq_marlin"], "H100"),
           ([*BASE.split(), "--speculative-config", json.dumps({"method": "ngram", "num_speculative_tokens": 4,
                                                                  "num_speculative_tokens_per_batch_size": [[2, 8, 4]]})],
            "H100")]
    got = client.check_pairs(old)
    assert "disable_by_batch_size: Unexpected keyword argument" in got[0]["refusal"]
    assert got[1]["ok"] is True   # FP8 KV on a T4 passes the config stage: the refusal is in the attention
    # backend's constructor, which the generated hardware table holds (tests/test_hardware_table.py)
    assert "Cannot find the config file for awq_marlin" in got[2]["refusal"]
    assert "first batch-size range must start at 1" in got[3]["refusal"]
