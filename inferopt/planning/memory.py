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

Runtime memory (what vLLM holds besides weights and KV) on a GPU follows vLLM 0.32's own
accounting by default (``runtime="model"``, :mod:`inferopt.planning.runtime_memory`): the total as
``cudaMemGetInfo`` reports it, ``ceil(total x utilization)`` requested, minus the estimated
activation peak of the token budget (``--max-num-batched-tokens``, vLLM's default per GPU), the
logits of the dummy sampler run, non-torch memory and the CUDA-graph estimate (from vLLM 0.21 on;
``vllm_version`` selects older accounting so public logs can be checked). The original chapter's
flat "temporary buffer ≈ 5 GB" stays available as its stated assumption: ``runtime="original-5gb"``
(5 GiB on the nvidia-smi total), or any flat ``runtime_buffer_gib``.

Architectures: MLA models cache one latent per token and layer (``kv_lora_rank +
qk_rope_head_dim``, vLLM's ``MLAAttentionSpec`` in ``vllm/v1/kv_cache_interface.py``: one KV head,
``head_size_v = 0``, replicated on every TP rank); MoE counts routed + shared experts; a quantized
checkpoint's ``quantization_config`` decides which linear layers stay 16 bit. Sliding-window
attention is refused (vLLM sizes it with ``SlidingWindowSpec`` and the hybrid KV cache manager,
which this calculator does not model).

Pipeline parallelism (``pp`` stages of ``tp`` GPUs each, :mod:`inferopt.planning.pipeline`): the layers
are split over the stages as vLLM's ``get_pp_indices`` does (or ``VLLM_PP_LAYER_PARTITION``); each GPU
caches KV for its own stage's layers only, and the largest stage bounds the block count (vLLM keeps
the minimum over workers); weights per GPU are the largest stage's. KV heads per GPU stay
max(1, kv_heads // TP): TP8 x PP2 is not TP16.
"""
from __future__ import annotations

import argparse
import json
import re
from dataclasses import asdict, dataclass, field
from functools import lru_cache

from inferopt.errors import CourseError
from inferopt.i18n import columns, localize, pad
from inferopt.planning import gpu_catalog as _catalog
from inferopt.planning import pipeline as _pp
from inferopt.planning import platform_defaults as _PLATFORM
from inferopt.planning import runtime_memory as _rt
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
    "auto": "the checkpoint's own format: its quantization_config (modules it keeps in BF16 counted in BF16), "
            "else BF16",
}

DEFAULT_GPU_MEMORY_UTILIZATION = 0.92   # vLLM 0.32's --gpu-memory-utilization default
DEFAULT_RUNTIME_BUFFER_GIB = 5.0        # the original chapter's flat buffer (runtime="original-5gb")
RUNTIME_MODES = _rt.RUNTIME_MODES
GPU_BLOCK_SIZE = _PLATFORM.GPU.block_size   # vLLM CacheConfig default on CUDA (planning/platform_defaults.py)
CPU_BLOCK_SIZE = _PLATFORM.CPU.block_size   # vLLM CPU backend default (planning/platform_defaults.py)


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
    MLA (DeepSeek-V2/V3): layers x (kv_lora_rank + qk_rope_head_dim) x bytes, one latent head, not
    doubled for K and V, and the same on every GPU (vLLM replicates it across TP ranks).
    """
    whole_heads = 1 if spec.is_mla else spec.num_kv_heads
    whole = spec.num_layers * whole_heads * spec.kv_entry_width() * kv_bytes
    per_gpu = spec.num_layers * spec.kv_heads_per_gpu(tp) * spec.kv_entry_width() * kv_bytes
    return whole, per_gpu


def kv_bytes_per_request(model, tokens: int, kv_dtype: str = "auto", dtype: str = "bfloat16") -> int:
    """KV bytes (whole model, all GPUs together) one request of ``tokens`` tokens needs."""
    spec = model if isinstance(model, ModelSpec) else load_spec(model)
    return kv_bytes_per_token(spec, kv_dtype_bytes(kv_dtype, dtype))[0] * tokens


def _linear_bytes_per_weight(weight_format: str, int4_group_size: int) -> float:
    if weight_format == "fp32":
        return 4.0
    if weight_format in ("bf16", "fp16"):
        return 2.0
    if weight_format in ("fp8", "int8"):
        return 1.0
    if int4_group_size <= 0:
        raise CourseError("int4_group_size must be a positive number of weights per scale (e.g. 128).")
    return 0.5 + 2.0 / int4_group_size


def resolve_weight_format(spec: ModelSpec, weight_format: str) -> str:
    """'auto' -> the checkpoint's format (its quantization_config, else bf16); others unchanged."""
    if weight_format not in WEIGHT_FORMATS:
        raise CourseError(f"unknown weight format {weight_format!r}: use one of {', '.join(WEIGHT_FORMATS)}.")
    if weight_format != "auto":
        return weight_format
    return spec.quant_weight_format or "bf16"


def _ignored(name: str, patterns: tuple) -> bool:
    for p in patterns:
        if p.startswith("re:"):
            if re.search(p[3:], name):
                return True
        elif name == p or name.startswith(p + ".") or name.endswith("." + p) or name.endswith(p):
            return True
    return False


@lru_cache(maxsize=512)
def _weight_bytes_cached(spec: ModelSpec, weight_format: str, int4_group_size: int) -> tuple:
    p = spec.params()
    other_b = 4 if weight_format == "fp32" else 2
    per = _linear_bytes_per_weight(weight_format, int4_group_size)
    quantized = weight_format in ("fp8", "int8", "int4")
    kept = 0
    if quantized and spec.quant_ignore:
        kept = sum(n for name, n in spec.linear_modules() if _ignored(name, spec.quant_ignore))
    linear = (p.linear - kept) * per + kept * 2.0
    other = p.other * other_b
    return linear, other, per, kept


def weight_bytes(spec: ModelSpec, weight_format: str, int4_group_size: int = 128) -> dict:
    """Bytes of all weights (whole model) in a format: {'linear', 'other', 'total', 'bytes_per_linear_weight',
    'linear_kept_16bit'}.

    For a quantized format, the linear layers the checkpoint's ``quantization_config`` lists as not
    converted (``modules_to_not_convert`` / ``ignore`` / ``ignored_layers``) are counted in BF16 (e.g.
    Meta's Llama-3.1-405B-Instruct-FP8 keeps every self-attention projection and the first and last
    layers' MLP in BF16). ``weight_format='auto'`` takes the checkpoint's own format.
    """
    fmt = resolve_weight_format(spec, weight_format)
    linear, other, per, kept = _weight_bytes_cached(spec, fmt, int4_group_size)
    return {"linear": linear, "other": other, "total": linear + other, "bytes_per_linear_weight": per,
            "linear_kept_16bit": kept, "format": fmt}


def lora_slot_bytes(spec: ModelSpec, tp: int = 1, max_lora_rank: int = 16, dtype_bytes: int = 2,
                    layers: int | None = None) -> int:
    """Bytes one LoRA slot takes on one GPU: vLLM allocates, at start-up, for each of ``--max-loras`` slots the
    A and B matrices of rank ``--max-lora-rank`` beside every decoder linear layer (vllm/lora/layers/base_linear.py
    and column_parallel_linear.py ``create_lora_weights``: ``lora_a_stacked`` max_loras x rank x input per slice,
    ``lora_b_stacked`` max_loras x output x rank; column-parallel layers keep the full input and split the output
    by TP, row-parallel ones the reverse), in the model dtype (LoRAConfig.lora_dtype auto). Counted: the QKV
    projection (3 slices), the attention output, gate/up (2 slices) and down of a dense MLP; experts' LoRA (MoE)
    and the embedding / LM-head slots some models add are not."""
    if spec.is_mla:
        raise CourseError(f"{spec.name}: LoRA slots of MLA attention are not sized by this calculator; read the "
                          "memory the engine's start-up log gives with --enable-lora")
    h, r = spec.hidden_size, max_lora_rank
    q, kv = spec.num_attention_heads * spec.head_dim // tp, spec.kv_heads_per_gpu(tp) * spec.head_dim
    inter = spec.intermediate_size // tp
    qkv = 3 * r * h + (q + 2 * kv) * r          # column-parallel, 3 slices: A r x hidden each, B out/TP x r
    o = r * q + h * r                           # row-parallel: A r x in/TP, B hidden x r
    mlp = 0 if spec.is_moe else (2 * r * h + 2 * inter * r) + (r * inter + h * r)
    return (qkv + o + mlp) * (spec.num_layers if layers is None else layers) * dtype_bytes


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
    kv = 1 if spec.is_mla else spec.num_kv_heads
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
    runtime: dict | None = None        # RuntimeMemory.as_dict(): mode, version, parts (GiB), token budget
    gpu_total_source: str | None = None  # where gpu_memory_gib comes from (cudaMemGetInfo log, estimate, nvidia-smi)
    kv_latent: bool = False            # MLA: one latent per token and layer instead of K and V heads
    pp: int = 1                        # pipeline-parallel stages (GPUs in all: tp x pp)
    pp_stage_layers: list[int] | None = None   # decoder layers per stage (get_pp_indices); None for PP=1
    kv_groups: list | None = None      # sliding-window / hybrid: vLLM's KV-cache groups [[spec kind, layers], ...]
    lora_gib_per_gpu: float = 0.0      # --max-loras slots of --max-lora-rank (lora_slot_bytes), beside the weights
    max_loras: int = 0
    max_lora_rank: int = 16

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
            ("weights per GPU", f"{self.weights_gib_per_gpu:.2f} GiB", f"/ TP={self.tp} (norms replicated)"
             if self.pp == 1 else f"largest of PP={self.pp} stages {self.pp_stage_layers} layers, / TP={self.tp}"),
        ]
        if self.usable_gib_per_gpu is not None:
            t.append(("usable per GPU", f"{self.usable_gib_per_gpu:.2f} GiB",
                      f"{self.gpu_memory_utilization} x {self.gpu_memory_gib:.2f} GiB ({self.gpu_total_source})"))
            rt = self.runtime or {}
            if rt.get("mode") == "model":
                t.append(("runtime memory", f"{self.runtime_buffer_gib:.2f} GiB",
                          f"estimated, vLLM {rt['vllm_version']} accounting ({rt['accounting']}): parts below"))
                t += [(f"  {name}", f"{gib:.2f} GiB", how) for name, gib, how in runtime_parts(rt)]
            else:
                t.append(("runtime buffer", f"{self.runtime_buffer_gib:.2f} GiB",
                          "flat: the original chapter's assumption" if rt.get("mode") == "original-5gb"
                          else "flat (given): activations, CUDA graphs, context"))
        if self.max_loras:
            t.append(("LoRA slots", f"{self.lora_gib_per_gpu:.2f} GiB",
                      f"{self.max_loras} x rank {self.max_lora_rank} A and B beside every linear layer"))
        lora = " - LoRA slots" if self.max_loras else ""
        t += [
            ("KV budget per GPU", f"{self.kv_budget_gib_per_gpu:.3f} GiB",
             ("usable - weights - runtime memory" + lora if (self.runtime or {}).get("mode") == "model"
              else "usable - weights - buffer" + lora) if self.usable_gib_per_gpu is not None
             else "explicit (--kv-cache-memory-bytes)"),
            ("KV heads per GPU", f"{self.kv_heads_per_gpu}",
             "one latent head (MLA), the same on every TP rank" if self.kv_latent
             else f"max(1, KV heads // TP={self.tp})"),
            ("KV per token, whole model", f"{self.kv_bytes_per_token:,} B",
             f"layers x (kv_lora_rank + rope dim) x {self.kv_dtype_bytes} B (MLA latent)" if self.kv_latent
             else f"2 x layers x KV heads x head_dim x {self.kv_dtype_bytes} B"),
            ("KV per token per GPU", f"{self.kv_bytes_per_token_per_gpu:,} B", "same with KV heads per GPU"),
            ("page (1 block, 1 layer)", f"{self.page_bytes_per_layer:,} B",
             f"{self.block_size} x 1 latent x (kv_lora_rank + rope dim) x {self.kv_dtype_bytes} B" if self.kv_latent
             else f"2 x {self.block_size} x {self.kv_heads_per_gpu} x head_dim x {self.kv_dtype_bytes} B"),
            ("bytes per block", f"{self.bytes_per_block:,} B", "page x layers" if self.pp == 1 else
             f"page x {max(self.pp_stage_layers)} layers (largest of the PP stages {self.pp_stage_layers})"),
            ("blocks", f"{self.num_blocks:,}", "KV budget // bytes per block"),
            ("blocks per request", f"{self.blocks_per_request}",
             f"ceil({self.max_model_len} / {self.block_size})" if not self.kv_groups else
             "vLLM's specs: a sliding-window group holds ceil(min(window - 1 + token budget, max_model_len) / block) "
             "+ 1 blocks (SlidingWindowSpec.max_memory_usage_bytes)"),
            ("max concurrency", f"{self.max_concurrency:.2f}x", "blocks / blocks per request"),
            ("KV cache size", f"{self.kv_cache_tokens:,} tokens", "int(max concurrency x max_model_len)"),
        ]
        if self.workload_tokens:
            t.append(("concurrency at workload length", f"{self.max_concurrency_workload:.2f}x",
                      f"blocks / ceil({self.workload_tokens} / {self.block_size})"))
        return t


def runtime_parts(rt: dict) -> list[tuple[str, float, str]]:
    """(name, GiB, how) of a MemoryResult's ``runtime`` dict (see :class:`runtime_memory.RuntimeMemory`)."""
    return _rt.RuntimeMemory(**rt).parts()


def gpu_total(gpu: str, runtime: str = "model") -> tuple[float, str]:
    """(GiB, where it comes from) of the GPU total the calculator budgets from.

    'model': what ``cudaMemGetInfo`` reports, as vLLM uses it (``cuda_total_gib`` in assets/gpus.yaml,
    read from a cited log or measurement; else nvidia-smi's total minus an estimated driver reserve).
    Flat buffers (the original chapter's assumption): nvidia-smi's total, as before.
    """
    g = _gpu(gpu)
    if runtime != "model":
        return g["memory_mib_reported"] / 1024, "total as nvidia-smi reports it"
    if g.get("cuda_total_gib"):
        return float(g["cuda_total_gib"]), "cudaMemGetInfo total, from a cited log"
    est = g["memory_mib_reported"] / 1024 - _rt.DRIVER_RESERVE_GIB
    return est, f"estimated cudaMemGetInfo total: nvidia-smi - {_rt.DRIVER_RESERVE_GIB} GiB"


def _weights_per_gpu(spec: ModelSpec, wb: dict, tp: int, pp: int = 1, pp_layer_partition: str | None = None) -> float:
    """Bytes of weights on one GPU: everything split TP ways except the norms, which are replicated.

    PP > 1: the largest stage's share (its decoder layers, the embedding on the first stage, the LM
    head, a copy of the embedding when tied, and the final norm on the last), layers taken as equal."""
    p = spec.params()
    ob = 4 if wb["format"] == "fp32" else 2
    norms_b = p.norms * ob
    if pp == 1 and pp_layer_partition is None:
        return (wb["total"] - norms_b) / tp + norms_b
    parts = _pp.stage_layers(spec.num_layers, pp, pp_layer_partition)
    final_norm_b = spec.hidden_size * ob
    emb_b, head_b = p.embedding * ob, (p.lm_head or p.embedding) * ob
    layer_norm_b = (norms_b - final_norm_b) / spec.num_layers
    layer_rest_b = (wb["total"] - emb_b - p.lm_head * ob - norms_b) / spec.num_layers
    stages = [n * (layer_rest_b / tp + layer_norm_b) for n in parts]
    stages[0] += emb_b / tp
    stages[-1] += head_b / tp + final_norm_b
    return max(stages)


@dataclass
class GpuBudget:
    """One GPU's memory budget before the KV cache is cut into blocks (GiB)."""

    weights_gib_per_gpu: float
    total_gib: float
    total_source: str
    requested_gib: float               # vLLM's ceil(total x utilization) (flat buffers: total x utilization)
    runtime: _rt.RuntimeMemory
    kv_budget_gib: float               # requested - weights - runtime; may be negative (weights do not fit)


def gpu_budget(model, gpu: str, *, tp: int = 1, weight_format: str = "bf16", dtype: str = "bfloat16",
               gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
               runtime_buffer_gib: float | None = None, max_model_len: int | None = None,
               int4_group_size: int = 128, runtime: str = "model", vllm_version: str | None = None,
               max_num_batched_tokens: int | None = None, max_num_seqs: int | None = None,
               cuda_total_gib: float | None = None, usage: str = "server", enforce_eager: bool = False,
               pp: int = 1, pp_layer_partition: str | None = None) -> GpuBudget:
    """The KV budget of one GPU as vLLM computes it at start-up (before blocks and the one-request check).

    Same arguments as :func:`calculate`. Used by it, and by :func:`startup_log_rows` to set each
    public start-up log beside the model even when that engine refused to start.
    """
    spec = model if isinstance(model, ModelSpec) else load_spec(model)
    g = _gpu(gpu)
    if not (0 < gpu_memory_utilization <= 1):     # vLLM's refusal first (CacheConfig's pydantic bound)
        bound = "less than or equal to 1" if gpu_memory_utilization > 1 else "greater than 0"
        raise CourseError(f"vLLM 0.32 refuses: CacheConfig: gpu_memory_utilization: Input should be {bound} "
                          f"(got {gpu_memory_utilization!r}; vLLM's default is {DEFAULT_GPU_MEMORY_UTILIZATION}).")
    if runtime not in RUNTIME_MODES:
        raise CourseError(f"runtime must be one of {', '.join(RUNTIME_MODES)}, got {runtime!r}.")
    wb = weight_bytes(spec, weight_format, int4_group_size)
    w_gpu = _weights_per_gpu(spec, wb, tp, pp, pp_layer_partition) / GiB
    flat = runtime_buffer_gib is not None or runtime == "original-5gb"
    total, src = gpu_total(gpu, "flat" if flat else "model")
    if cuda_total_gib is not None and not flat:
        if not (isinstance(cuda_total_gib, (int, float)) and cuda_total_gib > 0):
            raise CourseError(f"cuda_total_gib must be a positive number of GiB, got {cuda_total_gib!r}.")
        total, src = float(cuda_total_gib), "cudaMemGetInfo total, given"
    rt = _rt.runtime_memory(
        spec, tp=tp, dtype_bytes=dtype_bytes(dtype), mode=runtime, flat_gib=runtime_buffer_gib,
        vllm_version=vllm_version, max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
        device_total_gib=g["memory_mib_reported"] / 1024, gpu_name=g["name"],
        max_model_len=max_model_len or spec.max_position_embeddings or 2048, usage=usage, enforce_eager=enforce_eager)
    requested = gpu_memory_utilization * total if flat else _rt.requested_gib(total, gpu_memory_utilization)
    return GpuBudget(w_gpu, total, src, requested, rt, requested - w_gpu - rt.total_gib)


def _refuse_on_gpu(spec: ModelSpec, gpu: str, weight_format: str, kv_dtype: str) -> None:
    """vLLM's own refusal first, in the order the engine meets them: the quantization method's capability
    floor (VllmConfig, while the config is built), then the FP8 KV cache in the attention backend's
    constructor (model init). Both lines come from the hardware table (assets/hardware_rules.yaml)."""
    from inferopt.planning import hardware
    # vLLM reads a checkpoint's quantization_config whatever format the calculator is asked to size it as
    method = spec.quant_method or ("fp8" if weight_format == "fp8" else "")
    line = hardware.quantization_refusal(method, gpu) if method else None
    if line is None and str(kv_dtype).startswith("fp8"):
        line = hardware.fp8_kv_refusal(gpu)
    if line is not None:
        raise CourseError(f"vLLM 0.32 refuses: {line}")


def calculate(model="llama-3-70b", gpu: str | None = "H100-SXM-80GB", *, tp: int = 1,
              weight_format: str = "bf16", kv_dtype: str = "auto", dtype: str = "bfloat16",
              gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
              runtime_buffer_gib: float | None = None,
              max_model_len: int | None = None, input_tokens: int | None = None,
              output_tokens: int | None = None, block_size: int | None = None,
              kv_cache_memory_bytes: int | None = None, int4_group_size: int = 128,
              runtime: str = "model", vllm_version: str | None = None,
              max_num_batched_tokens: int | None = None, max_num_seqs: int | None = None,
              cuda_total_gib: float | None = None, usage: str = "server",
              enforce_eager: bool = False, pp: int = 1, pp_layer_partition: str | None = None,
              max_loras: int = 0, max_lora_rank: int = 16) -> MemoryResult:
    """Answer "what fits on each GPU?" (see the module docstring for the rules and units).

    ``max_loras`` / ``max_lora_rank``: vLLM's --max-loras / --max-lora-rank with --enable-lora; the LoRA slots
    (:func:`lora_slot_bytes`) are allocated beside the weights and leave the KV cache less.

    ``model``: a shipped name or a config.json path (or a ModelSpec). ``gpu``: an id from
    assets/gpus.yaml, or None for the CPU engine (then ``kv_cache_memory_bytes`` is required and
    the block size defaults to 128). ``max_model_len`` defaults to the model's
    max_position_embeddings, as in vLLM. ``input_tokens + output_tokens`` is the workload's real
    request length, for a second concurrency figure. Raises CourseError for impossible plans.

    Runtime memory on a GPU: ``runtime='model'`` (default; vLLM 0.32's accounting with estimated
    parts, ``vllm_version`` for older accounting, ``max_num_batched_tokens`` / ``max_num_seqs``
    default to vLLM's per-GPU defaults, ``cuda_total_gib`` overrides the GPU total with the one
    your log prints); ``runtime='original-5gb'`` (the original chapter's flat 5 GiB); or a flat
    ``runtime_buffer_gib``.

    ``pp``: pipeline-parallel stages; ``pp_layer_partition``: vLLM's ``VLLM_PP_LAYER_PARTITION``.
    """
    spec = model if isinstance(model, ModelSpec) else load_spec(model)
    check_tp(spec, tp)
    stages = _pp.stage_layers(spec.num_layers, pp, pp_layer_partition)
    kvb = kv_dtype_bytes(kv_dtype, dtype)
    wb = weight_bytes(spec, weight_format, int4_group_size)
    warnings: list[str] = []
    if block_size is None:
        block_size = GPU_BLOCK_SIZE if gpu is not None else CPU_BLOCK_SIZE
    if not (isinstance(block_size, int) and block_size > 0):
        raise CourseError(f"block_size must be a positive whole number of tokens, got {block_size!r}.")
    if max_model_len is None or max_model_len in (-1, "auto"):   # vLLM 0.32: -1 / auto = the derived maximum
        max_model_len = spec.max_position_embeddings or 2048
    if not (isinstance(max_model_len, int) and max_model_len > 0):
        raise CourseError(f"max_model_len must be a positive whole number of tokens (or auto / -1), got {max_model_len!r}.")
    if spec.max_position_embeddings and max_model_len > spec.max_position_embeddings:
        # vLLM's refusal first (ModelConfig, its derived max_model_len; tests/test_vllm_oracle_fastpath.py keeps
        # max_position_embeddings equal to what vLLM derives for every shipped model)
        raise CourseError(f"vLLM 0.32 refuses: ModelConfig: User-specified max_model_len ({max_model_len}) is greater "
                          f"than the derived max_model_len (max_position_embeddings={spec.max_position_embeddings} in "
                          f"the model's config.json); lower --max-model-len to at most {spec.max_position_embeddings}.")
    if spec.quant_method and weight_format not in ("auto", spec.quant_weight_format):
        warnings.append(f"the checkpoint is quantized ({spec.quant_method}, {spec.quant_weight_format}) but is "
                        f"sized as {weight_format}; weight_format='auto' sizes it as stored.")

    p = spec.params()
    weights_per_gpu = _weights_per_gpu(spec, wb, tp, pp, pp_layer_partition)
    if not (isinstance(max_loras, int) and max_loras >= 0 and isinstance(max_lora_rank, int) and max_lora_rank > 0):
        raise CourseError(f"max_loras must be a whole number >= 0 and max_lora_rank > 0, got {max_loras!r} and "
                          f"{max_lora_rank!r}; give --max-loras N --max-lora-rank R as vLLM takes them")
    lora_bytes = max_loras * lora_slot_bytes(spec, tp, max_lora_rank, dtype_bytes(dtype), max(stages)) if max_loras \
        else 0
    if lora_bytes and spec.is_moe:
        warnings.append(f"{spec.name} is MoE: the LoRA slots of its experts are not counted (dense layers only).")
    gpu_mem = usable = buffer = free = None
    rt_dict = total_src = None
    if gpu is not None:
        g = _gpu(gpu)
        b = gpu_budget(spec, gpu, tp=tp, weight_format=weight_format, dtype=dtype,
                       gpu_memory_utilization=gpu_memory_utilization, runtime_buffer_gib=runtime_buffer_gib,
                       max_model_len=max_model_len, int4_group_size=int4_group_size, runtime=runtime,
                       vllm_version=vllm_version, max_num_batched_tokens=max_num_batched_tokens,
                       max_num_seqs=max_num_seqs, cuda_total_gib=cuda_total_gib, usage=usage,
                       enforce_eager=enforce_eager, pp=pp, pp_layer_partition=pp_layer_partition)
        _refuse_on_gpu(spec, gpu, weight_format, kv_dtype)   # after CacheConfig's bounds, as vLLM meets them
        flat = b.runtime.mode != "model"
        gpu_mem, total_src, usable, buffer = b.total_gib, b.total_source, b.requested_gib, b.runtime.total_gib
        rt_dict = b.runtime.as_dict()
        if wb["format"] == "fp8" and not g["fp8_support"]:
            warnings.append(f"{gpu} has no FP8 tensor cores: vLLM runs FP8 weights weight-only (Marlin), "
                            f"saving memory but not compute.")
        if (dtype == "bfloat16" or wb["format"] == "bf16") and not g["bf16_support"]:
            warnings.append(f"{gpu} has no BF16: serve with --dtype float16.")
        if kv_cache_memory_bytes is None:
            budget_gib = b.kv_budget_gib - lora_bytes / GiB
            if budget_gib <= 0:
                what = "runtime buffer" if flat else "estimated runtime memory"
                raise CourseError(
                    f"{spec.name} does not fit: weights {weights_per_gpu / GiB:.2f} GiB per GPU + {what} "
                    f"{buffer:.2f} GiB exceed the usable {usable:.2f} GiB "
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

    heads_gpu = spec.kv_heads_per_gpu(tp)
    kv_tok, kv_tok_gpu = kv_bytes_per_token(spec, kvb, tp)
    stage_max = max(stages)     # the largest PP stage bounds the blocks every stage can hold
    kv_tok_gpu = kv_tok_gpu // spec.num_layers * stage_max
    page = block_size * heads_gpu * spec.kv_entry_width() * kvb
    per_block = page * stage_max
    num_blocks = kv_budget // per_block
    bpr = -(-max_model_len // block_size)
    vllm_kv = None
    if spec.sliding_window:
        # sliding-window layers keep only the window's blocks of a request (SlidingWindowSpec), and a hybrid model's
        # layers share one block pool in groups: sized by vLLM's own code (vllm_oracle.runtime.kv_sizing)
        vllm_kv = _sliding_kv(spec, kv_budget, tp, pp, block_size, kv_dtype, dtype, max_model_len,
                              max_num_batched_tokens if rt_dict is None else rt_dict.get("max_num_batched_tokens"))
        num_blocks, bpr = vllm_kv["num_blocks"], vllm_kv["blocks_per_request"]
        warnings.append(f"{spec.name}: sliding-window attention (window {spec.sliding_window} on "
                        f"{spec.sliding_window_layers} of {spec.num_layers} layers): blocks and concurrency from vLLM's "
                        f"own KV-cache groups ({', '.join(f'{n} x {k}' for k, n in vllm_kv['groups'])}; "
                        "vllm/v1/core/kv_cache_utils.py get_kv_cache_config_from_groups, get_kv_cache_capacity).")
    # vLLM's admission check keeps one block back (the null block) and needs one request to fit.
    if num_blocks - 1 < bpr:
        fit_len = max(0, (num_blocks - 1) * block_size)
        raise CourseError(
            f"the KV budget ({kv_budget / GiB:.3f} GiB per GPU = {num_blocks} blocks of {block_size} tokens) "
            f"cannot hold one request of max_model_len={max_model_len} ({bpr} blocks + 1 reserved). "
            f"Lower max_model_len to at most {fit_len}, or give the KV cache more memory "
            f"(higher gpu_memory_utilization, smaller weights, larger TP).")
    conc = num_blocks / bpr if vllm_kv is None else vllm_kv["max_concurrency"]
    tokens = int(conc * max_model_len) if vllm_kv is None else vllm_kv["kv_cache_tokens"]
    workload = None
    bpr_w = conc_w = None
    if input_tokens is not None or output_tokens is not None:
        workload = int(input_tokens or 0) + int(output_tokens or 0)
        if workload <= 0:
            raise CourseError("input_tokens + output_tokens must be positive.")
        if workload > max_model_len:
            warnings.append(f"the workload's {workload} tokens exceed max_model_len {max_model_len}.")
        bpr_w = -(-workload // block_size)
        if vllm_kv is not None:     # a request of the workload's length, as vLLM's specs hold it
            bpr_w = _sliding_kv(spec, kv_budget, tp, pp, block_size, kv_dtype, dtype, workload,
                                max_num_batched_tokens if rt_dict is None else rt_dict.get("max_num_batched_tokens")
                                )["blocks_per_request"]
        conc_w = num_blocks / bpr_w
    alloc = num_blocks * per_block
    if gpu is not None:
        free = gpu_mem - weights_per_gpu / GiB - lora_bytes / GiB - buffer - alloc / GiB
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
        warnings=warnings, runtime=rt_dict, gpu_total_source=total_src, kv_latent=spec.is_mla,
        pp=pp, pp_stage_layers=stages if len(stages) > 1 else None,
        lora_gib_per_gpu=lora_bytes / GiB, max_loras=max_loras, max_lora_rank=max_lora_rank,
        kv_groups=vllm_kv["groups"] if vllm_kv else None)


def _sliding_kv(spec: ModelSpec, kv_budget: int, tp: int, pp: int, block_size: int, kv_dtype: str, dtype: str,
                max_model_len: int, max_num_batched_tokens: int | None) -> dict:
    """vLLM's KV-cache sizing of a sliding-window or hybrid model (vllm_oracle.runtime.kv_sizing, the oracle's worker)."""
    from inferopt.planning.hardware import _ALIASES
    from inferopt.vllm_oracle.runtime import kv_sizing

    name = dtype if kv_dtype == "auto" else kv_dtype
    name = _ALIASES.get(name, name)              # bf16 / fp16 / half -> the torch dtype names vLLM's specs take
    return kv_sizing(spec.source, kv_budget, tp=tp, pp=pp, block_size=block_size, kv_dtype=name,
                     max_model_len=max_model_len, max_num_batched_tokens=max_num_batched_tokens)


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
        w_gpu = _weights_per_gpu(spec, wb, tp, kw.get("pp", 1), kw.get("pp_layer_partition")) / GiB
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
    p.add_argument("--pp", type=int, default=1, help="pipeline-parallel size (stages of --tp GPUs each)")
    p.add_argument("--pp-layer-partition", default=None,
                   help="layers per stage, comma-separated (vLLM's VLLM_PP_LAYER_PARTITION)")
    p.add_argument("--weights", default="auto", choices=list(WEIGHT_FORMATS),
                   help="weight format (default auto: the checkpoint's quantization_config, as vLLM's ModelConfig reads it; "
                        "bf16 without one)")
    p.add_argument("--kv-dtype", default="auto", choices=KV_DTYPES)
    p.add_argument("--dtype", default=None, help="compute dtype (what kv-dtype auto means); default: what vLLM's "
                   "--dtype auto resolves to on the GPU (bfloat16 on the CPU)")
    p.add_argument("--gpu-memory-utilization", type=float, default=None,
                   help=f"fraction of the GPU vLLM may use (default {DEFAULT_GPU_MEMORY_UTILIZATION}, vLLM 0.32's)")
    p.add_argument("--max-loras", type=int, default=None, help="LoRA adapters served at once (vLLM's --max-loras; "
                   "with --enable-lora), each slot sized at --max-lora-rank")
    p.add_argument("--max-lora-rank", type=int, default=None, help="largest LoRA rank served (vLLM's --max-lora-rank, "
                   "default 16)")
    p.add_argument("--runtime", default="model", choices=list(RUNTIME_MODES),
                   help="runtime memory: vLLM 0.32's accounting with estimated parts (model), or the original "
                        "chapter's flat 5 GB (original-5gb)")
    p.add_argument("--runtime-buffer-gib", type=float, default=None, help="a flat runtime buffer instead (GiB)")
    p.add_argument("--vllm-version", default=None, help="vLLM version whose accounting to follow (default 0.32.0)")
    p.add_argument("--max-num-batched-tokens", type=int, default=None, help="token budget (default: vLLM's for the GPU)")
    p.add_argument("--max-num-seqs", type=int, default=None)
    p.add_argument("--cuda-total-gib", type=float, default=None,
                   help="the GPU total your start-up log prints (total_gpu_memory), GiB")
    p.add_argument("--startup-logs", action="store_true",
                   help="print the public start-up logs beside the runtime model, and exit")
    p.add_argument("--max-model-len", type=_max_model_len_arg, default=None,
                   help="tokens, or auto / -1: the maximum vLLM derives from the model's config.json")
    p.add_argument("--input-tokens", type=int, default=None)
    p.add_argument("--output-tokens", type=int, default=None)
    p.add_argument("--block-size", type=int, default=None, help="16 on GPU, 128 on CPU by default")
    p.add_argument("--kv-cache-memory-bytes", type=int, default=None)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cli)


def _max_model_len_arg(text: str) -> int:
    """--max-model-len as vLLM 0.32 reads it: a whole number, or auto / -1 for the derived maximum."""
    if str(text).strip().lower() in ("auto", "-1"):
        return -1
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of tokens (or auto / -1)") from None


def serve_command(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """(the ``vllm serve`` argv the memory question describes, notes): the flags the user gave, the precision as
    vLLM needs it for the model's checkpoint (FP8 from BF16: --quantization fp8; INT4/INT8: another checkpoint,
    named in a note, and the command checked without it)."""
    from inferopt.vllm_oracle.runtime import serve_argv

    flag_values = [("--tensor-parallel-size", args.tp, 1), ("--pipeline-parallel-size", args.pp, 1),
                   ("--dtype", args.dtype, None), ("--kv-cache-dtype", args.kv_dtype, "auto"),
                   ("--gpu-memory-utilization", args.gpu_memory_utilization, None),
                   ("--max-model-len", "auto" if args.max_model_len == -1 else args.max_model_len, None),
                   ("--max-num-batched-tokens", args.max_num_batched_tokens, None),
                   ("--max-num-seqs", args.max_num_seqs, None), ("--block-size", args.block_size, None),
                   ("--kv-cache-memory-bytes", args.kv_cache_memory_bytes, None)]
    argv, notes = serve_argv(args.model, args.weights, flag_values)
    if args.max_loras is not None or args.max_lora_rank is not None:
        argv.append("--enable-lora")
        argv += ["--max-loras", str(args.max_loras)] if args.max_loras is not None else []
        argv += ["--max-lora-rank", str(args.max_lora_rank)] if args.max_lora_rank is not None else []
    return argv, notes


def _cli(args: argparse.Namespace) -> int:
    if args.startup_logs:
        print(startup_log_table())
        return 0
    from inferopt.vllm_oracle.runtime import check_command

    gpu = None if args.gpu.lower() == "cpu" else args.gpu
    argv, notes = serve_command(args)
    oracle = check_command(argv, gpu=gpu).require()     # vLLM's refusal first, in its one line
    got = oracle.resolved if oracle.ok else {}
    if args.input_tokens is not None and (got.get("max_model_len") or args.max_model_len not in (None, -1)):
        from inferopt.vllm_oracle.runtime import check_request

        mml = got.get("max_model_len") or args.max_model_len
        check_request(args.input_tokens, args.output_tokens, mml,
                      "--max-model-len" if args.max_model_len not in (None, -1) else "the model's derived maximum")
    # what the user left out, as vLLM resolves it for this command (the calculator's own defaults otherwise)
    dtype = args.dtype or (got.get("dtype") if gpu is not None else None) or "bfloat16"
    if args.vllm_version is None:
        left = oracle.left_out
        batched = args.max_num_batched_tokens or left.get("--max-num-batched-tokens", (None,))[0]
        seqs = args.max_num_seqs or left.get("--max-num-seqs", (None,))[0]
    else:
        batched, seqs = args.max_num_batched_tokens, args.max_num_seqs
    util = DEFAULT_GPU_MEMORY_UTILIZATION if args.gpu_memory_utilization is None else args.gpu_memory_utilization
    kw = {"tp": args.tp, "pp": args.pp, "pp_layer_partition": args.pp_layer_partition,
          "weight_format": args.weights, "kv_dtype": args.kv_dtype, "dtype": dtype,
          "gpu_memory_utilization": util, "runtime_buffer_gib": args.runtime_buffer_gib,
          "max_model_len": args.max_model_len, "input_tokens": args.input_tokens, "output_tokens": args.output_tokens,
          "block_size": args.block_size, "kv_cache_memory_bytes": args.kv_cache_memory_bytes,
          "runtime": args.runtime, "vllm_version": args.vllm_version,
          "max_num_batched_tokens": batched, "max_num_seqs": seqs,
          "cuda_total_gib": args.cuda_total_gib}
    if args.max_loras is not None or args.max_lora_rank is not None:
        kw.update(max_loras=args.max_loras or 1, max_lora_rank=args.max_lora_rank or 16)
    v = start_verdict(args.model, gpu, **kw)
    alt = None
    if gpu is not None and args.runtime_buffer_gib is None and args.kv_cache_memory_bytes is None:
        other = "original-5gb" if args.runtime == "model" else "model"
        alt = start_verdict(args.model, gpu, **{**kw, "runtime": other})
    if args.json:
        out = v.result.as_dict() if v.result is not None else {}
        out["vllm"] = {**oracle.as_dict(), "notes": notes}
        out.update({"will_start": v.will_start, "max_model_len_estimate": v.max_model_len_estimate,
                    "start_reason": v.reason, "start_advice": v.advice,
                    "weights_fit": v.weights_fit})
        if alt is not None:
            out["beside"] = {"runtime": alt.result.runtime["mode"] if alt.result else
                             ("original-5gb" if args.runtime == "model" else "model"),
                             "will_start": alt.will_start,
                             "kv_budget_gib_per_gpu": alt.result.kv_budget_gib_per_gpu if alt.result else None,
                             "kv_cache_tokens": alt.result.kv_cache_tokens if alt.result else None}
        print(json.dumps(out, indent=2, sort_keys=True))
        return 0
    if not v.will_start:
        raise CourseError(f"vLLM will not start: {v.reason}")
    r = v.result
    if args.json:
        print(json.dumps(r.as_dict(), indent=2, sort_keys=True))
    else:
        terms = [(name[:len(name) - len(name.lstrip())] + localize(name.strip()), value, localize(how))
                 for name, value, how in r.terms()]      # the edition's words (English: unchanged)
        width = max(columns(a) for a, _, _ in terms)
        for name, value, how in terms:
            print(f"{name}{' ' * (width - columns(name))}  {value:>18}   {how}")
        for w in r.warnings:
            print(localize(f"warning: {w}"))
        if alt is not None:
            label = ("the original chapter's flat 5 GB (its stated assumption)" if args.runtime == "model"
                     else "vLLM 0.32's runtime model (estimated)")
            if alt.will_start:
                print(localize(f"beside it, {label}: KV budget {alt.result.kv_budget_gib_per_gpu:.2f} GiB per GPU, "
                               f"{alt.result.kv_cache_tokens:,} tokens "
                               f"({alt.result.kv_cache_tokens - r.kv_cache_tokens:+,})"))
            else:
                print(localize(f"beside it, {label}: vLLM would not start"))
        print(" ".join(argv))
        print("\n".join(oracle.lines() + [localize(n) for n in notes]))
    return 0


# ------------------------------------------------ public start-up logs beside the runtime memory model
STARTUP_LOG_TOLERANCE_GIB = 0.5


def startup_logs(file=None) -> list[dict]:
    """The public vLLM start-up logs of ``assets/results/startup_logs.yaml`` (schema-checked), or of
    another file of the same shape (``file``: e.g. the test data's vLLM >= 0.19 logs), each log checked
    against the same item schema."""
    from inferopt import assets
    if file is None:
        return assets.load("results/startup_logs.yaml")["logs"]
    items = assets.schema("results/startup_logs.yaml")["properties"]["logs"]["items"]
    schema = {"type": "object", "required": ["logs"], "additionalProperties": False,
              "properties": {"logs": {"type": "array", "minItems": 1, "items": items}}}
    return assets.load_file(file, schema, "assets/results/startup_logs.schema.json (its log items)")["logs"]


def _accounting_kv(log: dict) -> float:
    """vLLM's own formula on the parts a log prints (the version decides which terms exist)."""
    lg = log["logged"]
    requested = log["gpu_memory_utilization"] * lg["total_gib"]
    if "peak_torch_gib" in lg:                       # V0 0.6.4: peak_torch_memory includes the weights
        return requested - lg["peak_torch_gib"] - lg["non_torch_gib"]
    if "consumed_gib" in lg:                         # 0.2x: consumed = weights + non-torch; the printed
        return requested - lg["consumed_gib"] - lg["activation_gib"]   # peak activation holds the CUDA-graph estimate
    return requested - lg["weights_gib"] - lg["non_torch_gib"] - lg["activation_gib"]


def startup_log_rows(logs: list[dict] | None = None) -> list[dict]:
    """One row per public start-up log: what it logged, what vLLM's accounting of its printed parts
    gives, and (for shipped models) what the calculator predicts from config + GPU + settings alone.

    Keys: id, source, url, kind, model, gpu, tp, utilization, max_model_len, vllm_version,
    token_budget, logged_kv_gib, accounting_kv_gib, predicted_kv_gib, error_gib (predicted - logged),
    logged_weights_gib, predicted_weights_gib, outlier (reason or None), parts (the model's GiB)."""
    rows = []
    for log in startup_logs() if logs is None else logs:
        lg = log["logged"]
        row = {"id": log["id"], "source": log["source"], "url": log["url"], "kind": log["kind"],
               "model": log.get("model"), "gpu": log["gpu"], "tp": log.get("tp"),
               "utilization": log.get("gpu_memory_utilization"), "max_model_len": log.get("max_model_len"),
               "vllm_version": log["vllm_version"], "logged_kv_gib": lg.get("kv_gib"),
               "logged_weights_gib": lg.get("weights_gib"), "outlier": log.get("outlier"),
               "accounting_kv_gib": None, "predicted_kv_gib": None, "error_gib": None,
               "predicted_weights_gib": None, "token_budget": None, "parts": None}
        if "kv_gib" in lg and "total_gib" in lg:
            row["accounting_kv_gib"] = _accounting_kv(log)
        if log["kind"] == "weights":
            spec = load_spec(log["model"])
            row["predicted_weights_gib"] = _weights_per_gpu(spec, weight_bytes(spec, "auto"), log["tp"]) / GiB
        elif log["kind"] == "predict":
            model = log["model"]
            if "/" in model:                       # a config.json path, relative to the repository
                from inferopt.paths import REPO_ROOT
                model = str(REPO_ROOT / model)
            b = gpu_budget(model, log.get("catalog_gpu", log["gpu"]), tp=log["tp"],
                           weight_format=log.get("weight_format", "auto"),
                           gpu_memory_utilization=log["gpu_memory_utilization"], max_model_len=log["max_model_len"],
                           vllm_version=log["vllm_version"], max_num_batched_tokens=log.get("max_num_batched_tokens"),
                           cuda_total_gib=log.get("cuda_total_gib"), usage=log.get("usage", "server"))
            row.update(predicted_kv_gib=b.kv_budget_gib, error_gib=b.kv_budget_gib - lg["kv_gib"],
                       predicted_weights_gib=b.weights_gib_per_gpu, token_budget=b.runtime.max_num_batched_tokens,
                       parts={"total": b.total_gib, "requested": b.requested_gib, "weights": b.weights_gib_per_gpu,
                              "activation": b.runtime.activation_gib, "logits": b.runtime.logits_gib,
                              "non_torch": b.runtime.non_torch_gib, "cuda_graph": b.runtime.cuda_graph_gib})
        rows.append(row)
    return rows


# the table's columns: (header, width in terminal columns, right-aligned); a translated header wider than its column
# widens it (the English layout is the widths given)
_LOG_COLUMNS = (("log", 32, False), ("vLLM", 6, True), ("GPU", 14, False), ("util", 5, True), ("max len", 8, True),
                ("budget", 7, True), ("logged KV", 9, True), ("model KV", 9, True), ("error", 7, True))


def startup_log_table(rows: list[dict] | None = None) -> str:
    """The start-up logs as a plain-text table (log vs calculator vs error), for chapter 05 and the CLI; headers and
    notes in the edition's language (``inferopt.i18n.tr``), columns aligned by terminal width."""
    from inferopt.i18n import tr
    rows = startup_log_rows() if rows is None else rows
    heads = [tr(h) if h not in ("vLLM", "GPU") else h for h, _w, _r in _LOG_COLUMNS]
    widths = [max(w, columns(h)) for h, (_e, w, _r) in zip(heads, _LOG_COLUMNS, strict=True)]

    def line(cells, note):
        return " ".join(pad(str(c), w, right) for c, w, (_h, _w, right)
                        in zip(cells, widths, _LOG_COLUMNS, strict=True)) + "  " + note

    head = line(heads, tr("note"))
    out = [head, "-" * columns(head)]
    for r in rows:
        if r["kind"] == "weights":
            err = r["predicted_weights_gib"] - r["logged_weights_gib"]
            note = tr("weights per GPU: logged {logged}, model {model} GiB ({err})", logged=f"{r['logged_weights_gib']:.2f}",
                      model=f"{r['predicted_weights_gib']:.2f}", err=f"{err:+.2f}")
            out.append(line([r["id"], r["vllm_version"], r["gpu"], "", "", "", "", "", ""], note))
            continue
        pred = f"{r['predicted_kv_gib']:.2f}" if r["predicted_kv_gib"] is not None else "-"
        err = f"{r['error_gib']:+.2f}" if r["error_gib"] is not None else "-"
        note = (tr("outlier: {why}", why=tr(r["outlier"].split(":")[0])) if r["outlier"] else (
            tr("model not shipped: accounting only") if r["kind"] == "accounting" else ""))
        out.append(line([r["id"], r["vllm_version"], r["gpu"], r["utilization"] or "", r["max_model_len"] or "",
                          r["token_budget"] or "", f"{r['logged_kv_gib']:.2f}", pred, err], note))
    return "\n".join(out)


# ---------------------------------------------------------------- KV budgets in an engine's blocks
def block_bytes(kind: str, model="smollm2-135m-instruct", dtype: str | None = None) -> int:
    """Bytes of one KV block (all layers) of ``model`` on the engine ``kind``, by the memory calculator."""
    d = _PLATFORM.defaults(kind)
    dtype = dtype or d.dtype
    r = calculate(model, None, weight_format="fp32" if dtype == "float32" else "bf16", dtype=dtype,
                  max_model_len=d.block_size, kv_cache_memory_bytes=1 << 40, block_size=d.block_size)
    return r.bytes_per_block


def kv_bytes_for_blocks(blocks: int, kind: str, model="smollm2-135m-instruct",
                        dtype: str | None = None) -> int:
    """A KV budget of exactly ``blocks`` blocks (the null block included) on the engine ``kind``."""
    return int(blocks) * block_bytes(kind, model, dtype)
