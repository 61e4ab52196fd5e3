"""`memory` and `plan` answer with vLLM's refusal first ("vLLM 0.32 refuses: ...") where the engine would
refuse on the target GPU, with vLLM's own line: the config-stage refusals are held equal to what the
installed vLLM raises under that GPU (inferopt/vllm_oracle, target_platform), the FP8 KV cache refusal to
the attention backend's constructor line the hardware table recorded by calling it (test_hardware_table
keeps that table equal to the installed vLLM). Where vLLM accepts, the calculator does not refuse."""
import copy

import pytest

from inferopt.errors import CourseError
from inferopt.planning import hardware
from inferopt.planning import memory as m
from inferopt.planning.planner import load_scenario, make_plan
from inferopt.vllm_oracle import client

AWQ = "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4"
# (vLLM command, GPU, the calculator's model and arguments for the same deployment)
CASES = [
    (f"vllm serve {AWQ}", "V100", "llama-3.1-8b-instruct-awq-int4", {}),
    ("vllm serve meta-llama/Llama-3.1-8B --quantization fp8", "V100", "llama-3.1-8b", {"weight_format": "fp8"}),
    ("vllm serve meta-llama/Llama-3.1-8B --gpu-memory-utilization 1.2", "T4", "llama-3.1-8b",
     {"gpu_memory_utilization": 1.2}),
    (f"vllm serve {AWQ}", "T4", "llama-3.1-8b-instruct-awq-int4", {}),
    ("vllm serve meta-llama/Llama-3.1-8B --quantization fp8", "T4", "smollm2-135m-instruct", {"weight_format": "fp8"}),
]


@pytest.fixture(scope="module")
def verdicts():
    by_gpu = {}
    for cmd, gpu, *_ in CASES:
        by_gpu.setdefault(gpu, []).append(cmd)
    out = {}
    for gpu, cmds in by_gpu.items():
        for cmd, v in zip(cmds, client.check_commands(cmds, gpu=gpu), strict=True):
            out[(cmd, gpu)] = v
    return out


def _memory_line(model, gpu, kw):
    try:
        m.calculate(model, gpu, max_model_len=4096, **kw)
    except CourseError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("cmd,gpu,model,kw", CASES, ids=lambda x: x if isinstance(x, str) else None)
def test_memory_refuses_exactly_where_vllm_does_with_its_line(verdicts, cmd, gpu, model, kw):
    v = verdicts[(cmd, gpu)]
    assert v["ok"] is not None, v                      # vLLM's config checks ran under this GPU
    line = _memory_line(model, gpu, kw)
    if v["ok"]:
        assert line is None or not line.startswith("vLLM 0.32 refuses"), (cmd, gpu, line)
    else:
        assert line is not None and line.startswith(f"vLLM 0.32 refuses: {v['refusal']}"), (cmd, gpu, line, v)


@pytest.mark.parametrize("gpu", ["T4", "V100", "A100", "H100"])
def test_fp8_kv_refused_first_where_the_attention_backend_refuses(gpu):
    row = hardware.table()["attention"][hardware.gpu_catalog.resolve(gpu, "gpu")]
    line = _memory_line("smollm2-135m-instruct", gpu, {"kv_dtype": "fp8"})
    if row.get("fp8_refusal"):                         # T4, V100: TritonAttentionImpl.__init__ raises
        assert row["fp8"] is None and line == f"vLLM 0.32 refuses: {row['fp8_refusal']}"
    else:        # a backend holds FP8 KV (FlashInfer from Ampere; on Hopper which one is not determinable on a CPU)
        assert (row["fp8"] or row["fp8_not_determinable"]) and line is None
    # the order vLLM meets them: the quantization floor (config) before the attention backend (model init)
    if gpu == "V100":
        both = _memory_line("llama-3.1-8b", gpu, {"kv_dtype": "fp8", "weight_format": "fp8"})
        assert "quantization method fp8" in both


def test_plan_answers_with_the_refusal_first():
    """A plan whose flags vLLM refuses on its GPU is not planned: the planner says vLLM's line first."""
    sc = copy.deepcopy(load_scenario("llama3-70b-chat"))
    sc["requirements"].update(model="llama-3.1-8b-instruct-awq-int4", gpu="T4")
    sc["plan"].update(tensor_parallel_size=1, weight_format="auto", kv_cache_dtype="fp8")
    with pytest.raises(CourseError) as e:
        make_plan(sc)
    assert str(e.value).startswith("vLLM 0.32 refuses: TRITON_ATTN: FP8 KV cache is not supported")
    sc["requirements"]["gpu"] = "V100"
    with pytest.raises(CourseError) as e:
        make_plan(sc)
    assert str(e.value).startswith("vLLM 0.32 refuses: VllmConfig: The quantization method auto_awq")
    sc["requirements"]["gpu"] = "A100-SXM-80GB"           # vLLM accepts both there: a plan comes back
    assert make_plan(sc).command


def test_diagnose_answers_with_the_refusal_first():
    """A deployment vLLM would not start on its GPU is not diagnosed as if it ran: vLLM's line comes first."""
    from inferopt.diagnosis.decision import diagnose
    dep = {"model": "smollm2-135m-instruct", "gpu": "T4", "max_model_len": 2048, "kv_dtype": "fp8"}
    with pytest.raises(CourseError) as e:
        diagnose({"oom": True}, {}, {"num_gpus": 1}, None, dep)
    assert str(e.value).startswith("vLLM 0.32 refuses: TRITON_ATTN")
    d = diagnose({"oom": True}, {}, {"num_gpus": 1}, None, {**dep, "gpu": "A100"})   # FlashInfer holds FP8 KV
    assert d.memory is not None


def test_plans_carry_the_model_dtype_of_their_gpu_and_never_a_refused_kv_dtype():
    """bfloat16 where the GPU has it (what vLLM's --dtype auto picks there), float16 on a T4, stated as --dtype in
    every command, the same dtype the GPU flags of the serving layer give; never --kv-cache-dtype fp8 on a T4."""
    from inferopt.serving.gpu_flags import for_gpu

    for gpu in ("H100-SXM-80GB", "A100-SXM-80GB"):
        sc = copy.deepcopy(load_scenario("llama3-70b-chat"))
        sc["requirements"]["gpu"] = gpu
        plan = make_plan(sc)
        assert plan.dtype == "bfloat16" == for_gpu(gpu).dtype
        assert plan.command.flags[plan.command.flags.index("--dtype") + 1] == "bfloat16"
        assert hardware.table()["attention"][gpu]["dtype_auto"] == "bfloat16"   # what vLLM's auto resolves there
    sc = copy.deepcopy(load_scenario("llama3-70b-chat"))
    sc["requirements"].update(model="llama-3.1-8b-instruct-awq-int4", gpu="T4")
    sc["plan"].update(tensor_parallel_size=1, weight_format="auto", kv_cache_dtype="auto", max_model_len=8192)
    plan = make_plan(sc)
    flags = plan.command.flags
    assert plan.dtype == "float16" == for_gpu("T4", extra_args=flags).dtype
    assert flags[flags.index("--dtype") + 1] == "float16" and "--kv-cache-dtype" not in flags
