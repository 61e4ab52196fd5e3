"""Which of the OOM techniques the hardware table rules out per GPU (planning.hardware.technique_verdict),
the answer chapter 01's exercise 2 prints: read from assets/hardware_rules.yaml only, so a regenerated
table changes the answer."""
import pytest

from inferopt.diagnosis import knowledge
from inferopt.errors import CourseError
from inferopt.planning import hardware
from inferopt.widgets.technique_table import technique_rows

IDX = knowledge.technique_index()
OOM = [r["id"] for r in technique_rows("oom")]


def verdicts(gpu):
    return {t: hardware.technique_verdict(IDX[t].enable_flags, gpu) for t in OOM}


def out(gpu):
    return sorted(t for t, v in verdicts(gpu).items() if v["ruled_out"])


def test_the_seven_oom_techniques_per_gpu_follow_the_table():
    cc = {g: hardware.capability(g) for g in ("A100", "T4", "V100")}
    # each verdict is the table's floor against the GPU's capability, not a typed list
    for gpu in cc:
        for t, v in verdicts(gpu).items():
            quant = [r for r in v["rules"] if r in hardware.rules()]
            if quant and "vllm_cuda" not in v["rules"]:
                assert v["ruled_out"] == all(cc[gpu] < hardware.min_capability(r) for r in quant), (gpu, t)
    assert out("A100") == []                                      # 8.0 meets every floor the seven touch
    assert "kv_cache_quant" in out("T4") and "fp8" not in out("T4") and "int4_awq_marlin" not in out("T4")
    assert "flash_attention" in out("T4")                         # vLLM picks TRITON_ATTN below 8.0
    assert set(out("V100")) >= {"int4_awq_marlin", "fp8", "kv_cache_quant", "w8a8_smoothquant"}
    assert "tensor_parallel" not in out("T4")                     # needs two GPUs, no generation


def test_a_different_table_gives_a_different_answer(monkeypatch):
    """The verdict reads the table: with the old FP8 KV floor (7.0) a T4 keeps the FP8 KV cache."""
    t = hardware.table()
    kv = {**t["kv_cache"], "fp8_kv": {**t["kv_cache"]["fp8_kv"], "min_capability": 7.0}}
    attention = {**t["attention"], "T4": {**t["attention"]["T4"], "auto": "FLASH_ATTN"}}
    monkeypatch.setattr(hardware, "table", lambda: {**t, "kv_cache": kv, "attention": attention})
    monkeypatch.setattr(hardware, "rules", lambda: {**t["quantization"], **kv})
    assert "kv_cache_quant" not in out("T4") and "flash_attention" not in out("T4")
    if "platform" in t:                                           # without the CUDA-build floor, V100 keeps PagedAttention
        monkeypatch.setattr(hardware, "table", lambda: {k: v for k, v in t.items() if k != "platform"})
        assert "paged_attention" not in out("V100") and "fp8" in out("V100")


def test_unknown_gpu_is_one_line():
    with pytest.raises(CourseError, match="unknown GPU"):
        hardware.technique_verdict(["--kv-cache-dtype", "fp8"], "Voodoo2")
