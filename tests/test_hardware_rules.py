"""The one hardware table (assets/hardware_rules.yaml, issue 19): every rule is checked against vLLM
0.32's own Python source in the venv (the CPU wheel ships the same files as the GPU build), the
decision engine follows it, and no other file keeps a copy of a compute-capability threshold."""
import ast
import re
from pathlib import Path

import pytest
import vllm

from inferopt.diagnosis import knowledge
from inferopt.diagnosis.decision import conflicts_for, diagnose
from inferopt.errors import CourseError
from inferopt.paths import ASSETS, REPO_ROOT
from inferopt.planning import hardware

VLLM = Path(vllm.__file__).parent


def _function_source(path: Path, dotted: str) -> str:
    """The source of Class.method or function in a vLLM file (one of several names split by ' / ')."""
    tree = ast.parse(path.read_text())
    src = path.read_text()
    parts = dotted.split(".")
    nodes = tree.body
    node = None
    for part in parts:
        node = next((n for n in nodes if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part), None)
        assert node is not None, f"{part} of {dotted} not found in {path}"
        nodes = node.body
    return ast.get_source_segment(src, node)


@pytest.mark.parametrize("rid", list(hardware.rules()))
def test_each_rule_is_what_vllms_source_says(rid):
    r = hardware.rule(rid)
    cap = round(r["min_capability"] * 10)
    found_number = False
    for s in r["source"]:
        path = VLLM / s["file"]
        assert path.exists(), f"{rid}: {s['file']} is not in vLLM {vllm.__version__}"
        for fn in s["function"].split(" / "):
            body = _function_source(path, fn.strip())
            if re.search(rf"return {cap}\b|capability\({cap}\)|< {cap}\b", body):
                found_number = True
    if rid != "fp8_kv":  # FP8 KV: the Triton backend accepts every capability (checked below)
        assert found_number, f"{rid}: no source function states {cap}"


def test_fp8_kv_rule_is_the_constructor_check_and_flashinfers_floor():
    """Read beside the generated table (tests/test_hardware_table.py CALLS them): the Triton backend
    accepts every capability in its class method, but its constructor refuses FP8 KV before SM89; FlashInfer
    holds FP8 KV from SM80."""
    body = _function_source(VLLM / "v1/attention/backends/triton_attn.py", "TritonAttentionImpl.__init__")
    assert 'kv_cache_dtype.startswith("fp8")' in body and "has_device_capability(89)" in body
    fi = _function_source(VLLM / "v1/attention/backends/flashinfer.py", "FlashInferBackend.supports_compute_capability")
    assert "DeviceCapability(8, 0)" in fi
    assert hardware.min_capability("fp8_kv") == 8.0


def test_token_budget_defaults_are_get_batch_defaults():
    body = _function_source(VLLM / "engine/arg_utils.py", "EngineArgs.get_batch_defaults")
    assert "160 * GiB_bytes" in body and "70 * GiB_bytes" in body and '"a100" not in device_name' in body
    for n in ("16384", "8192", "2048"):
        assert n in body
    assert hardware.batch_defaults("H100") == (8192, 1024)
    assert hardware.batch_defaults("H200") == (8192, 1024)
    assert hardware.batch_defaults("B200") == (16384, 1024)
    assert hardware.batch_defaults("A100") == (2048, 256)   # 80 GB but an A100
    assert hardware.batch_defaults("L40S") == (2048, 256)
    assert hardware.batch_defaults("cpu") == (2048, 128)


def test_gpu_generations():
    assert hardware.fp8_mode("T4") == "w8a16" and hardware.fp8_mode("A100") == "w8a16"
    assert hardware.fp8_mode("H100") == "w8a8" and hardware.fp8_mode("L4") == "w8a8"
    assert hardware.fp8_mode("V100") is None and hardware.fp8_mode("CPU") is None
    assert hardware.supports("T4", "int4_marlin") and not hardware.supports("V100", "int4_marlin")
    assert not hardware.supports("V100", "fp8_kv") and not hardware.supports("T4", "fp8_kv")
    assert hardware.supports("A100", "fp8_kv")
    assert "fp8.py" in hardware.cite("fp8_w8a16")
    with pytest.raises(CourseError, match="not in assets/hardware_rules.yaml"):
        hardware.rule("fp4")


def test_techniques_read_their_numbers_from_the_table():
    needs = knowledge.load("techniques")["hardware_needs"]
    assert needs["fp8"]["min_compute_capability"] == hardware.min_capability("fp8_w8a16") == 7.5
    assert needs["fp8_compute"]["min_compute_capability"] == hardware.min_capability("fp8_w8a8") == 8.9
    assert needs["marlin"]["min_compute_capability"] == hardware.min_capability("int4_marlin") == 7.5


def test_t4_oom_gets_fp8_weight_only_and_no_marlin_pitfall():
    d = diagnose({"oom": True}, {"ttft_p95_ms": 500}, {"model_weights_gib": 14, "gpu_type": "T4", "num_gpus": 1})
    assert d.techniques[0] == "fp8" and "int4_awq_marlin" in d.techniques
    assert not any(c["id"] == "int4_no_marlin_large_batch" for c in d.conflicts)
    assert conflicts_for(["int4_awq_marlin"], {"gpu_type": "T4", "concurrency": 1}) == []
    # the real 8B model on one T4 (the calculator re-checks it): FP8 weight-only frees memory, labelled so
    d = diagnose({"oom": True}, {}, {"num_gpus": 1}, None, {"model": "llama-3.1-8b", "gpu": "T4", "max_model_len": 2048})
    fp8 = next(c for c in d.memory["candidates"] if c["id"] == "fp8")
    assert "weight-only" in fp8["text"] and fp8["will_start"]


def test_a1_fp8_for_prefill_speed_needs_fp8_tensor_cores():
    slo = {"ttft_p95_ms": 500}
    a100 = diagnose({"ttft_p95_ms": 2000}, slo, {"prompt_tokens": 8000, "gpu_type": "A100"})
    assert "fp8" not in a100.techniques
    reason = next(s["reason"] for s in a100.skipped if s["id"] == "fp8")
    assert "compressed_tensors_w8a8_fp8.py" in reason   # W8A8 is what speeds prefill
    h100 = diagnose({"ttft_p95_ms": 2000}, slo, {"prompt_tokens": 8000, "gpu_type": "H100"})
    assert "fp8" in h100.techniques


# ---------------------------------------------------------------- no stray copies
_CAP = re.compile(r"(?:capabilit\w*|\bcc\b|sm_?)\s*(?:[<>]=?|>=|of|from|below|above|\(|is)?\s*[=:]?\s*(\d\.\d|[5-9]\d|1[0-2]\d)\b",
                  re.IGNORECASE)


def _owned_texts():
    files = list((REPO_ROOT / "inferopt").rglob("*.py"))
    files += [p for p in ASSETS.glob("*.yaml") if p.name not in ("hardware_rules.yaml", "gpus.yaml")]
    files += list((ASSETS / "schemas").glob("*.json"))
    return files


def test_no_other_file_holds_a_capability_threshold():
    stray = []
    for p in _owned_texts():
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if ("min_compute_capability:" in line and p.suffix == ".yaml") or _CAP.search(line):
                stray.append(f"{p.relative_to(REPO_ROOT)}:{i}: {line.strip()}")
    assert not stray, "capability thresholds outside assets/hardware_rules.yaml:\n" + "\n".join(stray)


def test_the_stray_copy_check_finds_a_planted_copy():
    bad = ['needs: {min_compute_capability: 8.9}', 'if cc >= 8.9:', "compute capability >= 8.0",
           "FP8 needs compute capability 89"]
    for line in bad:
        assert _CAP.search(line) or "min_compute_capability:" in line, line
    assert not _CAP.search("gpu_marlin = hardware.supports(cc, 'int4_marlin')")
