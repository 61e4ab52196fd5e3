"""Shared fixtures. `live_server` is one default CPU engine for the whole test session
(SmolLM2-135M, float32, 1 GiB KV, max_model_len 2048); tests that need other flags start
their own VLLMServer. Nothing is skipped: a missing engine or model fails with the fix.

`make test` runs pytest with two pytest-xdist workers (``-n 2 --dist loadgroup``). Everything that
starts an engine, Prometheus, nginx or the router (the *live* part: test modules that use them and
the notebooks that do) is one xdist group, so it runs on one worker, in order, one engine at a time,
exactly as in a plain run; the pure-Python tests and the notebooks without live cells share the other
worker and run niced (``nice 10``: the live worker keeps its CPU when both want it). Every live
assertion is a relation within one run, so it holds beside that neighbour. A plain ``pytest`` (no
``-n``) ignores the groups."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

# what a test module or notebook uses when it is live (it starts a process the suite must run one at a time)
_LIVE = re.compile(r"\b(VLLMServer|live_server|PrometheusServer|NginxGateway|VLLMRouter|mark\.engine)\b|tags: \[live\]")
_LIVE_CACHE: dict = {}
# the suite starts the engines it measures: a room's INFEROPT_ENGINE_URL in the caller's shell must not make
# its VLLMServers attach (tests/test_attach.py sets it itself where it tests that)
os.environ.pop("INFEROPT_ENGINE_URL", None)
os.environ.pop("INFEROPT_ENGINE_MISMATCH", None)
NICE_PURE = 10


def _is_live(path: Path) -> bool:
    if path not in _LIVE_CACHE:
        text = path.read_text(errors="replace")
        if path.suffix == ".ipynb":
            twin = path.with_suffix(".md")
            text = twin.read_text(errors="replace") if twin.exists() else text
        _LIVE_CACHE[path] = bool(_LIVE.search(text))
    return _LIVE_CACHE[path]


@pytest.hookimpl(tryfirst=True)        # before xdist's own hook turns the markers into group ids
def pytest_collection_modifyitems(config, items):
    """Under xdist: the live part is one group (one worker, in order); each other file is its own group."""
    if "PYTEST_XDIST_WORKER" not in os.environ:     # items are collected (and grouped) on each worker
        return
    for item in items:
        path = Path(str(item.path))
        group = "live" if _is_live(path) else f"file:{path.name}"
        item.add_marker(pytest.mark.xdist_group(name=group))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Under xdist, as root: a worker runs a pure item at nice 10 and a live one at nice 0 (engines and
    kernels it starts inherit that)."""
    if "PYTEST_XDIST_WORKER" not in os.environ or os.geteuid() != 0:
        return
    want = 0 if _is_live(Path(str(item.path))) else NICE_PURE
    try:
        os.setpriority(os.PRIO_PROCESS, 0, want)
    except OSError:
        pass


@pytest.fixture(scope="session")
def live_server():
    from inferopt.serving.engine import VLLMServer

    srv = VLLMServer(max_model_len=2048, kv_cache_gib=1.0, quiet=True)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()
