"""The installed vLLM as the oracle (inferopt/vllm_oracle): launch commands go through vLLM 0.32's own
parser and EngineArgs.create_engine_config on a catalog GPU (target_platform) or vLLM's CPU platform, in
a worker process; each refusal is vLLM's own message. The commands below are the issue's cases: each
refused one is refused for the reason vLLM states, each accepted one resolves to what vLLM derives."""
import json

import pytest

from inferopt.planning import hardware
from inferopt.vllm_oracle import client, engine_config, target_platform

M = "vllm serve llama-3.1-8b"       # Llama-3.1-8B's config.json (assets/models): max_position_embeddings 131072
SPEC_V0 = json.dumps({"model": "smollm2-135m-instruct", "num_speculative_tokens": 4, "disable_by_batch_size": 8})
SPEC_NGRAM = json.dumps({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4})
CASES = [  # (command, gpu, refused?, what vLLM's message or resolution must say)
    (M, "H100", False, {"max_model_len": 131072, "dtype": "bfloat16", "max_num_batched_tokens": 8192}),
    (M, "A100", False, {"max_num_batched_tokens": 2048, "max_num_seqs": 256}),   # the A100 exception
    (M, "V100", False, {"dtype": "float16"}),              # no BF16 below SM80: auto -> float16
    (M + " --max-model-len auto", "H100", False, {"max_model_len": 131072}),
    (M + " --max-model-len -1", "H100", False, {"max_model_len": 131072}),
    (M + " --max-model-len 200000", "H100", True, "greater than the derived max_model_len"),
    (M + " --gpu-memory-utilization 1.2", "H100", True, "less than or equal to 1"),
    (M + f" --speculative-config '{SPEC_V0}'", "H100", True, "disable_by_batch_size: Unexpected keyword argument"),
    (M + f" --speculative-config '{SPEC_NGRAM}'", "H100", False, {"speculative": {"method": "ngram",
                                                                                 "num_speculative_tokens": 4}}),
    (M + " --no-enable-chunked-prefill --max-num-batched-tokens 2048 --max-model-len 4096", "H100", True,
     "max_num_batched_tokens (2048) is smaller than max_model_len (4096)"),
    (M + " --quantization fp8", "V100", True, "Minimum capability: 75. Current capability: 70"),
    (M + " --quantization fp8", "T4", False, {"quantization": "fp8"}),
    (M + " --quantization awq_marlin", "H100", True, "Cannot find the config file for awq_marlin"),
    ("vllm serve llama-3-70b --tensor-parallel-size 8 --pipeline-parallel-size 2", "H100", True,
     "World size (16) is larger than the number of available GPUs (8)"),
    ("vllm serve llama-3-70b --tensor-parallel-size 8 --pipeline-parallel-size 2 --nnodes 2", "H100", False,
     {"tensor_parallel_size": 8, "pipeline_parallel_size": 2}),
    (M + " --max-model-len 4096", None, False, {"max_num_batched_tokens": 2048, "max_num_seqs": 128}),  # CPU
]


@pytest.fixture(scope="module")
def verdicts():
    return client.check_pairs([(c, g) for c, g, _, _ in CASES], use_cache=False)


@pytest.mark.parametrize("i", range(len(CASES)), ids=[f"{g}:{c[17:60]}" for c, g, _, _ in CASES])
def test_vllm_decides_each_case(verdicts, i):
    cmd, gpu, refused, want = CASES[i]
    v = verdicts[i]
    assert v["ok"] is (not refused), (cmd, gpu, v)
    if refused:
        assert want in v["refusal"], v["refusal"]
        assert "\n" not in v["refusal"] and engine_config.refusal_text(v).startswith("vLLM 0.32 refuses: ")
    else:
        got = {k: v["resolved"][k] for k in want}
        assert got == want, (cmd, gpu, v["resolved"])


def test_the_batch_defaults_vllm_resolves_are_the_hardware_tables(verdicts):
    """hardware_rules.yaml's token_budget_defaults row for each GPU is what get_batch_defaults gave."""
    for (cmd, gpu, refused, _), v in zip(CASES, verdicts, strict=True):
        if refused or cmd != M:
            continue
        want = hardware.batch_defaults(gpu) if gpu else hardware.batch_defaults(on_cpu=True)
        assert (v["resolved"]["max_num_batched_tokens"], v["resolved"]["max_num_seqs"]) == want, gpu


def test_the_target_platform_answers_from_the_catalog():
    h = target_platform.gpu_facts("H100")
    assert h["capability"] == (9, 0) and "H100" in h["name"] and h["total_memory"] > 70 * (1 << 30)
    assert target_platform.gpu_facts("V100")["capability"] == (7, 0)
    assert "a100" in target_platform.gpu_facts("A100")["name"].lower()   # get_batch_defaults' name test
    assert set(target_platform.NOT_RUN) >= {"free_memory_at_start", "cuda_kernel_queries", "attention_kernels"}


def test_a_command_without_a_model_or_with_an_unknown_one_is_one_line():
    from inferopt.errors import CourseError

    with pytest.raises(CourseError, match="no model"):
        engine_config.split_command("vllm serve --max-model-len 4096")
    with pytest.raises(CourseError, match="no config.json shipped"):
        engine_config.config_path("some-org/not-a-shipped-model")
    assert engine_config.split_command(["python", "-m", "vllm.entrypoints.openai.api_server", "--port", "8000",
                                        "--model", "llama-3.1-8b"]) == ["llama-3.1-8b", "--port", "8000"]
