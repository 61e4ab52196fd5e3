"""The primer's helpers (chapter 0a): each computes one idea the rest of the course assumes, from the
course's own engines and data, so the notebook's cells stay a few lines long.

- :func:`percentile_sample`: a sample of request latencies and what its P50/P95 can and cannot say;
- :func:`kv_bytes`: KV bytes per token with the model's KV heads, and what they would be without GQA;
- :func:`tensor_parallel_mlp`: a two-way tensor-parallel MLP computed on the CPU, its all-reduce a sum;
- :func:`allreduce_bytes`: what one forward pass sends through all-reduce, per token;
- :func:`preemption_point`: how many requests the course's engine holds before vLLM must preempt;
- :func:`metric_types`: one counter, one gauge and one histogram from vLLM's own ``/metrics``;
- :func:`quantile_bucket`: the histogram bucket a quantile lies in, all that the bucket counts can say of it;
- :func:`limit_examples`: one operating point per limit of the performance model, predicted.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from inferopt.planning.platform_defaults import CPU as _ENGINE  # the course's CPU engine's defaults (its dtype)

# one scenario per limit of the performance model (inferopt.performance.predict.LIMITS), each chosen so that
# limit binds; the CPU rows are the course's own engine (SmolLM2-135M, its default dtype, a 1 GiB KV budget)
_CPU = dict(model="smollm2-135m-instruct", gpu="cpu", dtype=_ENGINE.dtype, max_model_len=2048,
            kv_cache_memory_bytes=2**30, input_tokens=200, output_tokens=48)
LIMIT_SCENARIOS = (
    ("weights_bandwidth", "the course's CPU engine, 1 request", dict(_CPU, concurrency=1)),
    ("compute", "the course's CPU engine, 32 requests", dict(_CPU, concurrency=32)),
    ("max_num_seqs", "the course's CPU engine, 32 requests, --max-num-seqs 4",
     dict(_CPU, concurrency=32, max_num_seqs=4)),
    ("kv_cache", "the course's CPU engine, 16 requests, a 128 MiB KV budget",
     dict(_CPU, concurrency=16, kv_cache_memory_bytes=2**27)),
    ("kv_bandwidth", "SmolLM2 on an H100, 512 requests of 2,000 tokens in",
     dict(model="smollm2-135m-instruct", gpu="H100", input_tokens=2000, output_tokens=500, concurrency=512)),
    ("interconnect", "Llama-3-70B FP8 on 4 L40S (PCIe), 64 requests",
     dict(model="llama-3-70b", gpu="L40S", tp=4, weights="fp8", input_tokens=800, output_tokens=150,
          concurrency=64)),
    ("step_overhead", "SmolLM2 on an H100, 1 request, --enforce-eager",
     dict(model="smollm2-135m-instruct", gpu="H100", input_tokens=100, output_tokens=200, concurrency=1,
          enforce_eager=True)),
    ("frontend", "SmolLM2 on an H100, 256 requests, one API server",
     dict(model="smollm2-135m-instruct", gpu="H100", input_tokens=100, output_tokens=200, concurrency=256)),
)


@dataclass(frozen=True)
class PercentileDemo:
    n: int
    p50_ms: float
    p95_ms: float
    upper_ms: float | None      # a 90 % upper bound of the true P95 (None: too few requests to give one)


def percentile_sample(sizes=(20, 45, 200), seed: int = 2) -> list[PercentileDemo]:
    """P50, P95 and the 90 % upper bound of P95 for the first n of one sample of TTFTs (ms, rounded to
    0.1 ms), drawn once from a log-normal around 300 ms: a typical latency shape, with a long right tail.
    Its true P95 is known: :func:`true_p95_ms`. (One sample: another seed gives other figures; what holds for
    every sample is that the upper bound covers the true P95 in at least 90 % of samples.)"""
    import numpy as np

    from inferopt.bench.stats import percentile_bounds

    rng = np.random.default_rng(seed)
    ttft_ms = np.round(rng.lognormal(mean=np.log(300.0), sigma=0.5, size=max(sizes)), 1)
    out = []
    for n in sizes:
        b = percentile_bounds(ttft_ms[:n], 95, level=0.9)
        out.append(PercentileDemo(n, round(float(np.percentile(ttft_ms[:n], 50)), 1), round(b.estimate, 1),
                                  None if b.upper is None else round(b.upper, 1)))
    return out


def true_p95_ms(median_ms: float = 300.0, sigma: float = 0.5) -> float:
    """The P95 of the log-normal :func:`percentile_sample` draws from: median x exp(1.645 sigma)."""
    from statistics import NormalDist

    return round(median_ms * math.exp(NormalDist().inv_cdf(0.95) * sigma), 1)


def kv_bytes(model: str, dtype_bytes: int) -> dict:
    """KV bytes per token of ``model`` with its KV heads (GQA), and with one KV head per attention head (MHA)."""
    from dataclasses import replace

    from inferopt.planning.memory import kv_bytes_per_token
    from inferopt.planning.model_specs import load_spec

    s = load_spec(model)
    mha = replace(s, num_kv_heads=s.num_attention_heads)               # the same model without GQA
    return {"model": model, "layers": s.num_layers, "heads": s.num_attention_heads, "kv_heads": s.num_kv_heads,
            "head_dim": s.head_dim, "dtype_bytes": dtype_bytes, "gqa_bytes": kv_bytes_per_token(s, dtype_bytes)[0],
            "mha_bytes": kv_bytes_per_token(mha, dtype_bytes)[0]}


def tensor_parallel_mlp(hidden: int = 8, ffn: int = 32, tokens: int = 4, ranks: int = 2, seed: int = 0) -> dict:
    """An MLP ``gelu(x W1) W2`` computed whole and split over ``ranks`` as tensor parallelism does (Megatron-LM):
    W1 by columns, W2 by rows. Each rank's output is a partial sum; the all-reduce adds them."""
    import torch

    g = torch.Generator().manual_seed(seed)
    x, w1, w2 = (torch.randn(*shape, generator=g, dtype=torch.float64)
                 for shape in ((tokens, hidden), (hidden, ffn), (ffn, hidden)))
    whole = torch.nn.functional.gelu(x @ w1) @ w2
    cols = ffn // ranks
    partial = [torch.nn.functional.gelu(x @ w1[:, r * cols:(r + 1) * cols]) @ w2[r * cols:(r + 1) * cols]
               for r in range(ranks)]
    reduced = sum(partial)                                               # the all-reduce: every rank gets the sum
    return {"ranks": ranks, "rank_shapes": [tuple(p.shape) for p in partial],
            "max_difference": float((reduced - whole).abs().max()),
            "one_rank_alone_is_wrong": bool((partial[0] - whole).abs().max() > 1e-6)}


def allreduce_bytes(model: str, dtype_bytes: int = 2) -> dict:
    """Bytes each all-reduce carries per token (the hidden state), and per forward pass: two per layer
    (after attention and after the MLP), as in Megatron-style tensor parallelism."""
    from inferopt.planning.model_specs import load_spec

    s = load_spec(model)
    per_call = s.hidden_size * dtype_bytes
    return {"model": model, "hidden": s.hidden_size, "layers": s.num_layers, "per_call_bytes": per_call,
            "per_token_bytes": 2 * s.num_layers * per_call}


def preemption_point(kv_cache_gib: float = 1.0, max_model_len: int = 2048, dtype: str | None = None) -> dict:
    """The course's CPU engine: its KV blocks, the blocks one full-length request needs, and how many such
    requests fit before the scheduler must preempt one (vLLM's KV accounting, inferopt.planning.memory)."""
    from inferopt.planning.memory import cpu_engine_prediction

    r = cpu_engine_prediction(kv_cache_gib, max_model_len, dtype or _ENGINE.dtype)
    return {"blocks": r.num_blocks, "block_size": r.block_size, "blocks_per_request": r.blocks_per_request,
            "requests_that_fit": r.num_blocks // r.blocks_per_request, "max_model_len": max_model_len}


def metric_types(text: str | None = None) -> dict:
    """One sample of each Prometheus metric type from a vLLM 0.32 ``/metrics`` page (the stored sample by
    default), and the TTFT histogram's P95 as PromQL's ``histogram_quantile`` computes it."""
    from inferopt import assets
    from inferopt.monitoring.metrics_parse import histogram_quantile, parse_metrics

    snap = parse_metrics(text if text is not None else assets.text("monitoring/vllm-0.32-metrics-sample.txt"))
    ttft = "vllm:time_to_first_token_seconds"
    buckets = snap.buckets(ttft)
    return {"counter": ("vllm:prompt_tokens_total", snap.value("vllm:prompt_tokens_total")),
            "gauge": ("vllm:num_requests_running", snap.value("vllm:num_requests_running")),
            "histogram": (ttft, len(buckets), snap.value(f"{ttft}_count")),
            "ttft_p95_s": histogram_quantile(0.95, buckets),
            "ttft_p95_bucket_s": quantile_bucket(0.95, buckets)}


def quantile_bucket(q: float, buckets) -> tuple[float, float]:
    """(lower, upper] bounds in which the ``q``-quantile of a histogram [(upper bound, cumulative count)] lies:
    the first bucket whose cumulative count reaches rank q x count (the first bucket starts at 0). Every value in
    it agrees with the counts; ``histogram_quantile`` only draws a straight line through it."""
    from inferopt.errors import CourseError

    bs = sorted((float(b), float(c)) for b, c in buckets)
    if not bs or not 0 < q <= 1 or bs[-1][1] <= 0:
        raise CourseError(f"quantile_bucket needs 0 < q <= 1 and a histogram with observations, got q={q!r} "
                          f"and {len(bs)} buckets; pass snap.buckets(name) of a histogram that has counts")
    rank = q * bs[-1][1]
    lower = 0.0
    for bound, count in bs:
        if count >= rank:
            return lower, bound
        lower = bound
    return lower, bs[-1][0]                 # not reached: the last (+Inf) bucket holds every observation


def limit_examples() -> list[dict]:
    """The performance model's prediction for each of :data:`LIMIT_SCENARIOS`: the limit it names, and why."""
    from inferopt.performance.predict import predict

    rows = []
    for expected, scene, kw in LIMIT_SCENARIOS:
        p = predict(**kw)
        rows.append({"limit": p.binding_limit, "scenario": scene, "ttft_ms": round(p.ttft_ms),
                     "tpot_ms": round(p.tpot_ms, 1), "why": p.why, "expected": expected})
    return rows
