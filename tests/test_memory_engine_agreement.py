"""The memory calculator against the live CPU engine: same KV token count, same concurrency.

The engine's own start-up line "KV cache size: N tokens, Maximum concurrency for L tokens per request: X.XXx"
is parsed by inferopt.serving.engine and compared with inferopt.planning.memory's prediction
(tests/kv_agreement.py) on every configuration the suite starts anyway, none started only for this:
  1 GiB, float32, max_model_len 2048     here (the session's live_server fixture)
  0.5 GiB, bfloat16, max_model_len 1000  tests/test_cpu_isa.py's engine limited to AVX2 (another budget, another
                                         KV dtype, a length that is not a multiple of the 128-token block)
  0.75 GiB, float32, max_model_len 1536  tests/test_engine.py's engine pinned to core 1 (a fractional GiB budget)
  100,270,080 B, float32, 2048           tests/test_start_verdict_engine.py's budget that just fits (17 blocks)
"""
import pytest
from kv_agreement import assert_kv_agrees

from inferopt.planning.model_specs import load_spec, spec_from_config


@pytest.mark.engine
def test_served_model_is_the_shipped_config(live_server):
    import json
    from pathlib import Path

    served = spec_from_config(json.loads((Path(live_server.model) / "config.json").read_text()))
    shipped = load_spec("smollm2-135m-instruct")
    for k in ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim", "vocab_size",
              "intermediate_size", "tie_word_embeddings"):
        assert getattr(served, k) == getattr(shipped, k), k


@pytest.mark.engine
def test_default_engine_1gib_float32_2048(live_server):
    assert (live_server.kv_cache_gib, live_server.max_model_len, live_server.dtype) == (1.0, 2048, "float32")
    assert_kv_agrees(live_server, 1.0, 2048, "float32")
    assert live_server.kv_cache_tokens == 23_296          # the figure COURSE.md recorded
