"""The roofline (屋顶线模型) of one decode step: bytes moved, FLOPs, arithmetic intensity, ridge point.

A decode step produces one token for each of ``batch`` requests. It reads every weight once
(shared by the whole batch) and each request's KV cache (KV 缓存) once, and does about
2 FLOPs per weight per request (a multiply and an add) plus the attention over the context:

    FLOPs  = batch x (2 x matmul weights + 4 x layers x heads x head_dim x context)
    bytes  = all weights x bytes per weight + batch x context x KV bytes per token
    intensity = FLOPs / bytes                 (FLOP per byte)

A processor does at most ``peak`` FLOP/s and moves at most ``bandwidth`` bytes/s, so a step
takes at least max(FLOPs / peak, bytes / bandwidth). The two meet at the ridge point
peak / bandwidth (FLOP per byte): below it a step is memory bound (its time is the bytes
over the bandwidth, and more FLOPs are free), above it compute bound (Williams, Waterman,
Patterson, "Roofline: an insightful visual performance model", CACM 52(4), 2009).
Activations and the KV write of the new token are left out (a few KB per request).
"""
from __future__ import annotations

from dataclasses import dataclass

from inferopt.errors import CourseError
from inferopt.planning.model_specs import ModelSpec, load_spec


@dataclass(frozen=True)
class DecodeStep:
    """One decode step of a dense model: what it moves and computes."""

    model: str
    batch: int
    context_tokens: int
    weight_bytes: float          # all weights, read once per step
    kv_bytes: float              # batch x context x KV bytes per token
    flops: float
    bytes_moved: float           # weight_bytes + kv_bytes
    intensity: float             # FLOP per byte


def _spec(model) -> ModelSpec:
    return model if isinstance(model, ModelSpec) else load_spec(model)


def matmul_weights(spec: ModelSpec) -> int:
    """Weights a token multiplies by in one step: the decoder's linear layers (active experts) and the LM head."""
    p = spec.params()
    linear_active = p.linear - (p.total - p.active)
    head = p.embedding if spec.tie_word_embeddings else p.lm_head
    return linear_active + head


def decode_step(model, batch: int, context_tokens: int, *, weight_bytes_per_param: float = 2.0,
                kv_bytes_per_value: float = 2.0) -> DecodeStep:
    """Bytes and FLOPs of one decode step (bf16 = 2 bytes, float32 = 4, fp8 = 1)."""
    spec = _spec(model)
    if not isinstance(batch, int) or batch < 1:
        raise CourseError(f"batch={batch!r}: give the number of requests in the step, a whole number >= 1")
    if not isinstance(context_tokens, int) or context_tokens < 0:
        raise CourseError(f"context_tokens={context_tokens!r}: give the tokens already in each request's KV cache (>= 0)")
    if weight_bytes_per_param <= 0 or kv_bytes_per_value <= 0:
        raise CourseError("bytes per weight and per KV value must be > 0 (bf16: 2, float32: 4, fp8: 1)")
    p = spec.params()
    weight_bytes = p.total * weight_bytes_per_param
    kv_per_token = 2 * spec.num_layers * spec.num_kv_heads * spec.head_dim * kv_bytes_per_value
    kv_bytes = batch * context_tokens * kv_per_token
    attn_flops = 4 * spec.num_layers * spec.num_attention_heads * spec.head_dim * context_tokens
    flops = batch * (2 * matmul_weights(spec) + attn_flops)
    moved = weight_bytes + kv_bytes
    return DecodeStep(model=spec.name, batch=batch, context_tokens=context_tokens, weight_bytes=weight_bytes,
                      kv_bytes=kv_bytes, flops=flops, bytes_moved=moved, intensity=flops / moved)


def ridge_point(peak_flops: float, bandwidth_bytes_s: float) -> float:
    """FLOP per byte at which compute time equals memory time: peak / bandwidth."""
    if peak_flops <= 0 or bandwidth_bytes_s <= 0:
        raise CourseError("ridge_point needs peak FLOP/s > 0 and bandwidth bytes/s > 0")
    return peak_flops / bandwidth_bytes_s


def gpu_roof(gpu: dict, dtype: str = "bf16") -> tuple[float, float]:
    """(peak FLOP/s, bandwidth bytes/s) of an ``assets/gpus.yaml`` entry (dense, datasheet)."""
    key = f"{dtype}_dense_tflops"
    tflops, bw = gpu.get(key), gpu.get("memory_bandwidth_gb_s")
    if not tflops or not bw:
        raise CourseError(f"{gpu.get('name', gpu)}: assets/gpus.yaml gives no {key} or memory_bandwidth_gb_s; "
                          "pick another dtype or GPU")
    return tflops * 1e12, bw * 1e9


def min_step_time(step: DecodeStep, peak_flops: float, bandwidth_bytes_s: float) -> float:
    """The roofline's lower bound on the step's time, seconds: max(FLOPs / peak, bytes / bandwidth)."""
    ridge_point(peak_flops, bandwidth_bytes_s)
    return max(step.flops / peak_flops, step.bytes_moved / bandwidth_bytes_s)


def bound(step: DecodeStep, peak_flops: float, bandwidth_bytes_s: float) -> str:
    """'memory' when the step's intensity is below the ridge point, else 'compute'."""
    return "memory" if step.intensity < ridge_point(peak_flops, bandwidth_bytes_s) else "compute"


def crossover_batch(model, context_tokens: int, peak_flops: float, bandwidth_bytes_s: float, *,
                    weight_bytes_per_param: float = 2.0, kv_bytes_per_value: float = 2.0,
                    max_batch: int = 1 << 16) -> int | None:
    """The smallest batch whose decode step reaches the ridge point (None: memory bound up to max_batch).

    With a long context the KV reads grow with the batch as fast as the FLOPs, so the intensity
    levels off below the ridge and the step stays memory bound at any batch size.
    """
    ridge = ridge_point(peak_flops, bandwidth_bytes_s)
    kw = dict(weight_bytes_per_param=weight_bytes_per_param, kv_bytes_per_value=kv_bytes_per_value)
    if decode_step(model, max_batch, context_tokens, **kw).intensity < ridge:
        return None
    lo, hi = 1, max_batch        # intensity rises with the batch: bisect for the first batch at the ridge
    while lo < hi:
        mid = (lo + hi) // 2
        if decode_step(model, mid, context_tokens, **kw).intensity >= ridge:
            hi = mid
        else:
            lo = mid + 1
    return lo


def effective_bandwidth(step: DecodeStep, step_time_s: float) -> float:
    """Bytes per second a measured step time implies: bytes moved / time."""
    if step_time_s <= 0:
        raise CourseError(f"step time {step_time_s!r} s: give a measured time > 0")
    return step.bytes_moved / step_time_s


def achieved_flops(step: DecodeStep, step_time_s: float) -> float:
    """FLOP/s a measured step time implies: FLOPs / time."""
    if step_time_s <= 0:
        raise CourseError(f"step time {step_time_s!r} s: give a measured time > 0")
    return step.flops / step_time_s
