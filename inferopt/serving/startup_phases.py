"""Where an engine's start-up time goes, read from its own log's timestamps (vLLM 0.32, one-second resolution).

A CPU engine is three Python processes, each importing vLLM and torch before it does any work: the
API server (``vllm/entrypoints/openai/api_server.py``), the engine core (``EngineCore``,
``vllm/v1/engine/core.py``) and the model worker (``vllm/v1/executor/multiproc_executor.py``; on CPU
``vllm/platforms/cpu.py: CpuPlatform.check_and_update_config`` forces this ``mp`` executor even for one
worker). The phases, from the log lines that mark them:

- ``api_server``: spawn -> the API server's first log line (its imports; needs the spawn time);
- ``engine_core``: that line -> ``Initializing a V1 LLM engine`` (config, then the engine-core process's imports);
- ``worker``: -> ``Starting to load model`` (the worker process: start and imports);
- ``model_load``: -> ``Loading weights took`` (reading the weights);
- ``kv_and_warmup``: -> ``init engine (profile, create kv cache, warmup model) took``;
- ``serving``: -> ``Available routes are`` (the API server mounts its routes).
"""
from __future__ import annotations

import re
from datetime import datetime

_TS = re.compile(r"(?:INFO|WARNING|DEBUG|ERROR) (\d\d-\d\d \d\d:\d\d:\d\d)")
MARKS = (("engine_core", "Initializing a V1 LLM engine"), ("worker", "Starting to load model"),
         ("model_load", "Loading weights took"), ("kv_and_warmup", "init engine (profile, create kv cache"),
         ("serving", "Available routes are"))


def _stamp(line: str) -> datetime | None:
    m = _TS.search(line)
    return datetime.strptime("2000-" + m.group(1), "%Y-%m-%d %H:%M:%S") if m else None


def startup_phases(log_text: str, spawned_at: datetime | None = None) -> dict[str, float]:
    """{phase: seconds} in start order (see the module docstring); a phase whose marks are missing is left out.
    ``spawned_at`` (local wall-clock time of the spawn, any year) adds the ``api_server`` phase."""
    lines = log_text.splitlines()
    first = next((s for s in map(_stamp, lines) if s is not None), None)
    if first is None:
        return {}
    out, prev = {}, first
    if spawned_at is not None:
        out["api_server"] = (first - spawned_at.replace(year=2000)).total_seconds()
    for name, needle in MARKS:
        at = next((s for line in lines if needle in line and (s := _stamp(line)) is not None), None)
        if at is None:
            continue
        out[name] = (at - prev).total_seconds()
        prev = at
    return out
