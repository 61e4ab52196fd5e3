"""One engine for a whole room (or a whole test session): which running engine to use, and whether it fits.

``INFEROPT_ENGINE_URL=http://HOST:PORT`` points every ``VLLMServer(...)`` a notebook starts *with the
default shape* (no extra vLLM flags, no pinned cores, no fixed port, no extra environment) at that
running engine instead of starting one: the server object attaches (``VLLMServer.start`` reads the
engine's facts through :mod:`inferopt.serving.engine_facts`) and never stops it. The cells that run a
before/after experiment pass vLLM flags (or cores) and keep starting their own engine; they print one
line saying so.

An attached engine must have what the cell asked for: the same served model, the same
``max_model_len``, the same KV budget when the cell gives one (``--kv-cache-memory-bytes``, read from
``vllm:cache_config_info``), the KV tokens the memory calculator predicts for the cell's dtype (the
endpoints do not name the model dtype), and room for one whole request (KV tokens >= max_model_len).
When it does not, ``INFEROPT_ENGINE_MISMATCH`` decides: ``refuse`` (the default: a room) raises a one-line
CourseError naming what differs; ``start`` (the test suite) starts the cell's own engine and says so.

Everything here is a pure decision over :class:`EngineFacts` and the environment; the server
object itself lives in :mod:`inferopt.serving.engine` (``VLLMServer``) and
:mod:`inferopt.serving.attach` (``AttachedEngine``).
"""
from __future__ import annotations

import os
import re

from inferopt.errors import CourseError
from inferopt.serving.engine_facts import EngineFacts, read_engine_facts

ENV_URL = "INFEROPT_ENGINE_URL"
ENV_MISMATCH = "INFEROPT_ENGINE_MISMATCH"
MISMATCH_POLICIES = ("refuse", "start")
_URL_RE = re.compile(r"^http://([A-Za-z0-9.\-]+|\[[0-9a-fA-F:]+\]):(\d{1,5})/?(?:v1/?)?$")


def split_url(url: str) -> tuple[str, int]:
    """(host, port) of an engine URL such as http://127.0.0.1:8000 (a trailing /v1 is allowed)."""
    m = _URL_RE.match((url or "").strip())
    if not m:
        raise CourseError(f"engine URL {url!r}: give the engine's base URL with its port, e.g. "
                          f"{ENV_URL}=http://127.0.0.1:8000")
    return m.group(1), int(m.group(2))


def base_url(url: str) -> str:
    host, port = split_url(url)
    return f"http://{host}:{port}"


def shared_engine_url() -> str | None:
    """The room's engine from ``INFEROPT_ENGINE_URL`` (None when unset or empty)."""
    url = os.environ.get(ENV_URL, "").strip()
    return base_url(url) if url else None


def mismatch_policy() -> str:
    policy = os.environ.get(ENV_MISMATCH, "refuse").strip() or "refuse"
    if policy not in MISMATCH_POLICIES:
        raise CourseError(f"{ENV_MISMATCH}={policy!r}: use 'refuse' (a room: say what differs) or "
                          "'start' (start the cell's own engine instead)")
    return policy


def own_engine_reason(extra_args=(), cpu_cores=None, port=None, env=None, own: bool = False) -> str | None:
    """Why a requested engine cannot be the shared one (None: it has the default shape)."""
    if own:
        return "it is the baseline of a before/after experiment (own=True): a shared engine carries other load"
    if extra_args:
        return f"it runs with its own vLLM flags ({' '.join(map(str, extra_args))})"
    if cpu_cores:
        return f"it is pinned to CPU cores {list(cpu_cores)}"
    if port is not None:
        return f"it needs port {port}"
    if env:
        return f"it sets {', '.join(sorted(env))}"
    return None


def mismatches(facts: EngineFacts, *, model: str | None = None, max_model_len: int | None = None,
               kv_cache_memory_bytes: int | None = None, dtype: str | None = None,
               enable_prefix_caching: bool | None = None, kv_cache_tokens: int | None = None,
               kv_cache_tokens_at_least: int | None = None, max_model_len_at_least: int | None = None) -> list[str]:
    """What the engine described by ``facts`` lacks of what was asked ([] = it fits).

    Exact settings: ``model`` (served name), ``max_model_len``, ``kv_cache_memory_bytes``, ``dtype``
    (the model dtype), ``enable_prefix_caching``, ``kv_cache_tokens`` (the memory calculator's figure for the
    asked configuration). Lower bounds: ``kv_cache_tokens_at_least``, ``max_model_len_at_least``. A setting
    the engine did not report counts as missing, except the dtype (no endpoint names it)
    when ``kv_cache_tokens`` is asked: the same budget holds twice the tokens at half the bytes, so
    the token count settles the dtype."""
    out = []

    def need(name, wanted, have, show=str):
        if wanted is None:
            return
        if have is None:
            out.append(f"{name} {show(wanted)} (the engine does not report it)")
        elif have != wanted:
            out.append(f"{name} {show(wanted)} (it has {show(have)})")

    need("model", model, facts.model)
    need("max_model_len", max_model_len, facts.max_model_len)
    need("KV budget", kv_cache_memory_bytes, facts.kv_cache_memory_bytes, lambda b: f"{b / (1 << 30):g} GiB")
    if not (facts.model_dtype is None and kv_cache_tokens is not None):
        need("dtype", dtype, facts.model_dtype)
    need("KV tokens", kv_cache_tokens, facts.kv_cache_tokens, lambda t: f"{t:,}")
    need("prefix caching", enable_prefix_caching, facts.enable_prefix_caching, lambda b: "on" if b else "off")
    for name, floor, have in (("KV tokens", kv_cache_tokens_at_least, facts.kv_cache_tokens),
                              ("max_model_len", max_model_len_at_least, facts.max_model_len)):
        if floor is None:
            continue
        if have is None:
            out.append(f"{name} >= {floor:,} (the engine does not report it)")
        elif have < floor:
            out.append(f"{name} >= {floor:,} (it has {have:,})")
    return out


def refusal(url: str, missing: list[str]) -> CourseError:
    """The one-line refusal: which engine, what it lacks, what to do."""
    return CourseError(f"the shared engine at {url} does not have the configuration this cell needs: "
                       f"{'; '.join(missing)}. Ask for an engine started with it, or unset {ENV_URL} "
                       f"(or set {ENV_MISMATCH}=start) to start your own")


def read_shared_facts(url: str, timeout: float = 10.0) -> EngineFacts:
    """The facts of the engine at ``url`` from its own endpoints alone (/metrics, /v1/models), never from a log or
    a process on this machine: a room's engine on another machine and one on this machine read the same, so what
    a notebook learns from an attached engine does not depend on where the engine runs. What only a start-up log
    says (the model dtype, the token budget) stays None; the dtype is then settled by the KV tokens
    (:func:`mismatches`), and the KV element width by :meth:`EngineFacts.kv_dtype_bytes_from_budget`."""
    return read_engine_facts(base_url(url), timeout=timeout)
