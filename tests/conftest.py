"""Shared fixtures. `live_server` is one default CPU engine for the whole test session
(SmolLM2-135M, float32, 1 GiB KV, max_model_len 2048); tests that need other flags start
their own VLLMServer. Nothing is skipped: a missing engine or model fails with the fix."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def live_server():
    from inferopt.serving.engine import VLLMServer

    srv = VLLMServer(max_model_len=2048, kv_cache_gib=1.0, quiet=True)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()
