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

Functions of the whole-step view (chapter 01's first figure): :func:`decode_step`,
:func:`ridge_point`, :func:`gpu_roof`, :func:`min_step_time`, :func:`bound`,
:func:`crossover_batch`, :func:`effective_bandwidth`, :func:`achieved_flops`.

The per-kernel roofline (the step time of :mod:`inferopt.performance`): a step is a sequence of
kernels, each bound by its own roof, and the step takes the sum of their times.

- :func:`device_roof` (a GPU of ``assets/gpus.yaml``) / :func:`custom_roof` (a fitted CPU) give a
  :class:`Roof`: peak FLOP/s per compute precision, memory and interconnect bandwidth;
- :func:`weight_precision`: bytes per weight and the precision the multiply runs in (FP8 W8A8 on
  Hopper/Ada, INT8 W8A8 on Ampere+, else weight-only at 16 bit);
- :func:`step_roofline` answers a :class:`StepRoofline` of :class:`KernelTime` s: ``linear``
  (2 x active linear weights x tokens FLOPs; weight bytes per precision), ``lm_head``, ``attention``
  (KV bytes read per request at its context, per KV dtype and attention kind; FLOPs), ``allreduce``
  (TP: bytes over the link), ``overhead`` (fixed per step); each kernel's bound and time, their sum,
  and beside it the whole-step figure that sums FLOPs and bytes first;
- :func:`linear_ridge_batch`: tokens per step at which the linear layers reach the ridge,
  peak / bandwidth x bytes per weight / 2 (BF16 H100: 989.4e12 / 3.35e12 ~ 295);
- :func:`attention_intensity`: decode attention's FLOP per byte, independent of the batch
  (GQA Llama-3 in BF16: 8), so decode attention never reaches the ridge.

The teaching point: batching raises the linear layers' intensity until the ridge at about
peak / bandwidth tokens, while decode attention stays where it is, memory bound at any batch. A
whole-step roofline (sum the FLOPs and bytes of sequential kernels, take one max) calls a step
"memory bound" whose linear layers are compute bound, and underestimates its time: kernels that run
one after another do not overlap their compute with each other's memory traffic.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

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


# ===================================================================== the per-kernel roofline of a step
# A step is a sequence of kernels, each with its own FLOPs and bytes, each bound by its own roof.
# Summing FLOPs and bytes over the step and taking one max (decode_step / min_step_time above) hides
# that the linear layers can be compute bound while attention, in the same step, is memory bound.

PRECISIONS = ("fp32", "bf16", "fp16", "fp8", "int8", "int4")
KERNELS = ("linear", "lm_head", "attention", "allreduce", "overhead")
_PEAK_FIELDS = {"bf16": "bf16_dense_tflops", "fp16": "fp16_dense_tflops", "fp8": "fp8_dense_tflops",
                "int8": "int8_dense_tops"}


def _finite(name: str, value, *, positive: bool = False, whole: bool = False) -> float:
    """``value`` as a float, refusing NaN, infinity, negatives (and 0 when ``positive``)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok and whole:
        ok = float(value).is_integer()
    if not ok or value < 0 or (positive and value == 0):
        kind = "a whole number" if whole else "a finite number"
        raise CourseError(f"{name}={value!r}: give {kind} {'> 0' if positive else '>= 0'}")
    return float(value)


@dataclass(frozen=True)
class Roof:
    """What one device can do: peak FLOP/s per compute precision, memory and interconnect bytes/s.

    ``peak`` maps a compute precision (``fp32``, ``bf16``, ``fp16``, ``fp8``, ``int8``) to FLOP/s (dense);
    a precision missing from it has no tensor-core path there (FP8 on an A100): weights stored that way
    are dequantized and multiplied in 16 bit (vLLM's weight-only Marlin kernels). ``interconnect`` is
    the per-GPU link bandwidth in bytes/s (None: a single device).
    """

    name: str
    peak: dict
    bandwidth: float
    interconnect: float | None = None          # bytes/s per direction (what a ring all-reduce can use)
    allreduce_latency_s: float | None = None   # one all-reduce call's fixed cost (None: the profile's)
    allreduce_efficiency: float | None = None  # share of ``interconnect`` an all-reduce reaches (None: the profile's)

    def flops(self, precision: str) -> float:
        if precision not in self.peak:
            raise CourseError(f"{self.name}: no {precision} compute figure; known: {', '.join(self.peak)}")
        return self.peak[precision]


def device_roof(gpu) -> Roof:
    """The :class:`Roof` of an ``assets/gpus.yaml`` entry or GPU name (datasheet, dense)."""
    if isinstance(gpu, str):
        from inferopt.planning import gpu_catalog
        return _named_roof(gpu_catalog.resolve(gpu))
    return _roof_of(gpu)


@lru_cache(maxsize=64)
def _named_roof(gid: str) -> Roof:
    from inferopt.planning import gpu_catalog
    return _roof_of(gpu_catalog.entry(gid))


def _roof_of(g: dict) -> Roof:
    peak = {p: g[f] * 1e12 for p, f in _PEAK_FIELDS.items() if g.get(f)}
    if "bf16" not in peak and "fp16" in peak:
        peak["bf16"] = peak["fp16"]            # a GPU without BF16 serves in FP16 at that rate
    if not peak or not g.get("memory_bandwidth_gb_s"):
        raise CourseError(f"{g.get('name', g.get('id', 'this GPU'))}: assets/gpus.yaml gives no TFLOP/s or bandwidth figure")
    name = g.get("id", g.get("name", "gpu"))
    if not g.get("link"):         # a hand-made entry: the datasheet figure adds both directions
        link = g.get("interconnect_gb_s")
        return Roof(name, peak, g["memory_bandwidth_gb_s"] * 1e9, link * 1e9 / 2 if link else None)
    links = _links()
    if g["link"] not in links:
        raise CourseError(f"{name}: link {g['link']!r} is not in assets/gpus.yaml links; known: {', '.join(links)}")
    li = links[g["link"]]
    return Roof(name, peak, g["memory_bandwidth_gb_s"] * 1e9, li["per_direction_gb_s"] * 1e9,
                li["allreduce_latency_us"] * 1e-6, float(li["allreduce_efficiency"]))


def _links() -> dict:
    """``assets/gpus.yaml`` ``links``: per kind of link, bandwidth per direction and one all-reduce call's cost."""
    from inferopt import assets
    return assets.load("gpus.yaml")["links"]


def custom_roof(name: str, peak_flops: float, bandwidth_bytes_s: float, precision: str = "fp32",
                interconnect_bytes_s: float | None = None) -> Roof:
    """A :class:`Roof` from two figures (a CPU, whose peaks the course fits rather than reads)."""
    _finite("peak_flops", peak_flops, positive=True)
    _finite("bandwidth_bytes_s", bandwidth_bytes_s, positive=True)
    if precision not in PRECISIONS:
        raise CourseError(f"precision {precision!r}: use one of {', '.join(PRECISIONS)}")
    return Roof(name, {precision: float(peak_flops)}, float(bandwidth_bytes_s), interconnect_bytes_s)


def weight_precision(weights: str, roof: Roof) -> tuple[float, str]:
    """(bytes per linear weight, compute precision) of a weight format on a device.

    bf16/fp16/fp32: stored and multiplied as such. fp8 / int8: W8A8 where the device has that tensor-core
    precision (FP8 on Hopper/Ada/Blackwell, INT8 on Ampere and later), else weight-only (16-bit compute).
    int4 (GPTQ/AWQ, group 128): weight-only, 0.5 byte + one fp16 scale per 128 weights, 16-bit compute.
    """
    if weights not in PRECISIONS:
        raise CourseError(f"weights {weights!r}: use one of {', '.join(PRECISIONS)}")
    sixteen = "bf16" if "bf16" in roof.peak else next(iter(roof.peak))
    if weights == "fp32":
        return 4.0, "fp32"
    if weights in ("bf16", "fp16"):
        return 2.0, weights if weights in roof.peak else sixteen
    if weights in ("fp8", "int8"):
        return 1.0, weights if weights in roof.peak else sixteen
    return 0.5 + 2.0 / 128, sixteen


def linear_ridge_batch(roof: Roof, weights: str = "bf16") -> float:
    """Tokens per step at which the linear layers turn compute bound: peak / bandwidth x bytes per weight / 2.

    Each weight is read once per step and does 2 FLOPs per token, so a step of ``B`` tokens has an
    intensity of 2B / bytes-per-weight; it meets the ridge peak / bandwidth at this B. BF16 on an
    H100: 989.4e12 / 3.35e12 x 2 / 2 = 295 tokens; FP8 W8A8 there: twice the peak, half the bytes, the
    same 295; INT4 weight-only: ~76; BF16 on an H20: ~37 (a slow chip with fast memory).
    """
    per, prec = weight_precision(weights, roof)
    return roof.flops(prec) / roof.bandwidth * per / 2


def attention_intensity(model, kv_dtype_bytes: float = 2.0) -> float:
    """FLOP per byte of decode attention: the same at every batch and context, so it never moves
    towards the ridge. GQA: 4 x heads x head_dim FLOPs per token of context and layer over
    2 x KV heads x head_dim x bytes = 2 x (heads / KV heads) / bytes (BF16: Llama-3-70B 8, Llama-3.1-8B 4).
    MLA reads one latent per token that all heads share, so its intensity is ~ 2 x heads x
    (2 x kv_lora_rank + rope) / ((kv_lora_rank + rope) x bytes): high, but still the same at every batch."""
    spec = _spec(model)
    flops, kv = _attention_per_token(spec, 1, kv_dtype_bytes)
    return flops / kv


def _attention_per_token(spec: ModelSpec, tp: int, kvb: float) -> tuple[float, float]:
    """(FLOPs, KV bytes) one decode token spends per token of context, all layers, on one of ``tp`` GPUs."""
    heads = spec.num_attention_heads / tp
    if spec.is_mla:         # scores over the latent + rope key, values from the latent (absorbed weights)
        flops = 2 * heads * (2 * spec.kv_lora_rank + spec.qk_rope_head_dim)
    else:
        flops = 4 * heads * spec.head_dim
    kv = spec.kv_heads_per_gpu(tp) * spec.kv_entry_width() * kvb
    return spec.num_layers * flops, spec.num_layers * kv


def _attended(spec: ModelSpec, context: float) -> float:
    """Tokens of context attended to, averaged over layers (sliding-window layers see at most the window)."""
    if not spec.sliding_window:
        return context
    slide = spec.sliding_window_layers / spec.num_layers
    return context * (1 - slide) + min(context, spec.sliding_window) * slide


@dataclass(frozen=True)
class KernelTime:
    """One kernel of a step on one GPU: its work, each roof's time, which binds, the time it takes."""

    name: str
    flops: float
    bytes: float               # HBM bytes (allreduce: bytes over the interconnect)
    compute_s: float
    memory_s: float
    time_s: float
    bound: str                 # "compute", "memory", "network" or "overhead"

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else math.inf


@dataclass(frozen=True)
class StepRoofline:
    """A step as a sequence of kernels (one GPU of the TP group; one pipeline stage when pp > 1)."""

    model: str
    device: str
    tokens: int                # tokens the linear layers process: decode_batch + prefill_tokens
    decode_batch: int
    prefill_tokens: int
    kernels: tuple
    time_s: float              # sum of the kernels' times: they run one after another
    whole_step_time_s: float   # the misleading whole-step roofline: max(sum FLOPs / peak, sum bytes / bw)
    whole_step_bound: str

    def kernel(self, name: str) -> KernelTime:
        for k in self.kernels:
            if k.name == name:
                return k
        raise CourseError(f"no kernel {name!r} in this step; kernels: {', '.join(k.name for k in self.kernels)}")

    @property
    def binding(self) -> KernelTime:
        """The kernel that takes the longest."""
        return max(self.kernels, key=lambda k: k.time_s)

    def shares(self) -> dict:
        """Each kernel's share of the step time."""
        return {k.name: k.time_s / self.time_s for k in self.kernels} if self.time_s else {}


def _kernel(name, flops, nbytes, peak, bw, extra_s=0.0, link=False, overlap=True) -> KernelTime:
    c = flops / peak if flops else 0.0
    m = nbytes / bw if nbytes else 0.0
    t = (max(c, m) if overlap else c + m) + extra_s
    kind = "network" if link else ("compute" if c > m else "memory")
    return KernelTime(name, flops, nbytes, c, m, t, kind)


def _expert_fraction(spec: ModelSpec, tokens: float) -> float:
    """Share of the routed experts a step of ``tokens`` tokens touches (each token picks k of E at random)."""
    if not spec.is_moe or tokens <= 0:
        return 0.0 if spec.is_moe else 1.0
    return 1 - (1 - spec.experts_per_token / spec.num_experts) ** tokens


@lru_cache(maxsize=64)
def _routed_expert_weights(spec: ModelSpec) -> int:
    """Weights of all routed experts (0 for a dense model)."""
    return sum(spec.num_experts * 3 * spec.hidden_size * spec.moe_intermediate_size
               for i in range(spec.num_layers) if spec.is_moe_layer(i)) if spec.is_moe else 0


def step_roofline(model, roof: Roof, *, decode_batch: int = 0, context_tokens: float = 0,
                  prefill_tokens: int = 0, prefill_context: float = 0, prefill_requests: int | None = None,
                  tp: int = 1, pp: int = 1, weights: str = "bf16", kv_dtype_bytes: float = 2.0,
                  act_bytes: float = 2.0, efficiency: dict | None = None, overhead_s: float = 0.0,
                  allreduce_latency_s: float = 0.0, overlap: bool = True) -> StepRoofline:
    """The kernels of one engine step on one GPU, each bounded by its own roof, and their sum.

    The step holds ``decode_batch`` requests producing one token each, with ``context_tokens`` tokens
    of KV each (a mean), and ``prefill_tokens`` prompt tokens of ``prefill_requests`` requests
    (default 1 if any) that already have ``prefill_context`` tokens cached (chunked prefill, prefix hits).

    - ``linear``: FLOPs = 2 x active linear weights x tokens / tp; bytes = the linear weights one GPU
      holds (MoE: the experts the step's tokens touch) x bytes per weight of ``weights``;
    - ``lm_head``: 2 x vocab x hidden per sampled token (decode_batch + prefill_requests), 16-bit weights;
    - ``attention``: decode reads each request's KV (``context_tokens`` x KV bytes per token per GPU, per
      KV dtype and attention kind: GQA, MLA latent, sliding-window layers capped); prefill attends
      causally: 4 x layers x heads x head_dim x n (prefill_context + n / 2) FLOPs; 16-bit compute;
    - ``allreduce`` (tp > 1): two per layer of tokens x hidden x ``act_bytes``, ring: 2 (tp - 1) / tp of
      it over the link's bandwidth per direction x the all-reduce's efficiency, plus a latency per call (the
      roof's, from ``assets/gpus.yaml`` ``links``; else ``allreduce_latency_s`` and ``efficiency["network"]``);
    - ``overhead``: ``overhead_s`` per step (launches, scheduler, sampling; larger with --enforce-eager).

    ``efficiency`` = {"compute", "memory", "network"}: the share of each datasheet roof a kernel reaches
    (default 1: the roofline's lower bound). With ``pp`` > 1 the figures are one stage's (layers / pp).
    ``overlap=False``: a kernel takes compute + memory time instead of the larger one (a CPU, whose cores
    both compute and wait for memory, fits that better than a GPU's overlapping roofline).
    """
    spec = _spec(model)
    eff = {"compute": 1.0, "memory": 1.0, "network": 1.0, **(efficiency or {})}
    for k, v in eff.items():
        if k not in ("compute", "memory", "network"):
            raise CourseError(f"efficiency {k!r}: use compute, memory or network")
        _finite(f"efficiency[{k}]", v, positive=True)
        if v > 1:
            raise CourseError(f"efficiency[{k}]={v}: a share of the datasheet roof, in (0, 1]")
    B = int(_finite("decode_batch", decode_batch, whole=True))
    P = int(_finite("prefill_tokens", prefill_tokens, whole=True))
    ctx = _finite("context_tokens", context_tokens)
    pctx = _finite("prefill_context", prefill_context)
    for name, v in (("tp", tp), ("pp", pp)):
        _finite(name, v, positive=True, whole=True)
    _finite("kv_dtype_bytes", kv_dtype_bytes, positive=True)
    _finite("act_bytes", act_bytes, positive=True)
    _finite("overhead_s", overhead_s)
    _finite("allreduce_latency_s", allreduce_latency_s)
    if B + P < 1:
        raise CourseError("a step needs at least one token: give decode_batch >= 1 or prefill_tokens >= 1")
    nreq = (1 if P else 0) if prefill_requests is None else int(_finite("prefill_requests", prefill_requests,
                                                                        whole=True))
    per, prec = weight_precision(weights, roof)
    sixteen = weight_precision("bf16", roof)[1] if weights != "fp32" else "fp32"
    peak_lin = roof.flops(prec) * eff["compute"]
    peak16 = roof.flops(sixteen) * eff["compute"]
    bw = roof.bandwidth * eff["memory"]
    stage = 1 / pp
    T = B + P
    p = spec.params()
    routed = p.total - p.active          # weights of the experts a token skips
    expert_total = _routed_expert_weights(spec)
    active_linear = p.linear - routed
    touched = p.linear - expert_total + expert_total * _expert_fraction(spec, T)
    lin = _kernel("linear", 2 * active_linear * T / tp * stage, touched * per / tp * stage, peak_lin, bw,
                  overlap=overlap)
    sampled = B + nreq
    head_w = spec.vocab_size * spec.hidden_size
    head_bytes = head_w * (4 if weights == "fp32" else 2) / tp
    head = _kernel("lm_head", 2 * head_w * sampled / tp, head_bytes if sampled else 0.0, peak16, bw, overlap=overlap)
    f_tok, kv_tok = _attention_per_token(spec, tp, kv_dtype_bytes)
    att_flops = B * f_tok * _attended(spec, ctx) + f_tok * P * _attended(spec, pctx + P / 2)
    att_bytes = B * kv_tok * _attended(spec, ctx) + kv_tok * (P + nreq * _attended(spec, pctx))
    att = _kernel("attention", att_flops * stage, att_bytes * stage, peak16, bw, overlap=overlap)
    kernels = [lin, head, att]
    if tp > 1:
        # two all-reduces per layer (after attention, after the MLP) of tokens x hidden activations; a ring
        # sends 2 (tp - 1) / tp of them per GPU, each direction at once: per call
        # latency + 2 (tp - 1) / tp x bytes / (bandwidth per direction x efficiency)
        calls = 2 * spec.num_layers * stage
        net = roof.allreduce_efficiency if roof.allreduce_efficiency is not None else eff["network"]
        lat = roof.allreduce_latency_s if roof.allreduce_latency_s is not None else allreduce_latency_s
        link = (roof.interconnect or roof.bandwidth) * net
        ar_bytes = calls * T * spec.hidden_size * act_bytes * 2 * (tp - 1) / tp
        kernels.append(_kernel("allreduce", 0.0, ar_bytes, 1.0, link, calls * lat, link=True))
    kernels.append(KernelTime("overhead", 0.0, 0.0, 0.0, 0.0, float(overhead_s), "overhead"))
    total = sum(k.time_s for k in kernels)
    f_sum = sum(k.flops for k in kernels)
    b_sum = lin.bytes + head.bytes + att.bytes
    c_whole, m_whole = f_sum / peak_lin, b_sum / bw
    whole = max(c_whole, m_whole) + float(overhead_s)
    return StepRoofline(spec.name, roof.name, T, B, P, tuple(kernels), total, whole,
                        "compute" if c_whole > m_whole else "memory")
