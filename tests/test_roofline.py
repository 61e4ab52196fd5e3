"""inferopt.planning.roofline: decode-step bytes and FLOPs by hand, the ridge point, the bound."""
import pytest

from inferopt.errors import CourseError
from inferopt.planning import gpu_catalog
from inferopt.planning import roofline as R
from inferopt.planning.model_specs import load_spec


def test_decode_step_by_hand_for_llama_8b():
    spec = load_spec("llama-3.1-8b")
    p = spec.params()
    s = R.decode_step("llama-3.1-8b", batch=4, context_tokens=1000)
    # weights in bf16 read once; KV: 2 (K and V) x 32 layers x 8 KV heads x 128 x 2 bytes = 131,072 B a token
    assert s.weight_bytes == p.total * 2
    assert s.kv_bytes == 4 * 1000 * 131_072
    # FLOPs: 2 per matmul weight (untied: linear + LM head) + 4 x layers x heads x head_dim x context
    assert s.flops == 4 * (2 * (p.linear + p.lm_head) + 4 * 32 * 32 * 128 * 1000)
    assert s.intensity == pytest.approx(s.flops / (s.weight_bytes + s.kv_bytes))


def test_batch_one_bf16_intensity_is_about_one_flop_per_byte():
    s = R.decode_step("llama-3-70b", 1, 0)
    assert 0.9 < s.intensity < 1.05           # 2 FLOPs per weight over 2 bytes per weight
    s32 = R.decode_step("smollm2-135m-instruct", 1, 0, weight_bytes_per_param=4)
    assert 0.45 < s32.intensity < 0.55         # float32: half that


def test_ridge_point_from_the_gpu_table():
    peak, bw = R.gpu_roof(gpu_catalog.entry("H100"))
    assert peak == pytest.approx(989.4e12) and bw == pytest.approx(3350e9)
    assert R.ridge_point(peak, bw) == pytest.approx(295.3, abs=0.1)
    with pytest.raises(CourseError, match="fp8_dense_tflops"):
        R.gpu_roof(gpu_catalog.entry("A100"), "fp8")       # no FP8 tensor cores: no fp8 figure


def test_decode_is_memory_bound_at_small_batch_and_bound_switches_at_the_ridge():
    peak, bw = R.gpu_roof(gpu_catalog.entry("H100"))
    one = R.decode_step("llama-3.1-8b", 1, 0)
    assert R.bound(one, peak, bw) == "memory"
    assert R.min_step_time(one, peak, bw) == pytest.approx(one.bytes_moved / bw)
    b = R.crossover_batch("llama-3.1-8b", 0, peak, bw)
    assert b is not None and 250 < b < 350
    assert R.bound(R.decode_step("llama-3.1-8b", b, 0), peak, bw) == "compute"
    assert R.bound(R.decode_step("llama-3.1-8b", b - 1, 0), peak, bw) == "memory"
    big = R.decode_step("llama-3.1-8b", b * 4, 0)
    assert R.min_step_time(big, peak, bw) == pytest.approx(big.flops / peak)


def test_long_context_keeps_decode_memory_bound_at_any_batch():
    peak, bw = R.gpu_roof(gpu_catalog.entry("H100"))
    # 1,000 tokens of GQA KV per request: the KV reads grow with the batch like the FLOPs do
    assert R.crossover_batch("llama-3.1-8b", 1000, peak, bw) is None
    assert R.decode_step("llama-3.1-8b", 4096, 1000).intensity < R.ridge_point(peak, bw)


def test_measured_time_gives_effective_bandwidth_and_flops():
    s = R.decode_step("smollm2-135m-instruct", 1, 200, weight_bytes_per_param=4, kv_bytes_per_value=4)
    assert R.effective_bandwidth(s, 0.05) == pytest.approx(s.bytes_moved / 0.05)
    assert R.achieved_flops(s, 0.05) == pytest.approx(s.flops / 0.05)


@pytest.mark.parametrize("bad", [
    lambda: R.decode_step("llama-3.1-8b", 0, 10), lambda: R.decode_step("llama-3.1-8b", 1.5, 10),
    lambda: R.decode_step("llama-3.1-8b", 1, -1), lambda: R.decode_step("llama-3.1-8b", 1, 1, weight_bytes_per_param=0),
    lambda: R.ridge_point(0, 1), lambda: R.effective_bandwidth(R.decode_step("llama-3.1-8b", 1, 1), 0),
    lambda: R.decode_step("no-such-model", 1, 1),
])
def test_bad_input_is_one_course_error(bad):
    with pytest.raises(CourseError):
        bad()


# ------------------------------------------------------------------ the per-kernel roofline of a step
H100 = R.device_roof("H100")


def test_linear_ridge_batch_is_peak_over_bandwidth_times_bytes_per_weight_over_two():
    assert R.linear_ridge_batch(H100, "bf16") == pytest.approx(989.4e12 / 3350e9, rel=1e-6)     # ~295
    assert R.linear_ridge_batch(H100, "fp8") == pytest.approx(1978.9e12 / 3350e9 / 2, rel=1e-6)  # same ~295
    assert R.linear_ridge_batch(H100, "int4") == pytest.approx(989.4e12 / 3350e9 * (0.5 + 2 / 128) / 2)
    a100 = R.device_roof("A100")
    # no FP8 tensor cores on Ampere: FP8 weights are multiplied in BF16 (weight-only), INT8 W8A8 has a path
    assert R.weight_precision("fp8", a100) == (1.0, "bf16")
    assert R.weight_precision("int8", a100) == (1.0, "int8")
    assert R.linear_ridge_batch(a100, "int8") == pytest.approx(624e12 / 2039e9 / 2)
    # a wrong formula (peak / bandwidth alone, forgetting the bytes per weight) does not pass for INT4
    assert abs(R.linear_ridge_batch(H100, "int4") - 989.4e12 / 3350e9) > 200
    assert R.linear_ridge_batch(R.device_roof("H20")) == pytest.approx(148 / 4.0)     # ~37: compute-poor


def test_step_kernels_by_hand_for_llama_8b_decode():
    spec = load_spec("llama-3.1-8b")
    p = spec.params()
    s = R.step_roofline("llama-3.1-8b", H100, decode_batch=16, context_tokens=1000)
    lin, head, att = s.kernel("linear"), s.kernel("lm_head"), s.kernel("attention")
    assert lin.flops == 2 * p.linear * 16 and lin.bytes == p.linear * 2
    assert head.flops == 2 * p.lm_head * 16 and head.bytes == p.lm_head * 2
    # attention: 4 x layers x heads x head_dim FLOPs and 131,072 KV bytes per token of context and request
    assert att.flops == 16 * 1000 * 4 * 32 * 32 * 128 and att.bytes == 16 * 1000 * 131_072
    assert lin.time_s == pytest.approx(max(lin.flops / 989.4e12, lin.bytes / 3350e9))
    assert s.time_s == pytest.approx(lin.time_s + head.time_s + att.time_s)   # overhead 0, no TP
    assert {k.name for k in s.kernels} == {"linear", "lm_head", "attention", "overhead"}


def test_linear_layers_reach_the_ridge_near_it_while_decode_attention_never_does():
    ridge = R.linear_ridge_batch(H100)
    below = R.step_roofline("llama-3.1-8b", H100, decode_batch=int(ridge * 0.8), context_tokens=1000)
    above = R.step_roofline("llama-3.1-8b", H100, decode_batch=int(ridge * 1.25), context_tokens=1000)
    assert below.kernel("linear").bound == "memory" and above.kernel("linear").bound == "compute"
    for b in (1, 64, 4096):
        att = R.step_roofline("llama-3.1-8b", H100, decode_batch=b, context_tokens=1000).kernel("attention")
        assert att.bound == "memory" and att.intensity == pytest.approx(R.attention_intensity("llama-3.1-8b"))
    assert R.attention_intensity("llama-3-70b") == pytest.approx(8.0)          # 2 x 64/8 heads / 2 bytes
    assert R.attention_intensity("llama-3.1-8b", 1.0) == pytest.approx(8.0)    # fp8 KV: half the bytes


def test_a_whole_step_roofline_misleads():
    s = R.step_roofline("llama-3.1-8b", H100, decode_batch=1024, context_tokens=1000)
    # the linear layers are compute bound, attention memory bound; one max over the sums calls it memory bound
    assert s.kernel("linear").bound == "compute" and s.kernel("attention").bound == "memory"
    assert s.whole_step_bound == "memory"
    assert s.whole_step_time_s < 0.85 * s.time_s       # and it promises a step >15 % faster than its kernels allow
    assert s.binding.name == "attention"


def test_precision_kv_dtype_and_tp_change_the_right_kernel():
    base = R.step_roofline("llama-3-70b", H100, decode_batch=64, context_tokens=875, tp=8)
    fp8 = R.step_roofline("llama-3-70b", H100, decode_batch=64, context_tokens=875, tp=8, weights="fp8")
    kv8 = R.step_roofline("llama-3-70b", H100, decode_batch=64, context_tokens=875, tp=8, kv_dtype_bytes=1)
    assert fp8.kernel("linear").bytes == pytest.approx(base.kernel("linear").bytes / 2)
    assert fp8.kernel("attention").bytes == base.kernel("attention").bytes
    assert kv8.kernel("attention").bytes == pytest.approx(base.kernel("attention").bytes / 2)
    assert kv8.kernel("linear").bytes == base.kernel("linear").bytes
    ar = base.kernel("allreduce")   # 2 per layer of 64 tokens x 8192 x 2 B, ring 2 x 7/8 of it
    assert ar.bytes == pytest.approx(2 * 80 * 64 * 8192 * 2 * 2 * 7 / 8) and ar.bound == "network"
    # H100 (NVLink 4, assets/gpus.yaml links): 450 GB/s per direction x 0.68, 8 us per call; the datasheet's
    # 900 GB/s (both directions) would halve the transfer
    assert H100.interconnect == 450e9 and H100.allreduce_latency_s == pytest.approx(8e-6)
    assert ar.time_s == pytest.approx(ar.bytes / (450e9 * 0.68) + 160 * 8e-6)
    bare = R.Roof("bare", H100.peak, H100.bandwidth, 450e9)       # no link table: the caller's latency and efficiency
    lat = R.step_roofline("llama-3-70b", bare, decode_batch=64, context_tokens=875, tp=8, allreduce_latency_s=1e-5,
                          efficiency={"network": 0.5})
    assert lat.kernel("allreduce").time_s == pytest.approx(ar.bytes / (450e9 * 0.5) + 160 * 1e-5)
    one = R.step_roofline("llama-3.1-8b", H100, decode_batch=1)
    assert "allreduce" not in {k.name for k in one.kernels}


def test_moe_reads_only_the_experts_its_tokens_touch_and_prefill_is_compute_bound():
    one = R.step_roofline("mixtral-8x7b", H100, decode_batch=1).kernel("linear")
    many = R.step_roofline("mixtral-8x7b", H100, decode_batch=256).kernel("linear")
    assert one.bytes < 0.4 * many.bytes            # 2 of 8 experts against (almost) all of them
    pre = R.step_roofline("llama-3.1-8b", R.device_roof("A100"), prefill_tokens=2048)
    assert pre.kernel("linear").bound == "compute" and pre.binding.name == "linear"
    h20 = R.step_roofline("llama-3.1-8b", R.device_roof("H20"), decode_batch=64)
    assert h20.kernel("linear").bound == "compute"    # ridge ~37 on an H20: decode at 64 is compute bound


def test_efficiency_and_overhead_scale_the_kernels():
    lo = R.step_roofline("llama-3.1-8b", H100, decode_batch=8, context_tokens=500)
    hi = R.step_roofline("llama-3.1-8b", H100, decode_batch=8, context_tokens=500,
                         efficiency={"memory": 0.5}, overhead_s=0.002)
    assert hi.kernel("linear").time_s == pytest.approx(2 * lo.kernel("linear").time_s)
    assert hi.time_s == pytest.approx(2 * (lo.time_s) + 0.002)


@pytest.mark.parametrize("kw", [
    {"decode_batch": 0}, {"decode_batch": -1}, {"decode_batch": 2.5}, {"decode_batch": float("nan")},
    {"decode_batch": 1, "context_tokens": float("inf")}, {"decode_batch": 1, "context_tokens": -3},
    {"decode_batch": 1, "tp": 0}, {"decode_batch": 1, "weights": "int3"},
    {"decode_batch": 1, "efficiency": {"compute": 1.5}}, {"decode_batch": 1, "efficiency": {"disk": 0.5}},
    {"decode_batch": 1, "overhead_s": float("nan")}, {"decode_batch": True},
])
def test_step_roofline_refuses_bad_input_in_one_line(kw):
    with pytest.raises(CourseError):
        R.step_roofline("llama-3.1-8b", H100, **kw)


def test_roofs_refuse_missing_figures():
    with pytest.raises(CourseError, match="no fp32"):
        R.step_roofline("llama-3.1-8b", H100, decode_batch=1, weights="fp32")   # no FP32 figure in the catalog
    cpu = R.custom_roof("cpu", 1e11, 2e10)
    assert R.step_roofline("smollm2-135m-instruct", cpu, decode_batch=1, weights="fp32").time_s > 0
    with pytest.raises(CourseError):
        R.custom_roof("cpu", float("nan"), 1e10)
