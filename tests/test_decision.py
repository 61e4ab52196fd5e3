"""The decision engine: every branch and sub-condition of §2, every pitfall of §3, the §4 order."""
import json

import pytest

from inferopt.diagnosis.baseline import (
    from_bench_records,
    from_profile_export,
    load_baseline,
)
from inferopt.diagnosis.decision import (
    Baseline,
    conflicts_for,
    default_techniques_on,
    diagnose,
    metrics_from_summary,
    time_diagnosis,
)
from inferopt.errors import CourseError
from inferopt.planning import hardware

SLO = {"ttft_p95_ms": 500, "tpot_p95_ms": 50}
OK = {"ttft_p95_ms": 200, "tpot_p95_ms": 30}
NOTHING = []  # no technique on


def dx(metrics, workload=None, on=NOTHING, slos=SLO):
    return diagnose(metrics, slos, workload, on)


# ---------------------------------------------------------------- worst metric, order
def test_all_slos_met_means_stop():
    d = dx(OK)
    assert d.branch is None and d.worst_metric is None and d.techniques == []
    assert "stop" in d.next_step


def test_worst_metric_is_the_largest_ratio_but_the_branch_follows_the_order():
    # TPOT is 4x its SLO, TTFT 1.2x: TPOT is worst, but TTFT (A) comes before TPOT (B) in §4
    d = dx({"ttft_p95_ms": 600, "tpot_p95_ms": 200})
    assert d.worst_metric == "tpot_p95_ms"
    assert d.branch == "A"
    assert d.order == ["A", "B"]


def test_oom_comes_first_whatever_else_fails():
    d = dx({"oom": True, "ttft_p95_ms": 5000, "tpot_p95_ms": 500, "tpot_p99_ms": 9000},
           {"model_weights_gib": 10, "gpu_type": "A100"})
    assert d.branch == "C" and d.worst_metric == "oom"
    assert d.order == ["C", "A", "B", "D"]


def test_tail_comes_last():
    d = dx({"ttft_p95_ms": 200, "tpot_p95_ms": 80, "tpot_p99_ms": 900}, slos={**SLO, "tpot_p99_ms": 100})
    assert d.order == ["B", "D"] and d.branch == "B"
    assert d.worst_metric == "tpot_p99_ms"


def test_throughput_below_target_is_branch_b():
    d = dx({**OK, "throughput_tok_s": 500, "queue_len": 40}, {"concurrency": 64},
           slos={**SLO, "throughput_tok_s": 2000})
    assert d.branch == "B" and d.worst_metric == "throughput_tok_s"
    assert d.failing[0]["ratio"] == 4.0
    assert "B3" in d.path and d.techniques == ["continuous_batching"]


def test_tail_without_p99_slo_uses_the_ratio_to_p95():
    assert dx({**OK, "tpot_p99_ms": 59}).branch is None          # 59 < 2 x 30
    d = dx({**OK, "tpot_p99_ms": 61})                              # 61 > 2 x 30
    assert d.branch == "D" and d.failing[0]["slo"] == 60


# ---------------------------------------------------------------- branch A
def test_A1_long_prompt_on_h100_gives_fp8_not_chunked_prefill():
    # erratum A1: chunked prefill protects other streams' decode gaps (D1), it does not shorten a
    # long prompt's own TTFT (02b measured it x1.07 worse), so A1 does not recommend it
    d = dx({"ttft_p95_ms": 2000, "tpot_p95_ms": 30}, {"prompt_tokens": 8000, "gpu_type": "H100"})
    assert d.path == ["baseline", "A", "A1"]
    assert d.techniques == ["fp8"] and "chunked_prefill" not in d.techniques
    assert d.recommendations[0]["flags_add"] == ["--quantization", "fp8"]
    assert d.actions == []


def test_A1_without_fp8_hardware_skips_fp8_and_says_upgrade():
    d = dx({"ttft_p95_ms": 2000, "tpot_p95_ms": 30}, {"prompt_tokens": 8000, "gpu_type": "A100"})
    assert d.techniques == []
    assert [s["id"] for s in d.skipped] == ["fp8"] and "W8A8" in d.skipped[0]["reason"]
    assert [a["id"] for a in d.actions] == ["upgrade_gpu"]
    assert "does not shorten" in d.actions[0]["text"]
    d2 = dx({"ttft_p95_ms": 2000, "tpot_p95_ms": 30}, {"prompt_tokens": 8000})
    assert "not given" in d2.skipped[0]["reason"]


def test_A2_shared_prefix_gives_prefix_cache():
    d = dx({"ttft_p95_ms": 900, "tpot_p95_ms": 30}, {"prompt_tokens": 800, "shared_prefix_frac": 0.7})
    assert d.path == ["baseline", "A", "A2"] and d.techniques == ["prefix_cache"]
    assert [a["id"] for a in d.actions] == ["radix_attention"]
    assert d.recommendations[0]["flags_add"] == ["--enable-prefix-caching"]
    # it was off (not in techniques_on): the fix is to drop the flag that turned it off
    assert d.recommendations[0]["flags_remove"] == ["--no-enable-prefix-caching"]
    assert "because" in d.matched_conditions[0] and "shared_prefix_frac = 0.7" in d.matched_conditions[0]["because"][0]


def test_A2_when_prefix_cache_is_already_on():
    d = dx({"ttft_p95_ms": 900, "tpot_p95_ms": 30}, {"shared_prefix_frac": 0.7}, on=["prefix_cache"])
    assert d.techniques == [] and [a["id"] for a in d.already_on] == ["prefix_cache"]
    assert d.actions == [] and "already on" in d.next_step


def test_A3_idle_gpu_points_at_the_cpu_side():
    d = dx({"ttft_p95_ms": 900, "tpot_p95_ms": 30, "gpu_util": 0.2}, {"prompt_tokens": 200})
    assert d.path == ["baseline", "A", "A3"] and d.techniques == []
    assert [a["id"] for a in d.actions] == ["nsight_trace", "cpu_overhead"]
    assert d.next_step.startswith("Investigate")


def test_branch_with_no_matching_sub_condition_lists_each_sub_branch_with_its_deciding_measurement():
    d = dx({"ttft_p95_ms": 900, "tpot_p95_ms": 30})
    assert d.branch == "A" and d.path == ["baseline", "A"]
    assert [u["id"] for u in d.undecided] == ["A1", "A2", "A3"]
    assert "--prompt-tokens" in d.undecided[0]["decided_by"] and "--gpu-util" in d.undecided[2]["decided_by"]
    assert all(u["id"] in d.next_step for u in d.undecided) and "no sub-condition" not in d.next_step
    # a sub-branch that is decided (false) is not listed: only the unknown ones
    d = dx({"ttft_p95_ms": 900, "tpot_p95_ms": 30, "gpu_util": 0.9}, {"prompt_tokens": 100})
    assert [u["id"] for u in d.undecided] == ["A2"]


# ---------------------------------------------------------------- branch B
def test_B1_long_context_is_memory_bound():
    d = dx({"ttft_p95_ms": 300, "tpot_p95_ms": 80}, {"prompt_tokens": 6000, "output_tokens": 500, "concurrency": 32})
    assert d.path == ["baseline", "B", "B1"]
    assert d.techniques == ["kv_cache_quant"]          # only fewer KV bytes help (review 2026-12-01, finding 18)
    assert d.recommendations[0]["flags_add"] == ["--kv-cache-dtype", "fp8"]
    assert [a["id"] for a in d.actions] == ["fewer_kv_bytes"]


def test_B2_small_batch_gives_speculative_decoding_ngram_or_draft():
    d = dx({"ttft_p95_ms": 300, "tpot_p95_ms": 80}, {"concurrency": 2, "prompt_tokens": 500})
    assert d.path == ["baseline", "B", "B2"] and d.techniques == ["speculative_decoding"]
    assert json.loads(d.flags[1])["method"] == "ngram"
    assert [a["id"] for a in d.actions] == ["drafter_by_workload"]     # n-gram only where outputs repeat the prompt
    d = dx({"ttft_p95_ms": 300, "tpot_p95_ms": 80}, {"concurrency": 2, "draft_model": "tiny-draft"})
    assert json.loads(d.flags[1]) == {"model": "tiny-draft", "num_speculative_tokens": 4}
    assert d.actions == []


def test_B3_underfed_gpu_raises_the_concurrency_cap():
    d = dx({"ttft_p95_ms": 300, "tpot_p95_ms": 80, "queue_len": 40}, {"concurrency": 64})
    assert d.path == ["baseline", "B", "B3"] and d.techniques == ["continuous_batching"]
    assert d.flags == ["--max-num-seqs", "256"]
    assert d.actions == []
    # continuous batching is always on in vLLM: then the fix is to raise its cap
    d = dx({"ttft_p95_ms": 300, "tpot_p95_ms": 80, "queue_len": 40}, {"concurrency": 64}, on=["continuous_batching"])
    assert d.techniques == [] and [a["id"] for a in d.actions] == ["raise_concurrency"]
    # sized: twice the cap in force (vLLM's default 256 without a GPU given), not a fixed number
    assert d.flags == ["--max-num-seqs", "512"] and d.next_step.startswith("Apply one change: --max-num-seqs 512")
    d = diagnose({"ttft_p95_ms": 300, "tpot_p95_ms": 80, "queue_len": 40}, SLO, {"concurrency": 64},
                 ["continuous_batching"], {"max_num_seqs": 48})
    assert d.flags == ["--max-num-seqs", "128"]
    # NVML's GPU utilization does not decide it: a busy-looking GPU with requests waiting is still under-fed,
    # and an idle-looking one with nothing waiting is not (review 2026-12-01, finding 19)
    assert "B3" in dx({"ttft_p95_ms": 300, "tpot_p95_ms": 80, "gpu_util": 0.99, "queue_len": 40}, {"concurrency": 64}).path
    assert "B3" not in dx({"ttft_p95_ms": 300, "tpot_p95_ms": 80, "gpu_util": 0.2, "queue_len": 0},
                          {"concurrency": 64}).path


# ---------------------------------------------------------------- branch C
def test_C1_weights_fit_so_the_kv_cache_is_the_problem():
    d = dx({"oom": True}, {"model_weights_gib": 15, "gpu_type": "L4"})  # 15 <= 0.9 x 24
    assert d.path == ["baseline", "C", "C1"]
    assert d.techniques == ["paged_attention", "kv_cache_quant"]


def test_C2_weights_do_not_fit():
    d = dx({"oom": True}, {"model_weights_gib": 130.4, "gpu_type": "H100", "num_gpus": 8})
    assert d.path == ["baseline", "C", "C2"]
    # GPUs at hand: TP (no accuracy cost) first, then FP8 on FP8 hardware, INT4 last
    assert d.techniques == ["tensor_parallel", "fp8", "int4_awq_marlin"]
    tp = d.recommendations[0]["flags_add"]
    assert tp == ["--tensor-parallel-size", "4"]  # 130.4/2 = 65 > 0.8*72 = 57.6; 130.4/4 = 32.6 fits
    # one A100: FP8 runs weight-only there (FP8 Marlin from compute capability 7.5, hardware_rules.yaml);
    # it saves memory at a smaller accuracy cost than INT4, so it comes first (was: skipped, an old rule)
    d1 = dx({"oom": True}, {"model_weights_gib": 130.4, "gpu_type": "A100", "num_gpus": 1})
    assert d1.techniques == ["fp8", "int4_awq_marlin"] and {s["id"] for s in d1.skipped} == {"tensor_parallel"}
    # a V100 (7.0) runs neither FP8 nor Marlin: the skip cites vLLM's source
    d2 = dx({"oom": True}, {"model_weights_gib": 30, "gpu_type": "V100", "num_gpus": 1})
    fp8_skip = next(s for s in d2.skipped if s["id"] == "fp8")
    assert "fp8.py" in fp8_skip["reason"] and "fp8" not in d2.techniques


def test_C_uses_given_gpu_memory_over_the_class_default():
    d = dx({"oom": True}, {"model_weights_gib": 30, "gpu_type": "A100", "gpu_memory_gib": 40})
    assert d.path[-1] == "C1"
    d = dx({"oom": True}, {"model_weights_gib": 37, "gpu_type": "A100", "gpu_memory_gib": 40})
    assert d.path[-1] == "C2"


# ---------------------------------------------------------------- branch D
def test_D1_prefill_decode_interference_small_cluster():
    d = dx({**OK, "tpot_p99_ms": 400}, {"prompt_tokens": 6000, "num_gpus": 2}, slos={**SLO, "tpot_p99_ms": 100})
    assert d.path == ["baseline", "D", "D1"]
    assert d.techniques == ["chunked_prefill"] and [s["id"] for s in d.skipped] == ["pd_disaggregation"]


def test_D1_with_chunked_prefill_on_lowers_the_chunk_budget():
    d = dx({**OK, "tpot_p99_ms": 400}, {"prompt_tokens": 6000, "num_gpus": 2}, on=["chunked_prefill"],
           slos={**SLO, "tpot_p99_ms": 100})
    assert d.techniques == [] and [a["id"] for a in d.already_on] == ["chunked_prefill"]
    assert [a["id"] for a in d.actions] == ["smaller_prefill_chunks"]
    # sized to the workload: below the 6000-token prompt AND below the current budget
    assert d.flags == []  # no GPU and no current budget given: the action says what is missing
    assert "not sized" in d.actions[0]["text"]
    d = dx({**OK, "tpot_p99_ms": 400}, {"prompt_tokens": 1500, "gpu_type": "CPU"}, on=["chunked_prefill"],
           slos={**SLO, "tpot_p99_ms": 100})
    assert d.flags == ["--max-num-batched-tokens", "256"]  # CPU default is 2048: 2048 would change nothing
    d = diagnose({**OK, "tpot_p99_ms": 400}, {**SLO, "tpot_p99_ms": 100}, {"prompt_tokens": 1500}, ["chunked_prefill"],
                 {"gpu": "cpu", "max_num_batched_tokens": 256})
    assert d.flags == ["--max-num-batched-tokens", "128"]  # already 256: halve it, floor max_num_seqs (128 on CPU)
    d = diagnose({**OK, "tpot_p99_ms": 400}, {**SLO, "tpot_p99_ms": 100}, {"prompt_tokens": 1500}, ["chunked_prefill"],
                 {"gpu": "cpu", "max_num_batched_tokens": 128})
    assert d.flags == [] and "nothing left" in d.actions[0]["text"]
    d = dx({**OK, "tpot_p99_ms": 400}, {"prompt_tokens": 6000, "gpu_type": "H100"}, on=["chunked_prefill"],
           slos={**SLO, "tpot_p99_ms": 100})
    assert d.flags == ["--max-num-batched-tokens", "1024"]  # H100 default 8192; 6000/4 -> 1024


def test_D1_large_cluster_adds_pd_disaggregation():
    d = dx({**OK, "tpot_p99_ms": 400}, {"prompt_tokens": 6000, "num_gpus": 16}, slos={**SLO, "tpot_p99_ms": 100})
    assert d.techniques == ["chunked_prefill", "pd_disaggregation"]  # cheapest first
    assert d.recommendations[1]["flags_add"][0] == "--kv-transfer-config"
    assert "Chunked prefill" in d.next_step


def test_D2_queues_need_slo_aware_scheduling():
    d = dx({**OK, "ttft_p99_ms": 3000, "queue_len": 12, "preemptions": 0, "kv_cache_usage": 0.5}, {"prompt_tokens": 100})
    assert d.path == ["baseline", "D", "D2"]
    assert [a["id"] for a in d.actions] == ["slo_aware_scheduler"]


# ---------------------------------------------------------------- pitfalls §3
def ids(conflicts):
    return [c["id"] for c in conflicts]


def test_3_1_spec_plus_quantization_is_about_a_quantized_draft():
    draft = {"draft_model": "llama-68m"}
    # the original chapter's advice (quantize the target, keep the draft BF16) must NOT fire the warning
    assert ids(conflicts_for(["speculative_decoding", "int4_awq_marlin"], {"gpu_type": "A100", **draft, "draft_dtype": "bf16"})) == []
    assert ids(conflicts_for(["speculative_decoding", "fp8"], {**draft, "draft_dtype": "bf16"})) == []
    for q in ("fp8", "int8", "int4"):
        assert ids(conflicts_for(["speculative_decoding"], {**draft, "draft_dtype": q})) == ["spec_quant"]
    assert ids(conflicts_for(["speculative_decoding", "fp8"], draft)) == []  # draft dtype unknown: no claim
    assert ids(conflicts_for(["speculative_decoding"], {"draft_dtype": "int4"})) == []  # n-gram: no draft weights
    c = conflicts_for(["speculative_decoding"], {**draft, "draft_dtype": "int4"})[0]
    assert "draft" in c["advice"] and c["avoid_flags"][0] == "--speculative-config"
    assert json.loads(c["avoid_flags"][1])["quantization"] is None


def test_3_2_spec_at_high_concurrency():
    assert ids(conflicts_for(["speculative_decoding"], {"concurrency": 64})) == ["spec_continuous_batching"]
    assert ids(conflicts_for(["speculative_decoding"], {"concurrency": 4})) == []
    assert ids(conflicts_for(["speculative_decoding"])) == []  # concurrency unknown: no claim


def test_3_3_int4_without_marlin_at_any_batch():
    # Without Marlin the INT4 gain is lost at medium and large batches, and at batch 1-2 it depends on the kernel
    # (vllm#2268: vLLM's own non-Marlin AWQ kernel lost at 1, 2, 4 and 8; review finding 4): the pitfall fires at
    # any concurrency where the kernel is named as another one. vLLM 0.32 runs Marlin from compute capability 7.5
    # (marlin_utils.py) and AWQ/GPTQ load only there: on a V100 INT4 does not load at all, so the batch-size pitfall
    # makes no claim (the hardware table refuses the method); a T4 and an A100 have Marlin.
    other = {"int4_kernel": "other"}
    assert ids(conflicts_for(["int4_awq_marlin"], {**other, "concurrency": 64})) == ["int4_no_marlin_large_batch"]
    assert ids(conflicts_for(["int4_awq_marlin"], {**other, "concurrency": 3})) == ["int4_no_marlin_large_batch"]
    assert ids(conflicts_for(["int4_awq_marlin"], {**other, "concurrency": 2})) == ["int4_no_marlin_large_batch"]
    assert ids(conflicts_for(["int4_awq_marlin"], {**other, "concurrency": 1})) == ["int4_no_marlin_large_batch"]
    assert ids(conflicts_for(["int4_awq_marlin"], {"gpu_type": "V100", "concurrency": 64})) == []
    assert not hardware.supports(hardware.capability("V100"), "int4_marlin")
    assert ids(conflicts_for(["int4_awq_marlin"], {"gpu_type": "T4", "concurrency": 64})) == []
    assert ids(conflicts_for(["int4_awq_marlin"], {"gpu_type": "A100", "concurrency": 64})) == []


def test_3_4_paged_kv_with_spec():
    c = conflicts_for(["paged_attention", "speculative_decoding"], {"concurrency": 1})
    assert ids(c) == ["paged_kv_spec"] and c[0]["severity"] == "info"


def test_3_5_multi_lora_prefix_cache():
    assert ids(conflicts_for(["prefix_cache"], {"lora_adapters": 4})) == ["multi_lora_prefix_cache"]
    assert ids(conflicts_for(["prefix_cache"], {"lora_adapters": 1})) == []


def test_a_recommendation_that_conflicts_is_flagged_as_such():
    # B2 recommends speculation while INT4 is on: pitfall 3.1 caused by the recommendation
    d = dx({"ttft_p95_ms": 300, "tpot_p95_ms": 80}, {"concurrency": 2, "gpu_type": "A100", "draft_model": "d",
                                                     "draft_dtype": "int8"},
           on=["int4_awq_marlin", "paged_attention"])
    assert d.techniques == ["speculative_decoding"]
    assert ids(d.conflicts) == ["spec_quant", "paged_kv_spec"]
    assert all(c["from_recommendation"] for c in d.conflicts)


def test_conflicts_already_present_are_reported_even_when_slos_are_met():
    d = dx(OK, {"lora_adapters": 3}, on=["prefix_cache"])
    assert d.branch is None and ids(d.conflicts) == ["multi_lora_prefix_cache"]
    assert not d.conflicts[0]["from_recommendation"]


def test_default_techniques_on_are_vllms_defaults():
    assert default_techniques_on() == ["flash_attention", "paged_attention", "continuous_batching",
                                       "prefix_cache", "chunked_prefill", "torch_compile"]
    d = diagnose({"ttft_p95_ms": 900, "tpot_p95_ms": 30}, SLO, {"shared_prefix_frac": 0.7})  # None = defaults
    assert d.techniques == [] and d.already_on[0]["id"] == "prefix_cache"


def test_next_step_is_one_change_then_measure_again():
    d = dx({"ttft_p95_ms": 2000, "tpot_p95_ms": 30}, {"prompt_tokens": 8000, "shared_prefix_frac": 0.8, "gpu_type": "H100"})
    assert d.techniques == ["prefix_cache", "fp8"]  # low cost before medium
    assert d.next_step.startswith("Apply one change: Prefix cache")
    assert "benchmark again" in d.next_step


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("metrics, slos, workload, on, match", [
    ({"ttft_p95_ms": -1, "tpot_p95_ms": 30}, SLO, None, [], r"metrics\.ttft_p95_ms: -1.* negative"),
    ({"ttft_p95_ms": 100, "tpot_p95_ms": 30, "gpu_util": 85}, SLO, None, [], r"metrics\.gpu_util: .*fraction"),
    ({"ttft_p95_s": 1.0, "tpot_p95_ms": 30}, SLO, None, [], r"metrics\.ttft_p95_s: unknown field \(give it in milliseconds"),
    ({"ttft_p95_ms": "fast", "tpot_p95_ms": 30}, SLO, None, [], r"metrics\.ttft_p95_ms: 'fast' is not a number"),
    ({"ttft_p95_ms": float("nan"), "tpot_p95_ms": 30}, SLO, None, [], r"metrics\.ttft_p95_ms: nan"),
    ({"oom": "yes"}, SLO, None, [], r"metrics\.oom"),
    (OK, {"ttft_p95_ms": 0.5, "tpot_p95_ms": 50}, None, [], r"slos\.ttft_p95_ms: 0\.5 ms looks like seconds"),
    (OK, {"ttft_p95_s": 0.5, "tpot_p95_ms": 50}, None, [], r"slos\.ttft_p95_s: unknown field \(give it in milliseconds as ttft_p95_ms\)"),
    (OK, SLO, {"draft_dtype": "int3"}, [], r"workload\.draft_dtype: 'int3' is not one of"),
    (OK, SLO, {"int4_kernel": "exllama"}, [], r"workload\.int4_kernel"),
    (OK, SLO, {"concurrency": 2}, [], None),
    (OK, {"ttft_p95_ms": 500, "tpot_p95_ms": 0}, None, [], r"slos\.tpot_p95_ms: 0"),
    (OK, SLO, {"shared_prefix_frac": 70}, [], r"workload\.shared_prefix_frac"),
    (OK, SLO, {"concurrency": 2.5}, [], r"workload\.concurrency: 2\.5 is not a whole number"),
    (OK, SLO, {"gpu_type": "Voodoo2"}, [], r"workload\.gpu_type"),
    (OK, SLO, {"num_gpus": 0}, [], r"workload\.num_gpus"),
    (OK, SLO, {"color": "red"}, [], r"workload\.color: unknown field"),
    (OK, SLO, None, ["prefix_cache", "magic_sauce"], r"techniques_on: unknown technique 'magic_sauce'"),
    (OK, SLO, None, "prefix_cache,warp", r"unknown technique 'warp'"),
    ([1, 2], SLO, None, [], r"metrics: expected a dict"),
])
def test_bad_input_names_the_field(metrics, slos, workload, on, match):
    if match is None:  # the control case: the same call with good input passes
        diagnose(metrics, slos, workload, on)
        return
    with pytest.raises(CourseError, match=match):
        diagnose(metrics, slos, workload, on)


def test_accepts_a_benchmark_summary_with_extra_none_fields_and_a_dataclass():
    d = diagnose(Baseline.from_dict({"ttft_p95_ms": 900, "tpot_p95_ms": 30, "gpu_util": None}), SLO,
                 {"shared_prefix_frac": 0.5}, "")
    assert d.techniques == ["prefix_cache"]


def test_a_full_benchmark_summary_goes_in_through_metrics_from_summary():
    summary = {"type": "summary", "run": "c8", "concurrency": 8, "ttft_mean_ms": 300, "ttft_p95_ms": 900,
               "tpot_p95_ms": 30, "ttft_p99_ms": None, "throughput_tok_s": 850.5, "completed": 64}
    with pytest.raises(CourseError, match="metrics.type: unknown field"):
        diagnose(summary, SLO, None, [])
    m = metrics_from_summary(summary)
    assert m == {"ttft_p95_ms": 900, "tpot_p95_ms": 30, "throughput_tok_s": 850.5}
    assert diagnose(m, SLO, {"concurrency": summary["concurrency"], "shared_prefix_frac": 0.5}, []).branch == "A"


# ---------------------------------------------------------------- baselines from files
AIPERF = {
    "schema_version": "1.0",
    "time_to_first_token": {"unit": "ms", "avg": 400.0, "p50": 350.0, "p95": 812.5, "p99": 1400.0},
    "inter_token_latency": {"unit": "ms", "avg": 20.0, "p50": 19.0, "p95": 35.0, "p99": 61.0},
    "output_token_throughput": {"unit": "tokens/sec", "avg": 1234.5},
    "request_throughput": {"unit": "requests/sec", "avg": 8.2},
    "input_config": {"model": "x"},
}


def test_profile_export_maps_tool_names_to_ours():
    m = from_profile_export(AIPERF)
    assert m == {"ttft_p95_ms": 812.5, "ttft_p99_ms": 1400.0, "tpot_p95_ms": 35.0, "tpot_p99_ms": 61.0,
                 "throughput_tok_s": 1234.5}
    assert diagnose(m, SLO, {"shared_prefix_frac": 0.5}, []).techniques == ["prefix_cache"]


def test_profile_export_converts_seconds_and_rejects_odd_units():
    m = from_profile_export({"records": {"time_to_first_token": {"unit": "s", "p95": 0.8},
                                          "inter_token_latency": {"unit": "us", "p95": 35000}}})
    assert m == {"ttft_p95_ms": 800.0, "tpot_p95_ms": 35.0}
    with pytest.raises(CourseError, match=r"time_to_first_token\.unit"):
        from_profile_export({"time_to_first_token": {"unit": "furlongs", "p95": 1}, "inter_token_latency": {"unit": "ms", "p95": 1}})
    with pytest.raises(CourseError, match="inter_token_latency.p95"):
        from_profile_export({"time_to_first_token": {"unit": "ms", "p95": 1}})


def test_bench_json_lines_pick_the_labelled_or_last_run(tmp_path):
    recs = [{"label": "baseline", "summary": {"ttft_p95_ms": 900, "tpot_p95_ms": 30, "n_requests": 50}},
            {"type": "summary", "run": "sweep", "ttft_p95_ms": 700, "tpot_p95_ms": 40, "concurrency": 8},
            {"label": "prefix-on", "ttft_p95_ms": 300, "tpot_p95_ms": 31, "gpu_util": 0.5, "extra": 1}]
    p = tmp_path / "runs.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    assert load_baseline(p) == {"ttft_p95_ms": 300, "tpot_p95_ms": 31, "gpu_util": 0.5}
    assert load_baseline(p, label="baseline") == {"ttft_p95_ms": 900, "tpot_p95_ms": 30}
    assert load_baseline(p, label="sweep") == {"ttft_p95_ms": 700, "tpot_p95_ms": 40}
    # per-request lines of inferopt.bench.results are not summaries
    assert from_bench_records(recs + [{"type": "request", "run": "sweep", "ttft_p95_ms": 1}], "sweep")["ttft_p95_ms"] == 700
    with pytest.raises(CourseError, match="label 'nope'"):
        from_bench_records(recs, label="nope")
    q = tmp_path / "profile_export_aiperf.json"
    q.write_text(json.dumps(AIPERF, indent=2))
    assert load_baseline(q)["ttft_p95_ms"] == 812.5


# ---------------------------------------------------------------- speed
def test_one_diagnosis_takes_well_under_5_ms():
    r = time_diagnosis(200)
    assert r["median_ms"] < 5.0, r


def test_reason_head_is_the_first_clause_never_a_cut_word():
    from inferopt.diagnosis.facts import reason_head

    r = ("llama-3-70b does not fit: weights 131.42 GiB per GPU + estimated runtime memory 2.73 GiB exceed the usable "
         "72.88 GiB (0.92 x 79.22 GiB) of one H100-SXM-80GB. Raise TP (now 1), choose a smaller weight format.")
    assert reason_head(r) == r.split(". Raise")[0]          # the decimals' dots are no sentence end
    assert reason_head("KV cache cannot hold one request; lower --max-model-len") == "KV cache cannot hold one request"
    assert reason_head("no full stop at all") == "no full stop at all"
