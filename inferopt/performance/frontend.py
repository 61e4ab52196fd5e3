"""The API server: what it costs to turn requests into tokens and tokens back into text.

vLLM's OpenAI server tokenizes each prompt, and for every step detokenizes the new token of each
running request and streams it (server-sent events). With ``--api-server-count k`` that work is
spread over k processes. :func:`frontend_time` is the time the front-end needs for one engine step's
output; when it exceeds the engine's step time, the front-end sets the pace (the GPU idles between
steps) and it is the binding limit. The costs per request and per token are a profile's
``frontend_per_request_ms`` and ``frontend_per_token_us``.
"""
from __future__ import annotations

from inferopt.errors import CourseError
from inferopt.performance.profiles import Profile


def frontend_time(profile: Profile, tokens_out: int, new_requests: int, api_server_count: int = 1) -> float:
    """Seconds of front-end work for one step: new requests tokenized, output tokens detokenized and sent."""
    if not isinstance(api_server_count, int) or api_server_count < 1:
        raise CourseError(f"api_server_count={api_server_count!r}: give a whole number >= 1 (--api-server-count)")
    work = new_requests * profile.frontend_per_request_ms * 1e-3 + tokens_out * profile.frontend_per_token_us * 1e-6
    return work / api_server_count


def frontend_token_capacity(profile: Profile, api_server_count: int = 1) -> float:
    """Output tokens per second the front-end can stream at most (per-token cost only)."""
    per = profile.frontend_per_token_us * 1e-6
    return float("inf") if per == 0 else api_server_count / per
