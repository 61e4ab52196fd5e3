"""The memory calculator's KV prediction against a running CPU engine's own start-up line ("KV cache size: N
tokens, Maximum concurrency for L tokens per request: X.XXx", parsed by inferopt.serving.engine).

Used wherever the suite starts an engine of another configuration anyway, so that no engine is started only to
be compared (each start is ~20 s of one core's imports; tests/test_memory_engine_agreement.py lists them)."""
from inferopt.planning.memory import cpu_engine_prediction


def assert_kv_agrees(srv, kv_cache_gib: float, max_model_len: int, dtype: str) -> None:
    pred = cpu_engine_prediction(kv_cache_gib=kv_cache_gib, max_model_len=max_model_len, dtype=dtype)
    assert srv.kv_cache_tokens is not None, f"no 'KV cache size' line in {srv.log_path}"
    assert srv.facts.concurrency_for_tokens == max_model_len
    assert srv.kv_cache_tokens == pred.kv_cache_tokens, (srv.kv_cache_tokens, pred.kv_cache_tokens)
    assert srv.max_concurrency == round(pred.max_concurrency, 2), (srv.max_concurrency, pred.max_concurrency)
