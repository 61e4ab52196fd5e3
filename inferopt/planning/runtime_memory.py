"""Runtime memory on a GPU: what vLLM keeps besides weights and KV cache, modelled the way it measures it.

vLLM does not guess this memory; it measures it at start-up and gives the KV cache what is left.
vLLM 0.32 (``vllm/v1/worker/gpu_worker.py: determine_available_memory``, with
``vllm/v1/worker/utils.py: request_memory`` and ``vllm/utils/mem_utils.py: memory_profiling``):

    requested = ceil(total x gpu_memory_utilization)      # total = cudaMemGetInfo's, not nvidia-smi's
    KV budget = requested - (weights + non-torch memory + activation peak) - CUDA-graph estimate

- **total**: ``torch.cuda.mem_get_info()``'s total, a few hundred MiB below what nvidia-smi prints
  (``cuda_total_gib`` in ``assets/gpus.yaml``, each with the log it was read from);
- **activation peak**: the transient peak of ``profile_run``, one forward pass over
  ``max_num_batched_tokens`` tokens (the token budget) plus the dummy sampler run over
  ``min(max_num_seqs, tokens)`` rows of logits (``v1/worker/gpu_model_runner.py: profile_run,
  _dummy_sampler_run``);
- **non-torch memory**: the CUDA context, cuBLAS/NCCL workspaces and other allocations outside
  PyTorch's allocator;
- **CUDA-graph estimate**: ``profile_cudagraph_memory()``, subtracted since vLLM 0.21
  (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``, default 1; before 0.21 the graphs were captured after
  the KV cache was sized, outside the utilization share).

The KV budget formula above is vLLM's own. The activation, non-torch and CUDA-graph figures are
**estimated** here from the model's shapes, with constants read from public start-up logs
(``assets/results/startup_logs.yaml``); :func:`inferopt.planning.memory.startup_log_table` puts
each log beside the calculator with its error. Accounting by version (``vllm_version``):

- ``< 0.8`` (V0 engine): ``max_num_seqs`` 256; without chunked prefill (``max_model_len`` up to
  32,768) the profile runs ``max(max_model_len, 2048)`` tokens, with it (longer contexts) the
  chunked-prefill budget (512 up to 0.6, 2048 from 0.7) — public logs show the activation peak
  following ``max_model_len`` exactly that way (vllm-project/vllm#10517);
- ``0.8 .. 0.20`` (V1): the token budget of ``engine/arg_utils.py: get_batch_defaults`` (the server
  context: 8192 on GPUs with >= 70 GiB that are not A100, 16384 at >= 160 GiB, 2048 otherwise);
  ``max_num_seqs`` 1024 on the large GPUs, 256 otherwise; no CUDA-graph term; the dummy sampler's peak
  and the communicators' memory at TP > 1 as the logs of each release measure them (0.11: 9.6 float32
  rows x vocab and 0.13 + 0.41 GiB; 0.19: 3.7 rows, the fused-MoE workspace under them, 0.25 + 1.85 GiB);
- ``>= 0.21`` (the course pins 0.32): the same budget, one row of logits per sequence (0.32 samples with
  FlashInfer by default, ``envs.VLLM_USE_FLASHINFER_SAMPLER``), a flat non-torch constant (the 0.19 TP > 1
  term is not added: see NON_TORCH_TP_V19_GIB), minus the CUDA-graph estimate.

Measured error (``python -m inferopt memory --startup-logs``): within 0.25 GiB on the public logs the
calculator can predict from a shipped config (V0 logs of vLLM 0.6-0.7); one development-build log is
shown as an outlier, not hidden. V1 (``tests/data/startup_logs_v1.yaml``, held in
tests/test_memory_runtime.py): within 0.2 GiB on thirteen vLLM 0.19.0 logs on H100s (Llama-3.1-8B and
Qwen2.5-7B at TP 1, 2 and 4, Qwen3-8B, the MoE models Qwen3-30B-A3B, Mixtral-8x7B at TP2,
DeepSeek-V2-Lite and Qwen1.5-MoE-A2.7B, Llama-3.3-70B FP8 at TP 2 and 4; before the 0.19 terms the
calculator was off by 1.1-3.3 GiB on each), within 0.1 GiB on six vLLM 0.11 logs, and -0.10 GiB on the
one >= 0.21 log of a model the calculator sizes (Qwen3-8B, vLLM 0.21.0, TP 1). No >= 0.21 log at TP > 1
was found: there the 0.19 TP term (1.85 GiB per GPU on H100s) is not applied yet, and the CUDA-graph
estimate stays a constant (the 0.19.0 logs print what 0.21 would
subtract: 0.57-1.82 GiB on H100s with vLLM serve's 51 + 51 graphs, against 0.17-0.52 on the smaller
cards' logs). Replace the constants with your engine's own log when you have one (``cuda_total_gib``,
``max_num_batched_tokens``).
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass

from inferopt.errors import CourseError

GiB = 1 << 30
DEFAULT_VLLM_VERSION = "0.32.0"

# ---- constants, each "estimated" with where it comes from (see assets/results/startup_logs.yaml)
# Activation of the forward pass per token and per byte of the compute dtype: the MLP's fused
# gate/up output (2 x intermediate) and its activated half (1 x intermediate) live together with
# the residual stream, the normed input and the attention output (3 x hidden). Checked against
# Llama-3.1-8B on an RTX 3090 at 20,000 and 29,000 profiled tokens (vllm-project/vllm#10517:
# peak_torch_memory - weights = 2.07 and 2.99 GiB; this formula gives 2.06 and 2.99 before logits).
ACTIVATION_INTERMEDIATE_COPIES = 3
ACTIVATION_HIDDEN_COPIES = 3
# The dummy sampler run holds one float32 row of logits per request (min(max_num_seqs, tokens) rows
# x the full vocabulary, gathered on every TP rank). Estimated: one copy; the public logs of
# known models are within the measured error with it (see the table).
LOGITS_BYTES = 4
LOGITS_COPIES = 1
# V1 engine, 0.8 to 0.20 (tests/data/startup_logs_v1.yaml, vLLM 0.11 on an H100): profile_run keeps the
# forward's output hidden states (tokens x hidden x dtype bytes) and then runs ``_dummy_sampler_run``:
# float32 logits of min(max_num_seqs, tokens) rows x the full vocabulary, sampled with top-k and top-p
# (sort values and int64 indices, softmax, cumulative sums, masks) and once more through forward_native.
# The forward's intermediates are freed by then, so the peak is max(forward, hidden states + sampler).
# The sampler's buffers, in float32 rows x vocab: fitted 9.6 on two TP1 logs (Llama-3.1-8B: 9.60,
# Qwen3-0.6B: 9.57); held out: Qwen3-32B TP1 (9.60) and TP2, Llama-3.3-70B FP8 TP2 (9.64).
SAMPLER_COPIES_V1 = 9.6
# Memory outside PyTorch's allocator (CUDA context, cuBLAS/NCCL workspaces) that vLLM counts:
# public logs report 0.05 (A10, TP1), 0.12 (H100, TP1), 0.16 (H100, TP1), 0.20 (RTX 3090, TP>1),
# 0.35 GiB (RTX 3090, TP1). Estimated: 0.2 GiB, measured error within +-0.15 GiB on those logs.
NON_TORCH_GIB = 0.2
# V1 (0.8 to 0.20), the same logs: 0.13-0.14 GiB at TP1 on an H100 (five logs), 0.55 and 0.54 at TP2:
# the second rank adds the communicators' buffers (NCCL's channel buffers and vLLM's custom all-reduce
# buffer, registered at start). Fitted: 0.13 + 0.41 once TP > 1. NCCL's ring gives each rank two
# neighbours whatever the TP size, so the term is taken flat in TP; TP 4 and 8 are not measured.
NON_TORCH_V1_GIB = 0.13
NON_TORCH_TP_V1_GIB = 0.41
# vLLM 0.19 and 0.20 (tests/data/startup_logs_v1.yaml: vLLM 0.19.0 DEBUG logs on H100s, llm-d-incubation/
# llm-d-planner accuracy/results/v0.19.0, 2026-04-22): the logs print "FlashInfer top-p/top-k sampling is
# available but disabled by default" (vllm-project/vllm#26859 turned it off), so the dummy sampler run takes
# PyTorch's top-k/top-p path: its peak is hidden states + 3.7 float32 rows x vocab (fitted on the dense TP1
# logs: Llama-3.1-8B 3.74, Qwen2.5-7B 3.72, Qwen3-8B 3.71; the same at TP 2 and 4, the logits being gathered
# on every rank). Memory outside torch: 0.24-0.27 GiB at TP1 (the six TP1 logs used), 2.06-2.11 at TP2 and
# 2.13-2.21 at TP4 whatever the hidden size (Llama-3.1-8B, Qwen2.5-7B, Mixtral, Llama-3.3-70B): the
# communicators' buffers, fitted 0.25 + 1.85 once TP > 1. The 0.11 logs' 0.41 was measured in another
# cluster: the term depends on the interconnect NCCL finds, which the calculator does not know.
SAMPLER_COPIES_V19 = 3.7
NON_TORCH_V19_GIB = 0.25
NON_TORCH_TP_V19_GIB = 1.85
# From 0.21 on the TP > 1 term is NOT added yet: no public >= 0.21 log at TP > 1 of a model the calculator
# sizes was found to measure it (tests/data/startup_logs_v1.yaml, its header). vLLM 0.32 builds the same
# communicators at start-up, outside PyTorch's allocator, before the profile (``distributed/parallel_state.py:
# GroupCoordinator`` -> ``device_communicators/cuda_communicator.py``: PyNccl, the custom all-reduce buffers of
# ``all_reduce_utils.CUSTOM_ALL_REDUCE_MAX_SIZES``, on Hopper and Blackwell GPUs the symmetric-memory buffers and the
# FlashInfer all-reduce workspace), and ``memory_profiling`` counts every byte outside torch, so the 0.19
# figure is the likely size; adding it moves chapter 05's and lab 2's numbers (issue #28, its follow-up).
# MoE models (from 0.19): the fused-MoE kernels take their scratch from vLLM's persistent workspace
# (0.32: model_executor/layers/fused_moe/modular_kernel.py -> current_workspace_manager().get_simultaneous;
# v1/worker/workspace.py: "keyed persistent resources"), so after the profile's forward the workspace of
# its largest MoE call stays allocated and the sampler's peak stacks on it. TritonExperts.workspace_shapes
# (experts/triton_moe.py): workspace1 (M, topk, max(I, K)) and workspace2 (M, topk, max(2I, K)) in the
# compute dtype, M = the token budget, I = the expert width on this GPU, K = hidden. On the 0.19.0 logs it
# matches what the sampler alone leaves unexplained (logged / this formula, GiB): Qwen3-30B-A3B 0.50 / 0.50,
# DeepSeek-V2-Lite 0.45 / 0.45, Qwen1.5-MoE-A2.7B 0.29 / 0.30; not fitted.
# CUDA-graph estimate (vLLM >= 0.21): public logs report 0.17 GiB (4x RTX 3090, TP4,
# noonghunna/club-3090#127), 0.36 GiB (TP2, gpustack/runner#251) and, before it was subtracted,
# 0.65 GiB suggested for gemma-3-4b on a B200 (vllm-project/vllm#21489). Estimated: 0.35 GiB.
CUDA_GRAPH_GIB = 0.35
# The range of the estimate where no start-up log of this vLLM backs it (review 2026-12-01, finding 11):
# non-torch memory at TP > 1 as the vLLM 0.19.0 H100 logs measured it (2.06-2.21 GiB at TP 2 and 4, above),
# the likely size for 0.32 whose communicators are built the same way; at TP 1 the public logs' 0.05-0.35 GiB;
# the CUDA-graph estimate as the 0.19.0 H100 logs print it for vLLM serve's graphs (0.57-1.82 GiB, docstring).
NON_TORCH_TP_LOGGED_GIB = (2.06, 2.21)
NON_TORCH_TP1_LOGGED_GIB = (0.05, 0.35)
CUDA_GRAPH_LOGGED_GIB = (0.17, 1.82)
# When a GPU's cudaMemGetInfo total has not been read from a log: nvidia-smi's total minus this
# driver reserve. Logged pairs: H100 79.65 -> 79.18, RTX 3090 24.00 -> 23.58, A10 22.49 -> 22.07,
# B200 179.06 -> 178.36 GiB: 0.42 to 0.70 GiB. Estimated: 0.45 GiB.
DRIVER_RESERVE_GIB = 0.45

RUNTIME_MODES = ("model", "original-5gb")
ORIGINAL_BUFFER_GIB = 5.0   # the original chapter's "temporary buffer ≈ 5 GB", rounded up to GiB


def parse_version(version: str | None) -> tuple[int, int]:
    """(major, minor) of a vLLM version string such as '0.32.0', '0.6.4.post1' or 'v0.21'."""
    v = DEFAULT_VLLM_VERSION if version in (None, "") else str(version)
    m = re.match(r"^v?(\d+)\.(\d+)", v.strip())
    if not m:
        raise CourseError(f"vllm_version {version!r} is not a version like '0.32.0'; give the vLLM "
                          f"version whose accounting you want (default {DEFAULT_VLLM_VERSION}).")
    return int(m.group(1)), int(m.group(2))


def accounting(version: str | None) -> str:
    """'v0' (before 0.8), 'v1' (0.8 to 0.20) or 'v1-cudagraph' (0.21 and later)."""
    mv = parse_version(version)
    if mv < (0, 8):
        return "v0"
    return "v1" if mv < (0, 21) else "v1-cudagraph"


def default_batch_limits(device_total_gib: float | None, gpu_name: str = "", *, max_model_len: int = 2048,
                         vllm_version: str | None = None, usage: str = "server") -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) vLLM uses when the user sets neither.

    V1 (0.8 and later): ``engine/arg_utils.py: get_batch_defaults`` keyed on the device's total
    memory (``get_device_total_memory``) and name; ``usage`` is 'server' (``vllm serve``) or
    'offline' (the ``LLM`` class). V0: see the module docstring.
    """
    if usage not in ("server", "offline"):
        raise CourseError(f"usage must be 'server' (vllm serve) or 'offline' (the LLM class), got {usage!r}.")
    if accounting(vllm_version) == "v0":
        if max_model_len <= 32768:
            return max(max_model_len, 2048), 256
        return (512 if parse_version(vllm_version) < (0, 7) else 2048), 256
    mem = device_total_gib or 0.0
    if mem >= 160:
        return 16384, 1024
    if mem >= 70 and "a100" not in gpu_name.lower():
        return (8192 if usage == "server" else 16384), 1024
    return (2048 if usage == "server" else 8192), 256


@dataclass
class RuntimeMemory:
    """Per-GPU runtime memory (GiB) beside weights and KV cache, and how it was obtained."""

    mode: str                         # "model" or "original-5gb" or "flat"
    vllm_version: str
    accounting: str
    max_num_batched_tokens: int | None
    max_num_seqs: int | None
    activation_gib: float
    logits_gib: float
    non_torch_gib: float
    cuda_graph_gib: float
    total_gib: float
    estimated: bool
    tp: int = 1
    total_low_gib: float | None = None    # the range of the estimate, from the logged spreads of its parts
    total_high_gib: float | None = None
    unverified: str = ""                  # why no start-up log backs the figure ("" where one does)

    def range_gib(self) -> tuple[float, float]:
        """(low, high) GiB of the runtime memory; a flat buffer is its own range."""
        if self.total_low_gib is None or self.total_high_gib is None:
            return self.total_gib, self.total_gib
        return self.total_low_gib, self.total_high_gib

    def as_dict(self) -> dict:
        return asdict(self)

    def parts(self) -> list[tuple[str, float, str]]:
        """(name, GiB, how) for each part, for a notebook or the CLI."""
        if self.mode != "model":
            how = ("the original chapter's 'temporary buffer ≈ 5 GB', rounded up to GiB (its stated assumption)"
                   if self.mode == "original-5gb" else "a flat buffer given by the caller")
            return [("runtime buffer (flat)", self.total_gib, how)]
        return [
            ("activation peak (forward)", self.activation_gib,
             f"estimated: {self.max_num_batched_tokens:,} tokens x (3 x intermediate/TP + 3 x hidden) x dtype bytes"),
            ("activation peak (logits)", self.logits_gib,
             f"estimated: the sampler's peak over the forward's: (MoE workspace +) hidden states + "
             f"{SAMPLER_COPIES_V19 if parse_version(self.vllm_version) >= (0, 19) else SAMPLER_COPIES_V1} x min("
             f"{self.max_num_seqs}, tokens) rows x vocab x 4 B" if self.accounting == "v1" else
             f"estimated: min({self.max_num_seqs}, tokens) rows x vocab x 4 B"),
            ("non-torch memory", self.non_torch_gib,
             (f"estimated: {NON_TORCH_V19_GIB} GiB, + {NON_TORCH_TP_V19_GIB} with TP > 1 (V1 logs of vLLM 0.19.0)"
              if parse_version(self.vllm_version) >= (0, 19) else
              f"estimated: {NON_TORCH_V1_GIB} GiB, + {NON_TORCH_TP_V1_GIB} with TP > 1 (V1 logs of vLLM 0.11)")
             if self.accounting == "v1" else
             f"estimated constant ({NON_TORCH_GIB} GiB, public TP-1 logs {NON_TORCH_TP1_LOGGED_GIB[0]}-"
             f"{NON_TORCH_TP1_LOGGED_GIB[1]})" + (
                 f"; unverified at TP {self.tp}: vLLM 0.19.0 logs measured {NON_TORCH_TP_LOGGED_GIB[0]}-"
                 f"{NON_TORCH_TP_LOGGED_GIB[1]} GiB at TP 2 and 4, the likely size here" if self.tp > 1 else "")),
            ("CUDA-graph estimate", self.cuda_graph_gib,
             f"estimated; subtracted from vLLM 0.21 on (public logs {CUDA_GRAPH_LOGGED_GIB[0]}-{CUDA_GRAPH_LOGGED_GIB[1]} GiB)"
             if self.accounting == "v1-cudagraph"
             else f"0: not subtracted before vLLM 0.21 ({self.vllm_version})"),
        ]


def _mlp_width_per_gpu(spec, tp: int) -> float:
    """Elements per token live at the forward's peak on one GPU (see ACTIVATION_* constants)."""
    h = spec.hidden_size
    dense_inter = spec.intermediate_size or 0
    dense = ACTIVATION_INTERMEDIATE_COPIES * dense_inter / tp + ACTIVATION_HIDDEN_COPIES * h
    if not spec.is_moe:
        return dense
    k = max(1, spec.experts_per_token)
    # fused MoE: per routed copy of the token, gate/up (2I) + activated (I) on this GPU + its output (h)
    moe = k * (ACTIVATION_INTERMEDIATE_COPIES * spec.moe_intermediate_size / tp + h) + ACTIVATION_HIDDEN_COPIES * h
    has_dense = spec.first_dense_layers > 0 or spec.moe_layer_freq > 1
    return max(moe, dense) if has_dense else moe


def moe_workspace_gib(spec, tokens: int, tp: int = 1, dtype_bytes: int = 2) -> float:
    """GiB of the fused-MoE workspace vLLM keeps after a forward over ``tokens`` tokens (0 for dense models):
    TritonExperts.workspace_shapes' two buffers, see the constants above."""
    if not spec.is_moe:
        return 0.0
    inter = spec.moe_intermediate_size / tp
    k = max(1, spec.experts_per_token)
    width = max(inter, spec.hidden_size) + max(2 * inter, spec.hidden_size)
    return tokens * k * width * dtype_bytes / GiB


def runtime_memory(spec, *, tp: int = 1, dtype_bytes: int = 2, mode: str = "model",
                   flat_gib: float | None = None, vllm_version: str | None = None,
                   max_num_batched_tokens: int | None = None, max_num_seqs: int | None = None,
                   device_total_gib: float | None = None, gpu_name: str = "", max_model_len: int = 2048,
                   usage: str = "server", enforce_eager: bool = False) -> RuntimeMemory:
    """The runtime memory of one GPU for a model (a :class:`~inferopt.planning.model_specs.ModelSpec`).

    ``mode``: 'model' (default; this module's estimate) or 'original-5gb' (the original chapter's
    flat 5 GiB). ``flat_gib`` given: a flat buffer of that size (the calculator's old
    ``runtime_buffer_gib``). The token budget and ``max_num_seqs`` default to vLLM's own defaults
    for the GPU and version (:func:`default_batch_limits`).
    """
    version = vllm_version or DEFAULT_VLLM_VERSION
    acct = accounting(version)
    if flat_gib is not None or mode == "original-5gb":
        val = ORIGINAL_BUFFER_GIB if flat_gib is None else float(flat_gib)
        if val < 0 or math.isnan(val):
            raise CourseError(f"runtime_buffer_gib must be >= 0, got {flat_gib!r}.")
        return RuntimeMemory("original-5gb" if flat_gib is None else "flat", version, acct, None, None,
                             0.0, 0.0, 0.0, 0.0, val, False)
    if mode != "model":
        raise CourseError(f"runtime must be one of {', '.join(RUNTIME_MODES)}, got {mode!r}.")
    d_tokens, d_seqs = default_batch_limits(device_total_gib, gpu_name, max_model_len=max_model_len,
                                            vllm_version=version, usage=usage)
    tokens = d_tokens if max_num_batched_tokens is None else max_num_batched_tokens
    seqs = d_seqs if max_num_seqs is None else max_num_seqs
    for name, val in (("max_num_batched_tokens", tokens), ("max_num_seqs", seqs)):
        if not (isinstance(val, int) and val > 0):
            raise CourseError(f"{name} must be a positive whole number, got {val!r}.")
    act = tokens * dtype_bytes * _mlp_width_per_gpu(spec, tp) / GiB
    rows = min(seqs, tokens)
    if acct == "v1":
        v19 = parse_version(version) >= (0, 19)
        copies = SAMPLER_COPIES_V19 if v19 else SAMPLER_COPIES_V1
        # the sampler's peak over the forward's: counted only where it is higher; from 0.19 it stacks on
        # the fused-MoE workspace the forward leaves allocated (see SAMPLER_COPIES_V19)
        held = moe_workspace_gib(spec, tokens, tp, dtype_bytes) if v19 else 0.0
        sampler = held + (tokens * spec.hidden_size * dtype_bytes + rows * spec.vocab_size * LOGITS_BYTES * copies) / GiB
        logits = max(0.0, sampler - act)
        if v19:
            non_torch = NON_TORCH_V19_GIB + (NON_TORCH_TP_V19_GIB if tp > 1 else 0.0)
        else:
            non_torch = NON_TORCH_V1_GIB + (NON_TORCH_TP_V1_GIB if tp > 1 else 0.0)
    else:
        logits = rows * spec.vocab_size * LOGITS_BYTES * LOGITS_COPIES / GiB
        non_torch = NON_TORCH_GIB         # from 0.21: not re-measured at TP > 1 (see NON_TORCH_TP_V19_GIB)
    cg = CUDA_GRAPH_GIB if (acct == "v1-cudagraph" and not enforce_eager) else 0.0
    total = act + logits + non_torch + cg
    low, high, why = total, total, ""
    if acct == "v1-cudagraph":   # no start-up log of this vLLM at this TP: the parts' logged spreads bound it
        nt_lo, nt_hi = (NON_TORCH_GIB, NON_TORCH_TP_LOGGED_GIB[1]) if tp > 1 else NON_TORCH_TP1_LOGGED_GIB
        cg_lo, cg_hi = CUDA_GRAPH_LOGGED_GIB if cg else (0.0, 0.0)
        low = act + logits + min(non_torch, nt_lo) + min(cg, cg_lo)
        high = act + logits + max(non_torch, nt_hi) + max(cg, cg_hi)
        why = (f"no vLLM {version} start-up log at TP {tp} backs it: non-torch memory and CUDA graphs are estimated "
               "from other versions' logs (assets/results/startup_logs.yaml, tests/data/startup_logs_v1.yaml)")
    return RuntimeMemory("model", version, acct, tokens, seqs, act, logits, non_torch, cg, total, True,
                         tp, low, high, why)


def requested_gib(total_gib: float, gpu_memory_utilization: float) -> float:
    """vLLM's ``request_memory``: ceil(total bytes x utilization), in GiB."""
    return math.ceil(total_gib * GiB * gpu_memory_utilization) / GiB
