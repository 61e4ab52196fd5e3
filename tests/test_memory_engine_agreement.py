"""The memory calculator against the live CPU engine: same KV token count, same concurrency.

Three engine configurations (the two others start at once; run under `flock /tmp/inferopt-engine.lock`):
  1 GiB, float32, max_model_len 2048   (the session's live_server fixture)
  0.5 GiB, bfloat16, max_model_len 1000 (another budget, another KV dtype, a length that is not
                                        a multiple of the 128-token block)
  0.75 GiB, float32, max_model_len 1536 (a fractional GiB budget)
The engine's own start-up line "KV cache size: N tokens, Maximum concurrency for L tokens per
request: X.XXx" is parsed by inferopt.serving.engine and compared with inferopt.planning.memory's prediction.
"""
import pytest

from inferopt.planning.memory import cpu_engine_prediction
from inferopt.planning.model_specs import load_spec, spec_from_config
from inferopt.serving.engine import VLLMServer
from inferopt.serving.managed_process import start_together


def _assert_agrees(srv, kv_cache_gib, max_model_len, dtype):
    pred = cpu_engine_prediction(kv_cache_gib=kv_cache_gib, max_model_len=max_model_len, dtype=dtype)
    assert srv.kv_cache_tokens is not None, f"no 'KV cache size' line in {srv.log_path}"
    assert srv.facts.concurrency_for_tokens == max_model_len
    assert srv.kv_cache_tokens == pred.kv_cache_tokens, (srv.kv_cache_tokens, pred.kv_cache_tokens)
    assert srv.max_concurrency == round(pred.max_concurrency, 2), (srv.max_concurrency, pred.max_concurrency)


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
    _assert_agrees(live_server, 1.0, 2048, "float32")
    assert live_server.kv_cache_tokens == 23_296          # the figure COURSE.md recorded


OTHERS = [(0.5, 1000, "bfloat16"), (0.75, 1536, "float32")]


@pytest.fixture(scope="module")
def others():
    """The two other configurations, started at once (start-up is mostly imports)."""
    servers = [VLLMServer(max_model_len=n, kv_cache_gib=g, dtype=d, quiet=True) for g, n, d in OTHERS]
    start_together(*servers)
    try:
        yield dict(zip(OTHERS, servers, strict=True))
    finally:
        for srv in servers:
            srv.stop()


@pytest.mark.engine
@pytest.mark.parametrize("kv_cache_gib, max_model_len, dtype", OTHERS)
def test_other_budgets_dtypes_lengths(others, kv_cache_gib, max_model_len, dtype):
    _assert_agrees(others[(kv_cache_gib, max_model_len, dtype)], kv_cache_gib, max_model_len, dtype)
