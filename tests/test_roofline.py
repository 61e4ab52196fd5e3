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
