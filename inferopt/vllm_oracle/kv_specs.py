"""vLLM's own KV-cache specs for a model config and a TP x PP layout (``vllm/v1/kv_cache_interface.py``).

:func:`layer_specs` builds, for every decoder layer of every PP stage, the spec dataclass vLLM's
attention layer registers (``FullAttentionSpec``, ``SlidingWindowSpec`` or ``MLAAttentionSpec``) from
the values vLLM derives from the config: ``ModelConfig`` (made by ``EngineArgs`` on a folder holding
only the config.json, as :mod:`engine_config` does) gives KV heads per rank
(``get_num_kv_heads(parallel_config)``), the head size (``get_head_size()``), MLA (``use_mla``), the
stage's layers (``get_layers_start_end_indices``: ``get_pp_indices``) and the sliding window
(``hf_text_config.layer_types`` per layer, as gemma2.py / gemma3.py / llama.py read it; without
``layer_types`` the config's one ``sliding_window`` on every layer, as ``Attention`` takes it from
``CacheConfig``). :func:`stage_summary` reports each stage's page size and
``max_memory_usage_bytes`` (bytes one request of ``max_model_len`` tokens can hold).

Unlike :mod:`client`, it runs in the calling process on vLLM's CPU platform: the spec dataclasses and the
ModelConfig values read above do not depend on the platform (only the engine's default block size does, and
the caller passes the block size). Imports vLLM (once, ~20-40 s): call it from a test fixture or a script,
never from a notebook's fast path.
"""
from __future__ import annotations

from functools import cache

from inferopt.vllm_oracle import engine_config

_TORCH_DTYPES = {"bfloat16": "bfloat16", "float16": "float16", "float32": "float32", "fp8": "float8_e4m3fn",
                 "fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2"}


@cache
def model_config(model: str, max_model_len: int | None = None, dtype: str = "bfloat16"):
    """vLLM's ModelConfig for a shipped model name or config.json path (config only, no weights, no tokenizer)."""
    from vllm.engine.arg_utils import EngineArgs
    return EngineArgs(model=engine_config.model_folder(str(model)), skip_tokenizer_init=True, dtype=dtype,
                      max_model_len=max_model_len).create_model_config()


def _vllm_config(mc, tp: int, pp: int, block_size: int, max_num_batched_tokens: int | None = None):
    from vllm.config import CacheConfig, ParallelConfig, SchedulerConfig, VllmConfig
    budget = max(8192, mc.max_model_len) if max_num_batched_tokens is None else max_num_batched_tokens
    return VllmConfig(model_config=mc, cache_config=CacheConfig(block_size=block_size),
                      parallel_config=ParallelConfig(tensor_parallel_size=tp, pipeline_parallel_size=pp),
                      scheduler_config=SchedulerConfig(max_model_len=mc.max_model_len, is_encoder_decoder=False,
                                                       max_num_batched_tokens=budget))


def layer_specs(model: str, tp: int = 1, pp: int = 1, block_size: int = 16, kv_dtype: str = "bfloat16",
                max_model_len: int | None = None) -> list[list]:
    """Per PP stage, the list of vLLM KV-cache spec objects of that stage's decoder layers (one rank's view)."""
    import torch
    from vllm.config import ParallelConfig
    from vllm.v1.kv_cache_interface import FullAttentionSpec, MLAAttentionSpec, SlidingWindowSpec

    mc = model_config(str(model), max_model_len)
    cfg = mc.hf_text_config
    dtype = getattr(torch, _TORCH_DTYPES[kv_dtype])
    types = getattr(cfg, "layer_types", None)
    window = mc.get_sliding_window()
    stages = []
    for rank in range(pp):
        pc = ParallelConfig(tensor_parallel_size=tp, pipeline_parallel_size=pp)
        pc.rank = rank * tp
        start, end = mc.get_layers_start_end_indices(pc)
        heads = mc.get_num_kv_heads(pc)
        specs = []
        for i in range(start, end):
            if mc.use_mla:
                specs.append(MLAAttentionSpec(block_size=block_size, num_kv_heads=heads, head_size=mc.get_head_size(),
                                              dtype=dtype))
            elif window and (types is None or types[i] == "sliding_attention"):
                specs.append(SlidingWindowSpec(block_size=block_size, num_kv_heads=heads,
                                               head_size=mc.get_head_size(), dtype=dtype, sliding_window=window))
            else:
                specs.append(FullAttentionSpec(block_size=block_size, num_kv_heads=heads,
                                               head_size=mc.get_head_size(), dtype=dtype))
        stages.append(specs)
    return stages


def stage_summary(model: str, tp: int = 1, pp: int = 1, block_size: int = 16, kv_dtype: str = "bfloat16",
                  max_model_len: int | None = None) -> list[dict]:
    """Per PP stage: layers, kinds of spec, KV heads per rank, page bytes per layer (set), the sum of
    ``page_size_bytes`` over the stage (one block of every layer) and the sum of ``max_memory_usage_bytes``."""
    mc = model_config(str(model), max_model_len)
    vc = _vllm_config(mc, tp, pp, block_size)
    out = []
    for specs in layer_specs(model, tp, pp, block_size, kv_dtype, max_model_len):
        out.append({"layers": len(specs), "kinds": sorted({type(s).__name__ for s in specs}),
                    "kv_heads_per_rank": specs[0].num_kv_heads, "head_size": specs[0].head_size,
                    "pages": sorted({s.page_size_bytes for s in specs}),
                    "block_bytes": sum(s.page_size_bytes for s in specs),
                    "max_memory_usage_bytes": sum(s.max_memory_usage_bytes(vc) for s in specs),
                    "sliding_layers": sum(type(s).__name__ == "SlidingWindowSpec" for s in specs),
                    "max_model_len": mc.max_model_len, "max_in_flight_tokens": vc.max_in_flight_tokens})
    return out


def sizing(model: str, kv_cache_bytes: int, tp: int = 1, pp: int = 1, block_size: int = 16,
           kv_dtype: str = "bfloat16", max_model_len: int | None = None,
           max_num_batched_tokens: int | None = None) -> dict:
    """vLLM's own KV-cache sizing of one GPU of the first (largest) PP stage holding ``kv_cache_bytes`` of KV cache:
    the layers' specs (:func:`layer_specs`) grouped by ``get_kv_cache_groups`` (one group per attention kind for a
    hybrid model such as Gemma 3, the hybrid KV cache manager), the blocks by ``get_kv_cache_config_from_groups`` and
    the requests of ``max_model_len`` tokens at once by ``get_max_concurrency_for_kv_cache_config``
    (vllm/v1/core/kv_cache_utils.py): a sliding-window layer keeps only the window's blocks of each request."""
    from vllm.utils.math_utils import cdiv
    from vllm.v1.core.kv_cache_utils import (
        get_kv_cache_capacity,
        get_kv_cache_config_from_groups,
        get_kv_cache_groups,
    )

    mc = model_config(str(model), max_model_len)
    vc = _vllm_config(mc, tp, pp, block_size, max_num_batched_tokens)
    # the engine core resolves one layout before profiling (resolve_kv_cache_layout); bytes per block do not depend on it
    vc.cache_config.kv_cache_layout = "LBNHC"
    specs = layer_specs(model, tp, pp, block_size, kv_dtype, max_model_len)[0]
    by_layer = {f"model.layers.{i}.self_attn.attn": s for i, s in enumerate(specs)}
    groups = get_kv_cache_groups(vc, dict(by_layer))
    cfg = get_kv_cache_config_from_groups(vc, groups, int(kv_cache_bytes))
    tokens, conc = get_kv_cache_capacity(vc, cfg)
    per_request = sum(cdiv(g.kv_cache_spec.max_memory_usage_bytes(vc), g.kv_cache_spec.page_size_bytes)
                      for g in cfg.kv_cache_groups)
    return {"num_blocks": cfg.num_blocks, "groups": [[type(g.kv_cache_spec).__name__, len(g.layer_names)]
                                                     for g in cfg.kv_cache_groups],
            "max_concurrency": conc, "max_model_len": mc.max_model_len, "kv_cache_tokens": tokens,
            "blocks_per_request": per_request, "bytes_per_block": sum(s.page_size_bytes for s in specs),
            "sliding_layers": sum(type(s).__name__ == "SlidingWindowSpec" for s in specs),
            "sliding_window": mc.get_sliding_window(), "layers": len(specs)}
