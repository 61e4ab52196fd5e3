"""Memory calculator: weights, KV cache and concurrency per GPU, computed the way vLLM 0.32 does.

One call, :func:`calculate`, answers "for this model, weight format, KV dtype, tensor-parallel
size TP and GPU, how much memory do the weights take per GPU, how many tokens of KV cache fit,
and how many requests can run at once?". Every figure comes back with its unit in its name
(``_gib`` = 2^30 B, ``_gb`` = 10^9 B, ``_bytes``) and :meth:`MemoryResult.terms` lists the
working line by line for a notebook.

The KV rule is vLLM's own (``vllm/v1/core/kv_cache_utils.py`` and ``kv_cache_interface.py``):

- KV heads per GPU = max(1, kv_heads // TP)  (replicated when TP exceeds the KV heads);
- page (one block of one layer) = 2 (K and V) x block_size x kv_heads_per_gpu x head_dim x dtype bytes;
- bytes per block = page x layers;  num_blocks = KV budget // bytes per block;
- max concurrency = num_blocks / ceil(max_model_len / block_size);
- the logged "KV cache size: N tokens" = int(max concurrency x max_model_len).

Block size: 16 tokens on CUDA GPUs (vLLM's default), **128 on the CPU backend** (vllm/platforms/cpu.py
sets it when the user does not). The KV budget per GPU is
``gpu_memory_utilization x GPU memory - weights - runtime buffer``, or an explicit
``kv_cache_memory_bytes`` (vLLM's ``--kv-cache-memory-bytes``, which the CPU engine uses).

The runtime buffer (``runtime_buffer_gib``) stands for everything vLLM holds besides weights and
KV: peak activations of the largest batch (``--max-num-batched-tokens``), CUDA graphs, the
CUDA/NCCL context and allocator slack. vLLM measures it at start-up (a profiling forward pass);
the calculator takes it as a parameter. Default 5 GiB: the seed's "temporary buffer ≈ 5 GB",
rounded up to GiB. On a real GPU replace it with what your engine's start-up log reports.
"""
from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass, field

from inferopt.errors import CourseError
from inferopt.planning import gpu_catalog as _catalog
from inferopt.planning.model_specs import ModelSpec, load_spec

GiB = 1 << 30
GB = 10**9

DTYPE_BYTES = {
    "float32": 4, "fp32": 4,
    "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1,
}
KV_DTYPES = ["auto", "bfloat16", "float16", "float32", "fp8", "fp8_e4m3", "fp8_e5m2"]

# Weight formats: bytes per weight of the *linear* (quantizable) matrices; the rest stays 16 bit
# (32 bit for fp32). INT4 adds its group scales: one fp16 scale per `group_size` weights.
WEIGHT_FORMATS = {
    "fp32": "float32 everywhere (the CPU engine's --dtype float32)",
    "bf16": "BF16/FP16, 2 bytes per weight",
    "fp16": "FP16, 2 bytes per weight",
    "fp8": "FP8 W8A8 (e.g. neuralmagic ...-FP8): linear layers 1 byte, embeddings/LM head/norms BF16",
    "int8": "INT8 W8A8 (SmoothQuant-style): linear layers 1 byte + per-channel scales, rest BF16",
    "int4": "INT4 weight-only (GPTQ/AWQ): linear layers 0.5 byte + one FP16 scale per group, rest BF16",
}

DEFAULT_GPU_MEMORY_UTILIZATION = 0.92   # vLLM 0.32's --gpu-memory-utilization default
DEFAULT_RUNTIME_BUFFER_GIB = 5.0
GPU_BLOCK_SIZE = 16                      # vLLM CacheConfig.DEFAULT_BLOCK_SIZE (CUDA)
CPU_BLOCK_SIZE = 128                     # vLLM CPU backend default (vllm/platforms/cpu.py)


def gpu_catalog() -> dict:
    """GPU catalog from assets/gpus.yaml: id -> fields (memory, TFLOP/s, bandwidth, sources).

    Read through :mod:`inferopt.planning.gpu_catalog`, the one loader of that file.
    """
    return _catalog.catalog()


def gpu_names() -> list[str]:
    """Catalog ids of assets/gpus.yaml, in file order (the memory widget's GPU choices)."""
    return _catalog.ids()


def gpu_memory_gib(gpu: str) -> float:
    """Total memory of one GPU in GiB, as nvidia-smi reports it (MiB / 1024); id or alias."""
    return _catalog.memory_gib(gpu)


def _gpu(gpu: str) -> dict:
    """The catalog entry for a catalog id or alias (CourseError listing the known GPUs otherwise)."""
    return _catalog.catalog()[_catalog.resolve(gpu)]


def dtype_bytes(dtype: str) -> int:
    if dtype not in DTYPE_BYTES:
        raise CourseError(f"unknown dtype {dtype!r}: use one of {', '.join(DTYPE_BYTES)}.")
    return DTYPE_BYTES[dtype]


def kv_dtype_bytes(kv_dtype: str, dtype: str = "bfloat16") -> int:
    """Bytes per KV element: ``auto`` means the model's compute dtype (vLLM's --kv-cache-dtype auto)."""
    if kv_dtype == "auto":
        return dtype_bytes(dtype)
    if kv_dtype not in KV_DTYPES:
        raise CourseError(f"unknown KV dtype {kv_dtype!r}: use one of {', '.join(KV_DTYPES)}.")
    return DTYPE_BYTES[kv_dtype]


def kv_bytes_per_token(spec: ModelSpec, kv_bytes: int, tp: int = 1) -> tuple[int, int]:
    """(whole model, per GPU) KV bytes one token occupies: 2 x layers x KV heads x head_dim x bytes.

    The whole-model figure counts each KV head once (it does not depend on TP); the per-GPU one
    uses max(1, kv_heads // TP) heads, so it stops shrinking once TP exceeds the KV heads.
    """
    per_gpu_heads = max(1, spec.num_kv_heads // tp)
    whole = 2 * spec.num_layers * spec.num_kv_heads * spec.head_dim * kv_bytes
    per_gpu = 2 * spec.num_layers * per_gpu_heads * spec.head_dim * kv_bytes
    return whole, per_gpu


def kv_bytes_per_request(model, tokens: int, kv_dtype: str = "auto", dtype: str = "bfloat16") -> int:
    """KV bytes (whole model, all GPUs together) one request of ``tokens`` tokens needs."""
    spec = model if isinstance(model, ModelSpec) else load_spec(model)
    return kv_bytes_per_token(spec, kv_dtype_bytes(kv_dtype, dtype))[0] * tokens


def weight_bytes(spec: ModelSpec, weight_format: str, int4_group_size: int = 128) -> dict:
    """Bytes of all weights (whole model) in a format: {'linear', 'other', 'total', 'bytes_per_linear_weight'}."""
    if weight_format not in WEIGHT_FORMATS:
        raise CourseError(f"unknown weight format {weight_format!r}: use one of {', '.join(WEIGHT_FORMATS)}.")
    p = spec.params()
    other_b = 4 if weight_format == "fp32" else 2
    if weight_format == "fp32":
        per = 4.0
    elif weight_format in ("bf16", "fp16"):
        per = 2.0
    elif weight_format in ("fp8", "int8"):
        per = 1.0
    else:
        if int4_group_size <= 0:
            raise CourseError("int4_group_size must be a positive number of weights per scale (e.g. 128).")
        per = 0.5 + 2.0 / int4_group_size
    linear = p.linear * per
    other = p.other * other_b
    return {"linear": linear, "other": other, "total": linear + other, "bytes_per_linear_weight": per}


def check_tp(spec: ModelSpec, tp: int) -> None:
    """Raise CourseError unless TP splits the heads the way vLLM requires."""
    if not (isinstance(tp, int) and tp >= 1):
        raise CourseError(f"TP must be a whole number >= 1, got {tp!r}.")
    ok = [t for t in (1, 2, 4, 8, 16, 32, 64) if _tp_ok(spec, t)]
    if spec.num_attention_heads % tp:
        raise CourseError(f"TP={tp} does not divide the {spec.num_attention_heads} attention heads of "
                          f"{spec.name}; choose TP in {ok}.")
    if not _tp_ok(spec, tp):
        raise CourseError(f"TP={tp} and the {spec.num_kv_heads} KV heads of {spec.name} do not divide "
                          f"one another (vLLM needs KV heads % TP == 0, or TP % KV heads == 0 when "
                          f"TP > KV heads); choose TP in {ok}.")


def _tp_ok(spec: ModelSpec, tp: int) -> bool:
    kv = spec.num_kv_heads
    inter = spec.moe_intermediate_size if spec.is_moe else spec.intermediate_size
    return (spec.num_attention_heads % tp == 0 and (kv % tp == 0 if kv >= tp else tp % kv == 0)
            and (inter % tp == 0 if inter else True))


@dataclass
class MemoryResult:
    """Per-GPU memory plan. Units are in the field names; counts have none."""

    model: str
    gpu: str | None
    tp: int
    weight_format: str
    kv_dtype: str
    kv_dtype_bytes: int
    block_size: int
    params_total: int
    weights_gib_total: float
    weights_gib_per_gpu: float
    gpu_memory_gib: float | None
    gpu_memory_utilization: float | None
    usable_gib_per_gpu: float | None
    runtime_buffer_gib: float | None
    kv_budget_bytes_per_gpu: int
    kv_budget_gib_per_gpu: float
    kv_heads_per_gpu: int
    kv_bytes_per_token: int            # whole model (each KV head once), independent of TP
    kv_bytes_per_token_per_gpu: int
    page_bytes_per_layer: int          # one block of one layer on one GPU
    bytes_per_block: int               # page x layers, on one GPU
    num_blocks: int
    max_model_len: int
    blocks_per_request: int
    max_concurrency: float             # vLLM's "Maximum concurrency for max_model_len tokens"
    kv_cache_tokens: int               # vLLM's "KV cache size: N tokens"
    kv_gib_allocated_per_gpu: float
    free_gib_per_gpu: float | None     # GPU memory left over: (1 - utilization) share + rounding
    workload_tokens: int | None
    blocks_per_request_workload: int | None
    max_concurrency_workload: float | None
    kv_gb_per_request_max_len: float   # whole model, decimal GB
    kv_gib_per_request_max_len: float
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)

    def engine_log_line(self) -> str:
        """The start-up line vLLM would print for this plan (device name aside)."""
        return (f"KV cache size: {self.kv_cache_tokens:,} tokens, Maximum concurrency for "
                f"{self.max_model_len:,} tokens per request: {self.max_concurrency:.2f}x")

    def terms(self) -> list[tuple[str, str, str]]:
        """The working: (quantity, value with unit, how it was computed)."""
        t = [
            ("weights, whole model", f"{self.weights_gib_total:.2f} GiB",
             f"{self.params_total:,} params in {self.weight_format}"),
            ("weights per GPU", f"{self.weights_gib_per_gpu:.2f} GiB", f"/ TP={self.tp} (norms replicated)"),
        ]
        if self.usable_gib_per_gpu is not None:
            t += [
                ("usable per GPU", f"{self.usable_gib_per_gpu:.2f} GiB",
                 f"{self.gpu_memory_utilization} x {self.gpu_memory_gib:.2f} GiB"),
                ("runtime buffer", f"{self.runtime_buffer_gib:.2f} GiB", "activations, CUDA graphs, context"),
            ]
        t += [
            ("KV budget per GPU", f"{self.kv_budget_gib_per_gpu:.3f} GiB",
             "usable - weights - buffer" if self.usable_gib_per_gpu is not None
             else "explicit (--kv-cache-memory-bytes)"),
            ("KV heads per GPU", f"{self.kv_heads_per_gpu}", f"max(1, KV heads // TP={self.tp})"),
            ("KV per token, whole model", f"{self.kv_bytes_per_token:,} B",
             f"2 x layers x KV heads x head_dim x {self.kv_dtype_bytes} B"),
            ("KV per token per GPU", f"{self.kv_bytes_per_token_per_gpu:,} B", "same with KV heads per GPU"),
            ("page (1 block, 1 layer)", f"{self.page_bytes_per_layer:,} B",
             f"2 x {self.block_size} x {self.kv_heads_per_gpu} x head_dim x {self.kv_dtype_bytes} B"),
            ("bytes per block", f"{self.bytes_per_block:,} B", "page x layers"),
            ("blocks", f"{self.num_blocks:,}", "KV budget // bytes per block"),
            ("blocks per request", f"{self.blocks_per_request}",
             f"ceil({self.max_model_len} / {self.block_size})"),
            ("max concurrency", f"{self.max_concurrency:.2f}x", "blocks / blocks per request"),
            ("KV cache size", f"{self.kv_cache_tokens:,} tokens", "int(max concurrency x max_model_len)"),
        ]
        if self.workload_tokens:
            t.append(("concurrency at workload length", f"{self.max_concurrency_workload:.2f}x",
                      f"blocks / ceil({self.workload_tokens} / {self.block_size})"))
        return t


def calculate(model="llama-3-70b", gpu: str | None = "H100-SXM-80GB", *, tp: int = 1,
              weight_format: str = "bf16", kv_dtype: str = "auto", dtype: str = "bfloat16",
              gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
              runtime_buffer_gib: float = DEFAULT_RUNTIME_BUFFER_GIB,
              max_model_len: int | None = None, input_tokens: int | None = None,
              output_tokens: int | None = None, block_size: int | None = None,
              kv_cache_memory_bytes: int | None = None, int4_group_size: int = 128) -> MemoryResult:
    """Answer "what fits on each GPU?" (see the module docstring for the rules and units).

    ``model``: a shipped name or a config.json path (or a ModelSpec). ``gpu``: an id from
    assets/gpus.yaml, or None for the CPU engine (then ``kv_cache_memory_bytes`` is required and
    the block size defaults to 128). ``max_model_len`` defaults to the model's
    max_position_embeddings, as in vLLM. ``input_tokens + output_tokens`` is the workload's real
    request length, for a second concurrency figure. Raises CourseError for impossible plans.
    """
    spec = model if isinstance(model, ModelSpec) else load_spec(model)
    check_tp(spec, tp)
    kvb = kv_dtype_bytes(kv_dtype, dtype)
    wb = weight_bytes(spec, weight_format, int4_group_size)
    warnings: list[str] = []
    if block_size is None:
        block_size = GPU_BLOCK_SIZE if gpu is not None else CPU_BLOCK_SIZE
    if not (isinstance(block_size, int) and block_size > 0):
        raise CourseError(f"block_size must be a positive whole number of tokens, got {block_size!r}.")
    if max_model_len is None:
        max_model_len = spec.max_position_embeddings or 2048
    if not (isinstance(max_model_len, int) and max_model_len > 0):
        raise CourseError(f"max_model_len must be a positive whole number of tokens, got {max_model_len!r}.")
    if spec.max_position_embeddings and max_model_len > spec.max_position_embeddings:
        warnings.append(f"max_model_len {max_model_len} exceeds the model's max_position_embeddings "
                        f"{spec.max_position_embeddings}; vLLM refuses it unless you override.")

    p = spec.params()
    norms_b = p.norms * (4 if weight_format == "fp32" else 2)
    weights_per_gpu = (wb["total"] - norms_b) / tp + norms_b
    gpu_mem = usable = buffer = free = None
    if gpu is not None:
        g = _gpu(gpu)
        gpu_mem = g["memory_mib_reported"] / 1024
        if not (0 < gpu_memory_utilization <= 1):
            raise CourseError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization!r} "
                              f"(vLLM's default is {DEFAULT_GPU_MEMORY_UTILIZATION}).")
        if runtime_buffer_gib < 0:
            raise CourseError(f"runtime_buffer_gib must be >= 0, got {runtime_buffer_gib!r}.")
        usable = gpu_memory_utilization * gpu_mem
        buffer = runtime_buffer_gib
        if weight_format == "fp8" and not g["fp8_support"]:
            warnings.append(f"{gpu} has no FP8 tensor cores: vLLM runs FP8 weights weight-only (Marlin), "
                            f"saving memory but not compute.")
        if kv_dtype.startswith("fp8") and not g["fp8_support"]:
            warnings.append(f"{gpu} has no FP8 hardware: check that your attention backend supports an "
                            f"FP8 KV cache there before relying on it.")
        if (dtype == "bfloat16" or weight_format == "bf16") and not g["bf16_support"]:
            warnings.append(f"{gpu} has no BF16: serve with --dtype float16.")
        if kv_cache_memory_bytes is None:
            budget_gib = usable - weights_per_gpu / GiB - buffer
            if budget_gib <= 0:
                raise CourseError(
                    f"{spec.name} does not fit: weights {weights_per_gpu / GiB:.2f} GiB per GPU + runtime "
                    f"buffer {buffer:.2f} GiB exceed the usable {usable:.2f} GiB "
                    f"({gpu_memory_utilization} x {gpu_mem:.2f} GiB) of one {gpu}. Raise TP (now {tp}), "
                    f"choose a smaller weight format (fp8, int4), or a GPU with more memory.")
            kv_budget = int(budget_gib * GiB)
        else:
            kv_budget = int(kv_cache_memory_bytes)
    else:
        if kv_cache_memory_bytes is None:
            raise CourseError("without a GPU (CPU engine) give kv_cache_memory_bytes, the KV budget "
                              "(--kv-cache-memory-bytes or VLLM_CPU_KVCACHE_SPACE in GiB).")
        kv_budget = int(kv_cache_memory_bytes)
    if kv_budget <= 0:
        raise CourseError(f"the KV budget must be positive, got {kv_budget} bytes.")

    heads_gpu = max(1, spec.num_kv_heads // tp)
    kv_tok, kv_tok_gpu = kv_bytes_per_token(spec, kvb, tp)
    page = 2 * block_size * heads_gpu * spec.head_dim * kvb
    per_block = page * spec.num_layers
    num_blocks = kv_budget // per_block
    bpr = -(-max_model_len // block_size)
    # vLLM's admission check keeps one block back (the null block) and needs one request to fit.
    if num_blocks - 1 < bpr:
        fit_len = max(0, (num_blocks - 1) * block_size)
        raise CourseError(
            f"the KV budget ({kv_budget / GiB:.3f} GiB per GPU = {num_blocks} blocks of {block_size} tokens) "
            f"cannot hold one request of max_model_len={max_model_len} ({bpr} blocks + 1 reserved). "
            f"Lower max_model_len to at most {fit_len}, or give the KV cache more memory "
            f"(higher gpu_memory_utilization, smaller weights, larger TP).")
    conc = num_blocks / bpr
    tokens = int(conc * max_model_len)
    workload = None
    bpr_w = conc_w = None
    if input_tokens is not None or output_tokens is not None:
        workload = int(input_tokens or 0) + int(output_tokens or 0)
        if workload <= 0:
            raise CourseError("input_tokens + output_tokens must be positive.")
        if workload > max_model_len:
            warnings.append(f"the workload's {workload} tokens exceed max_model_len {max_model_len}.")
        bpr_w = -(-workload // block_size)
        conc_w = num_blocks / bpr_w
    alloc = num_blocks * per_block
    if gpu is not None:
        free = gpu_mem - weights_per_gpu / GiB - buffer - alloc / GiB
        if free < 0:
            warnings.append(f"weights + buffer + KV exceed the GPU's {gpu_mem:.2f} GiB by {-free:.2f} GiB.")
    per_req = kv_tok * max_model_len
    return MemoryResult(
        model=spec.name, gpu=gpu, tp=tp, weight_format=weight_format, kv_dtype=kv_dtype,
        kv_dtype_bytes=kvb, block_size=block_size, params_total=p.total,
        weights_gib_total=wb["total"] / GiB, weights_gib_per_gpu=weights_per_gpu / GiB,
        gpu_memory_gib=gpu_mem, gpu_memory_utilization=gpu_memory_utilization if gpu else None,
        usable_gib_per_gpu=usable if kv_cache_memory_bytes is None else None,
        runtime_buffer_gib=buffer, kv_budget_bytes_per_gpu=kv_budget,
        kv_budget_gib_per_gpu=kv_budget / GiB, kv_heads_per_gpu=heads_gpu,
        kv_bytes_per_token=kv_tok, kv_bytes_per_token_per_gpu=kv_tok_gpu,
        page_bytes_per_layer=page, bytes_per_block=per_block, num_blocks=num_blocks,
        max_model_len=max_model_len, blocks_per_request=bpr, max_concurrency=conc,
        kv_cache_tokens=tokens, kv_gib_allocated_per_gpu=alloc / GiB, free_gib_per_gpu=free,
        workload_tokens=workload, blocks_per_request_workload=bpr_w, max_concurrency_workload=conc_w,
        kv_gb_per_request_max_len=per_req / GB, kv_gib_per_request_max_len=per_req / GiB,
        warnings=warnings)


@dataclass
class StartVerdict:
    """"Will vLLM start?" for one plan, the way vLLM 0.32 decides it at start-up.

    ``will_start`` is false when the weights (+ runtime buffer) do not fit in the usable memory, or
    when the KV budget cannot hold one request of ``max_model_len`` (vLLM's ValueError "To serve at
    least one request with the model's max seq len ..."). ``max_model_len_estimate`` is the figure
    vLLM prints in that error ("the estimated maximum model length is N"): the longest request the
    KV budget holds, (blocks - 1 null block) x block size; None when the weights do not fit at all.
    ``result`` is the full :class:`MemoryResult` when the engine starts, else None."""
    will_start: bool
    reason: str
    weights_fit: bool
    weights_gib_per_gpu: float
    max_model_len: int
    max_model_len_estimate: int | None
    kv_budget_bytes_per_gpu: int | None
    num_blocks: int | None
    advice: str
    result: MemoryResult | None = None

    def as_dict(self) -> dict:
        d = asdict(self)
        d.pop("result")
        return d


def start_verdict(model="llama-3-70b", gpu: str | None = "H100-SXM-80GB", **kw) -> StartVerdict:
    """``calculate`` as a verdict instead of an error: will vLLM start with this plan, and if not, why
    and what max_model_len it would accept. Same arguments as :func:`calculate`."""
    spec = model if isinstance(model, ModelSpec) else load_spec(model)
    try:
        r = calculate(spec, gpu, **kw)
    except CourseError as exc:
        msg = str(exc)
        tp = kw.get("tp", 1)
        wf = kw.get("weight_format", "bf16")
        wb = weight_bytes(spec, wf, kw.get("int4_group_size", 128))
        norms_b = spec.params().norms * (4 if wf == "fp32" else 2)
        w_gpu = ((wb["total"] - norms_b) / tp + norms_b) / GiB
        mml = kw.get("max_model_len") or spec.max_position_embeddings or 2048
        if "does not fit" in msg:
            return StartVerdict(False, msg, False, w_gpu, mml, None, None, None,
                                "Raise TP, choose a smaller weight format (fp8, int4), or a GPU with more memory.")
        if "cannot hold one request" in msg:
            # recompute the block arithmetic the error reports
            probe = calculate(spec, gpu, **{**kw, "max_model_len": (kw.get("block_size") or (GPU_BLOCK_SIZE if gpu else CPU_BLOCK_SIZE))})
            est = max(0, (probe.num_blocks - 1) * probe.block_size)
            advice = (f"Lower --max-model-len to at most {est}" if est > 0 else "Nothing fits") + (
                ", or give the KV cache more memory (--kv-cache-memory-bytes, a higher --gpu-memory-utilization, "
                "smaller weights, larger TP).")
            return StartVerdict(False, msg, True, w_gpu, mml, est or None, probe.kv_budget_bytes_per_gpu,
                                probe.num_blocks, advice)
        raise
    return StartVerdict(True, "the weights fit and the KV budget holds at least one max_model_len request",
                        True, r.weights_gib_per_gpu, r.max_model_len, None, r.kv_budget_bytes_per_gpu,
                        r.num_blocks, "", r)


def cpu_engine_prediction(kv_cache_gib: float = 1.0, max_model_len: int = 2048, dtype: str = "float32",
                          kv_dtype: str = "auto", model="smollm2-135m-instruct") -> MemoryResult:
    """What the course's CPU engine (inferopt.serving.engine.VLLMServer) will log at start-up.

    The engine passes ``--kv-cache-memory-bytes int(kv_cache_gib x 2^30)``; the CPU backend uses
    128-token blocks.
    """
    return calculate(model, gpu=None, tp=1, weight_format="fp32" if dtype == "float32" else "bf16",
                     kv_dtype=kv_dtype, dtype=dtype, max_model_len=max_model_len,
                     kv_cache_memory_bytes=int(kv_cache_gib * GiB), block_size=CPU_BLOCK_SIZE)


def engine_prediction(srv) -> MemoryResult:
    """The prediction for a started or configured ``inferopt.serving.engine.VLLMServer`` with the default model.

    CPU: 128-token blocks and the server's dtype (float32 by default). GPU (not verified on this
    course's CI): 16-token blocks (vLLM's CUDA default) and bfloat16 for ``dtype=None`` ('auto' for
    SmolLM2); needs an explicit ``kv_cache_gib`` there, since otherwise vLLM sizes the KV cache
    from its own memory profile.
    """
    if srv.kv_cache_gib is None:
        raise CourseError("give the server kv_cache_gib=... so the KV budget is known "
                          "(without it vLLM sizes the cache from its start-up memory profile).")
    model = getattr(srv, "spec_source", None) or "smollm2-135m-instruct"   # the served model's config.json
    if srv.kind == "cpu":
        return cpu_engine_prediction(srv.kv_cache_gib, srv.max_model_len, srv.dtype or "float32", model=model)
    dtype = srv.dtype if srv.dtype not in (None, "auto") else "bfloat16"
    return calculate(model, None, tp=1, weight_format="bf16", dtype=dtype,
                     max_model_len=srv.max_model_len, kv_cache_memory_bytes=int(srv.kv_cache_gib * GiB),
                     block_size=GPU_BLOCK_SIZE)


# ---------------------------------------------------------------- CLI: python -m inferopt memory
def add_subcommand(subparsers) -> None:
    p = subparsers.add_parser("memory", help="weights, KV cache and concurrency per GPU (vLLM's rules)",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="llama-3-70b", help="shipped model name or path to config.json")
    p.add_argument("--gpu", default="H100-SXM-80GB", help="GPU id or alias (H100) from assets/gpus.yaml, or 'cpu'")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel size")
    p.add_argument("--weights", default="bf16", choices=list(WEIGHT_FORMATS), help="weight format")
    p.add_argument("--kv-dtype", default="auto", choices=KV_DTYPES)
    p.add_argument("--dtype", default="bfloat16", help="compute dtype (what kv-dtype auto means)")
    p.add_argument("--gpu-memory-utilization", type=float, default=DEFAULT_GPU_MEMORY_UTILIZATION)
    p.add_argument("--runtime-buffer-gib", type=float, default=DEFAULT_RUNTIME_BUFFER_GIB)
    p.add_argument("--max-model-len", type=int, default=None)
    p.add_argument("--input-tokens", type=int, default=None)
    p.add_argument("--output-tokens", type=int, default=None)
    p.add_argument("--block-size", type=int, default=None, help="16 on GPU, 128 on CPU by default")
    p.add_argument("--kv-cache-memory-bytes", type=int, default=None)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cli)


def _cli(args: argparse.Namespace) -> int:
    gpu = None if args.gpu.lower() == "cpu" else args.gpu
    kw = {"tp": args.tp, "weight_format": args.weights, "kv_dtype": args.kv_dtype, "dtype": args.dtype,
          "gpu_memory_utilization": args.gpu_memory_utilization, "runtime_buffer_gib": args.runtime_buffer_gib,
          "max_model_len": args.max_model_len, "input_tokens": args.input_tokens, "output_tokens": args.output_tokens,
          "block_size": args.block_size, "kv_cache_memory_bytes": args.kv_cache_memory_bytes}
    v = start_verdict(args.model, gpu, **kw)
    if args.json:
        out = v.result.as_dict() if v.result is not None else {}
        out.update({"will_start": v.will_start, "max_model_len_estimate": v.max_model_len_estimate,
                    "start_reason": v.reason, "start_advice": v.advice,
                    "weights_fit": v.weights_fit})
        print(json.dumps(out, indent=2, sort_keys=True))
        return 0
    if not v.will_start:
        raise CourseError(f"vLLM will not start: {v.reason}")
    r = v.result
    if args.json:
        print(json.dumps(r.as_dict(), indent=2, sort_keys=True))
    else:
        width = max(len(a) for a, _, _ in r.terms())
        for name, value, how in r.terms():
            print(f"{name:<{width}}  {value:>18}   {how}")
        for w in r.warnings:
            print(f"warning: {w}")
    return 0
