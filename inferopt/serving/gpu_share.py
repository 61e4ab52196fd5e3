"""Each GPU engine's share of the GPU's memory, computed by the memory calculator.

For chapter 06b (and any section that runs several engines on one GPU):

    from inferopt.serving.gpu_share import describe_split, engines_share
    share = engines_share(3, max_model_len=128, kv_cache_gib=1.0)   # asks this GPU for its free memory
    print(describe_split(share))                                      # one paragraph: the split and why
    with section_engines(3):            # every VLLMServer(kind='gpu') started inside gets share.flags()
        ...

Why every engine needs one: at worker start vLLM 0.32 refuses when the GPU's free memory is below
``ceil(total x gpu_memory_utilization)`` (``vllm/v1/worker/utils.py: request_memory``), and it does so
**also when** ``--kv-cache-memory-bytes`` is given. At the default utilization 0.92 the first engine
books 92 % of the card and a second one cannot start. So ``n`` engines on one GPU each get
``gpu_memory_utilization = (free - reserve) / (n x total)``: engine ``k`` starts when ``free`` minus the
``k - 1`` shares already booked still holds one share, and a restarted engine finds its share again.

What one engine needs inside its share (the memory calculator, :func:`inferopt.planning.memory.calculate`):
its weights, the runtime buffer (activations at the token budget, CUDA graphs, the CUDA context:
the calculator's ``runtime_buffer_gib``) and a KV cache that holds at least one request of
``max_model_len`` (plus vLLM's null block), or the explicit ``kv_cache_gib``. When ``n`` shares cannot
hold that, :func:`engine_share` refuses in one line (:class:`~inferopt.errors.CourseError`): for example
three engines of a 7B model in bf16 on a 24 GB card.

Functions: :func:`engine_share` (pure: free and total bytes in, a :class:`GpuShare` out),
:func:`engines_share` (the same for this machine's GPU, via :func:`inferopt.serving.gpu.memory_info`),
:func:`describe_split` (the paragraph for 06b), :func:`section_engines` (a section says how many
engines it runs; :class:`~inferopt.serving.engine.VLLMServer` takes its share from there).
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import asdict, dataclass

from inferopt.errors import CourseError
from inferopt.planning.memory import DEFAULT_RUNTIME_BUFFER_GIB, GPU_BLOCK_SIZE, GiB, calculate

DEFAULT_RESERVE_GIB = 0.5      # free memory left unbooked: other processes' drift, the driver
UTIL_STEP = 0.001              # shares are rounded down to this step (never up: rounding up could not start)


@dataclass(frozen=True)
class GpuShare:
    """One engine's share of one GPU when ``engines`` engines run on it (GiB = 2^30 B)."""
    engines: int
    free_gib: float                 # free when the split was computed
    total_gib: float                # cudaMemGetInfo's total (vLLM's total_memory)
    reserve_gib: float
    gpu_memory_utilization: float   # per engine: --gpu-memory-utilization
    share_gib: float                # utilization x total
    model: str
    weights_gib: float
    runtime_buffer_gib: float
    kv_gib_needed: float            # the explicit KV budget, or one max_model_len request + null block
    kv_gib_explicit: bool
    max_model_len: int
    need_gib: float                 # weights + runtime buffer + KV needed

    @property
    def spare_gib(self) -> float:
        return self.share_gib - self.need_gib

    def flags(self) -> list[str]:
        """The vLLM flag that gives one engine its share."""
        return ["--gpu-memory-utilization", f"{self.gpu_memory_utilization:.3f}"]

    def as_dict(self) -> dict:
        return asdict(self) | {"spare_gib": self.spare_gib}


def engine_share(engines: int, *, free_bytes: int, total_bytes: int, model="smollm2-135m-instruct",
                 weight_format: str = "bf16", dtype: str = "bfloat16", max_model_len: int = 2048,
                 kv_cache_gib: float | None = None, runtime_buffer_gib: float = DEFAULT_RUNTIME_BUFFER_GIB,
                 reserve_gib: float = DEFAULT_RESERVE_GIB, block_size: int = GPU_BLOCK_SIZE) -> GpuShare:
    """The ``--gpu-memory-utilization`` each of ``engines`` engines gets on a GPU with ``free_bytes`` of
    ``total_bytes`` free, and what each needs (see module docstring). Pure. Raises CourseError when
    they cannot fit, saying by how much and what to change."""
    if not (isinstance(engines, int) and engines >= 1):
        raise CourseError(f"engines={engines!r}: give how many engines share the GPU (a whole number ≥ 1)")
    if not (0 < free_bytes <= total_bytes):
        raise CourseError(f"free {free_bytes} B of total {total_bytes} B: free memory must be positive and at most "
                          "the total (read both with torch.cuda.mem_get_info)")
    if kv_cache_gib is not None and kv_cache_gib <= 0:
        raise CourseError(f"kv_cache_gib={kv_cache_gib}: give a positive size in GiB, or None for one request")
    # The calculator's block arithmetic for this model (a large explicit budget only to read the page size).
    probe = calculate(model, None, weight_format=weight_format, dtype=dtype, max_model_len=max_model_len,
                      kv_cache_memory_bytes=1 << 40, block_size=block_size)
    if kv_cache_gib is None:
        kv_bytes = (probe.blocks_per_request + 1) * probe.bytes_per_block    # one request + the null block
    else:
        kv_bytes = int(kv_cache_gib * GiB)
        calculate(model, None, weight_format=weight_format, dtype=dtype, max_model_len=max_model_len,
                  kv_cache_memory_bytes=kv_bytes, block_size=block_size)      # refuses a KV that holds no request
    total_gib, free_gib = total_bytes / GiB, free_bytes / GiB
    need = probe.weights_gib_per_gpu + runtime_buffer_gib + kv_bytes / GiB
    bookable = free_gib - reserve_gib
    util = math.floor(max(0.0, bookable) / (engines * total_gib) / UTIL_STEP) * UTIL_STEP
    util = min(util, 1.0)
    share = util * total_gib
    if util <= 0 or share < need:
        most = int(max(0.0, bookable) // need) if need > 0 else 0
        raise CourseError(
            f"{engines} engine(s) of {probe.model} cannot share this GPU: each needs {need:.2f} GiB (weights "
            f"{probe.weights_gib_per_gpu:.2f} + runtime buffer {runtime_buffer_gib:.2f} + KV {kv_bytes / GiB:.2f}) "
            f"but {free_gib:.2f} GiB free of {total_gib:.2f} (less {reserve_gib:.2f} reserve) gives each "
            f"{share:.2f} GiB; run at most {most} such engine(s), or a smaller model, max_model_len or KV budget")
    return GpuShare(engines=engines, free_gib=free_gib, total_gib=total_gib, reserve_gib=reserve_gib,
                    gpu_memory_utilization=round(util, 3), share_gib=share, model=probe.model,
                    weights_gib=probe.weights_gib_per_gpu, runtime_buffer_gib=runtime_buffer_gib,
                    kv_gib_needed=kv_bytes / GiB, kv_gib_explicit=kv_cache_gib is not None,
                    max_model_len=max_model_len, need_gib=need)


def engines_share(engines: int, *, device: int = 0, **kw) -> GpuShare:
    """:func:`engine_share` for this machine's GPU now (free and total from inferopt.serving.gpu.memory_info)."""
    from inferopt.serving.gpu import memory_info

    info = memory_info(device)
    if info is None:
        raise CourseError("no GPU answered (torch.cuda.mem_get_info / nvidia-smi): memory shares are for the GPU "
                          "engine; the CPU engine takes an explicit KV budget instead (kv_cache_gib)")
    return engine_share(engines, free_bytes=info[0], total_bytes=info[1], **kw)


def describe_split(share: GpuShare) -> str:
    """One paragraph for a notebook: how the GPU is split between the section's engines, and why."""
    n = share.engines
    kv = (f"its explicit KV budget of {share.kv_gib_needed:.2f} GiB" if share.kv_gib_explicit else
          f"a KV cache for one {share.max_model_len}-token request plus vLLM's null block "
          f"({share.kv_gib_needed:.3f} GiB)")
    return (f"This GPU has {share.total_gib:.2f} GiB, of which {share.free_gib:.2f} GiB were free when the split "
            f"was computed. vLLM refuses to start an engine when less than its utilization x total is free "
            f"(vllm/v1/worker/utils.py: request_memory), even with an explicit KV size, so each of the {n} "
            f"engine(s) gets --gpu-memory-utilization {share.gpu_memory_utilization:.3f}: (free - "
            f"{share.reserve_gib:.1f} GiB reserve) / ({n} x total), {share.share_gib:.2f} GiB each. The memory "
            f"calculator puts what one engine of {share.model} needs at {share.need_gib:.2f} GiB: weights "
            f"{share.weights_gib:.2f} GiB, runtime buffer {share.runtime_buffer_gib:.2f} GiB and {kv}, which "
            f"leaves {share.spare_gib:.2f} GiB spare per share. An engine that is restarted while the others run "
            f"finds its share free again; with vLLM's default 0.92 the first engine would book almost the "
            f"whole card and the second could not start.")


# ---------------------------------------------------------------- how many engines a section runs
_SECTION: dict = {"engines": None, "kw": {}, "share": None}


@contextlib.contextmanager
def section_engines(engines: int, **kw):
    """Within this block, each GPU engine the course starts gets the share of ``engines`` engines.

    The share is computed once, when the first engine starts (before any of them books memory), and
    reused for every engine of the block, restarts included. ``kw`` goes to :func:`engine_share`
    (e.g. ``max_model_len``, ``kv_cache_gib``; by default the engine's own)."""
    if not (isinstance(engines, int) and engines >= 1):
        raise CourseError(f"engines={engines!r}: give how many engines this section runs (a whole number ≥ 1)")
    saved = dict(_SECTION)
    _SECTION.update(engines=engines, kw=kw, share=None)
    try:
        yield
    finally:
        _SECTION.clear()
        _SECTION.update(saved)


def section_share(**engine_kw) -> GpuShare:
    """The current section's share (computed at its first call); one engine's share outside a section."""
    if _SECTION["engines"] is None:
        return engines_share(1, **engine_kw)
    if _SECTION["share"] is None:
        _SECTION["share"] = engines_share(_SECTION["engines"], **{**engine_kw, **_SECTION["kw"]})
    return _SECTION["share"]
