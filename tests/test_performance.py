"""inferopt.performance: step time, scheduler, front-end and predict(), each figure checked against the
per-kernel roofline or a law it must obey, and each check shown to reject a wrong answer."""
import math

import pytest

from inferopt.errors import CourseError
from inferopt.performance import profiles as P
from inferopt.performance.predict import LIMITS, predict
from inferopt.performance.scheduler import SchedulerConfig, Workload, simulate
from inferopt.performance.steptime import Engine
from inferopt.planning import roofline as R
from inferopt.planning.model_specs import load_spec

GPU = P.profile("gpu")
H100 = R.device_roof("H100")
CHAT = dict(weights="fp8", kv_dtype="fp8", input_tokens=800, output_tokens=150)


def test_one_request_at_a_time_decodes_at_the_roofline_step_time():
    spec = load_spec("llama-3.1-8b")
    eng = Engine(spec, H100, GPU)
    p = predict("llama-3.1-8b", "H100", input_tokens=200, output_tokens=50, concurrency=1, num_requests=3)
    # by hand: the mean decode context is 200 + 25 tokens, a step of one request
    step = eng.step(1, 225.0).time_s
    assert p.tpot_ms == pytest.approx(step * 1e3, rel=0.03)
    lin = eng.step(1, 225.0).kernel("linear")
    assert lin.bound == "memory" and lin.time_s == pytest.approx(lin.bytes / (H100.bandwidth * GPU.efficiency["memory"]))
    assert p.binding_limit == "weights_bandwidth"
    assert not p.tpot_ms == pytest.approx(2 * step * 1e3, rel=0.03)       # a doubled step would be caught


def test_enforce_eager_adds_launch_overhead_per_step():
    a = predict("llama-3.1-8b", "H100", input_tokens=100, output_tokens=30, concurrency=1, num_requests=2)
    b = predict("llama-3.1-8b", "H100", input_tokens=100, output_tokens=30, concurrency=1, num_requests=2,
                enforce_eager=True)
    extra = GPU.eager_launch_us_per_layer * 32 / 1e3
    assert b.tpot_ms - a.tpot_ms == pytest.approx(extra, rel=0.05)


def test_max_num_seqs_cap_binds_with_the_kv_cache_nearly_empty():
    p = predict("llama-3.1-8b", "H100", input_tokens=200, output_tokens=100, concurrency=64, max_num_seqs=8)
    assert p.binding_limit == "max_num_seqs"
    assert p.queue_len > 40 and p.running <= 8.01 and p.kv_usage < 0.05
    free = predict("llama-3.1-8b", "H100", input_tokens=200, output_tokens=100, concurrency=64)
    assert free.binding_limit != "max_num_seqs" and free.throughput_tok_s > 3 * p.throughput_tok_s


def test_a_small_kv_cache_preempts_and_binds():
    eng = Engine(load_spec("llama-3.1-8b"), H100, GPU)
    cfg = SchedulerConfig(max_num_seqs=256, max_num_batched_tokens=8192, kv_capacity_tokens=4000, block_size=16)
    res = simulate(eng, cfg, Workload(500, 300, concurrency=16, num_requests=32))
    assert res.preemptions > 0 and res.completed == 32 and res.kv_max > 0.9
    roomy = simulate(eng, SchedulerConfig(256, 8192, 400_000, 16), Workload(500, 300, concurrency=16, num_requests=32))
    assert roomy.preemptions == 0


def test_the_front_end_binds_when_detokenizing_costs_more_than_a_step():
    slow = GPU.with_(frontend_per_token_us=400.0)
    one = predict("llama-3.1-8b", "H100", input_tokens=100, output_tokens=100, concurrency=128, profile=slow)
    eight = predict("llama-3.1-8b", "H100", input_tokens=100, output_tokens=100, concurrency=128, profile=slow,
                   api_server_count=8)
    assert one.binding_limit == "frontend" and eight.binding_limit != "frontend"
    assert eight.throughput_tok_s > 2 * one.throughput_tok_s and one.step_shares["frontend_wait"] > 0.5


def test_prefix_hits_shorten_the_prefill():
    cold = predict("llama-3-70b", "H100", tp=4, input_tokens=4000, output_tokens=20, concurrency=8, **{"weights": "fp8"})
    warm = predict("llama-3-70b", "H100", tp=4, input_tokens=4000, output_tokens=20, concurrency=8, weights="fp8",
                   prefix_hit_fraction=0.9)
    assert warm.ttft_ms < 0.5 * cold.ttft_ms


def test_open_loop_obeys_littles_law_and_conservation():
    p = predict("llama-3.1-8b", "H100", input_tokens=500, output_tokens=100, request_rate=20)
    assert not p.saturated
    assert p.throughput_tok_s == pytest.approx(20 * 100)
    assert p.running == pytest.approx(p.littles_law_in_flight, rel=0.2)    # L = lambda x W
    over = predict("llama-3.1-8b", "A10", input_tokens=500, output_tokens=100, request_rate=200, max_num_seqs=16,
                   max_model_len=4096)
    assert over.saturated and over.request_throughput_rps < 0.9 * 200 and over.binding_limit == "max_num_seqs"


def test_replicas_split_the_load():
    one = predict("llama-3.1-8b", "H100", input_tokens=300, output_tokens=50, request_rate=10)
    two = predict("llama-3.1-8b", "H100", num_gpus=2, input_tokens=300, output_tokens=50, request_rate=20)
    assert two.replicas == 2 and two.tpot_ms == pytest.approx(one.tpot_ms, rel=1e-6)
    assert two.throughput_tok_s == pytest.approx(2 * one.throughput_tok_s)


def test_tp8_for_a_model_that_fits_one_gpu_pays_all_reduce_that_replicas_do_not():
    kw = dict(input_tokens=500, output_tokens=200)
    tp8 = predict("llama-3.1-8b", "H100", tp=8, concurrency=1024, **kw)
    dp8 = predict("llama-3.1-8b", "H100", num_gpus=8, concurrency=1024, **kw)
    assert tp8.step_shares["allreduce"] > 0.15 and "allreduce" not in dp8.step_shares
    assert dp8.throughput_tok_s > 1.5 * tp8.throughput_tok_s            # under load, replicas win
    light_tp8 = predict("llama-3.1-8b", "H100", tp=8, concurrency=8, **kw)
    light_dp8 = predict("llama-3.1-8b", "H100", num_gpus=8, concurrency=8, **kw)
    assert light_tp8.tpot_ms < light_dp8.tpot_ms                        # one request at a time, TP8 is faster


def test_compute_bound_prefill_gains_from_the_precision_the_gpu_computes_fastest():
    kw = dict(input_tokens=4000, output_tokens=10, concurrency=16)
    a100_bf16 = predict("llama-3.1-8b", "A100", weights="bf16", **kw)
    a100_int8 = predict("llama-3.1-8b", "A100", weights="int8", **kw)
    a100_fp8 = predict("llama-3.1-8b", "A100", weights="fp8", **kw)      # weight-only on Ampere: BF16 compute
    assert a100_bf16.binding_limit == "compute"
    assert a100_int8.ttft_ms < 0.75 * a100_bf16.ttft_ms
    assert a100_fp8.ttft_ms > 0.9 * a100_bf16.ttft_ms


@pytest.mark.parametrize("kw", [
    {"concurrency": 4, "request_rate": 2.0}, {}, {"concurrency": 0}, {"request_rate": float("nan")},
    {"request_rate": float("inf")}, {"concurrency": 4, "tp": 3}, {"concurrency": 4, "num_gpus": 3, "tp": 2},
    {"concurrency": 4, "gpu_memory_utilization": 1.5}, {"concurrency": 4, "prefix_hit_fraction": -0.1},
    {"concurrency": 4, "api_server_count": 0}, {"concurrency": 4, "max_num_seqs": 2.5},
    {"concurrency": 4, "enable_chunked_prefill": False, "max_num_batched_tokens": 50},
])
def test_bad_input_is_one_course_error(kw):
    with pytest.raises(CourseError):
        predict("llama-3.1-8b", "H100", **{"input_tokens": 100, "output_tokens": 10, **kw})


def test_the_cpu_needs_its_kv_budget_and_answers_with_one():
    with pytest.raises(CourseError, match="kv_cache_memory_bytes"):
        predict("smollm2-135m-instruct", "cpu", input_tokens=100, output_tokens=16, concurrency=2)
    p = predict("smollm2-135m-instruct", "cpu", input_tokens=100, output_tokens=16, concurrency=2,
                kv_cache_memory_bytes=1 << 30, dtype="float32")
    assert math.isfinite(p.tpot_ms) and p.tpot_ms > 0 and "median_rel" in p.error_band["tpot"]


def test_a_stable_open_loop_is_not_called_saturated_by_poisson_noise():
    # 5 QPS per TP2 replica of Llama-3-70B FP8 is far below what it serves; with 150 Poisson arrivals the second
    # half's completion rate is ~12 % noisy against the nominal rate (the old check called this saturated)
    kw = dict(weights="fp8", kv_dtype="fp8", input_tokens=800, output_tokens=150, tp=2, num_gpus=8,
              max_num_seqs=200, max_num_batched_tokens=8192, gpu_memory_utilization=0.9)
    light = predict("llama-3-70b", "H100", request_rate=20, **kw)
    assert not light.saturated and light.queue_len < 0.1
    heavy = predict("llama-3-70b", "H100", request_rate=50, **{**kw, "tp": 8})   # 200 slots for ~600 in flight
    assert heavy.saturated and heavy.binding_limit == "max_num_seqs"


def test_the_binding_limit_exercise_rejects_a_wrong_answer_with_a_hint():
    from inferopt.performance import exercise

    capped = predict("llama-3.1-8b", "H100", input_tokens=200, output_tokens=100, concurrency=64, max_num_seqs=8)
    small_kv = predict("llama-3-70b", "H100", weights="fp8", kv_dtype="fp8", input_tokens=800, output_tokens=150,
                       request_rate=5, max_num_seqs=200)                 # chapter 02's exercise 4
    assert (capped.binding_limit, small_kv.binding_limit) == ("max_num_seqs", "kv_cache")
    assert "binding" not in exercise.show(capped) and "max_num_seqs" not in exercise.show(capped)   # no answer shown
    assert exercise.check_limit(capped, "max_num_seqs").startswith("right")
    assert exercise.check_limit(capped, None).startswith("write your answer")
    for p in (capped, small_kv):
        for wrong in (x for x in LIMITS if x != p.binding_limit):
            with pytest.raises(CourseError, match=f"not {wrong}"):
                exercise.check_limit(p, wrong)
    with pytest.raises(CourseError, match="not a limit"):
        exercise.check_limit(small_kv, "memory")
