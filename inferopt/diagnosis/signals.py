"""vLLM's own signals for the diagnosis, read from a ``/metrics`` snapshot (a file or a URL)."""
from __future__ import annotations

from inferopt.errors import CourseError


def signals_from_metrics(text: str, earlier: str | None = None) -> dict:
    """The decision engine's ``metrics`` fields read from a vLLM ``/metrics`` snapshot (Prometheus
    text; with ``earlier``, counters over the window between the two scrapes):
    preemptions (vllm:num_preemptions_total), queue_len (vllm:num_requests_waiting),
    kv_cache_usage (vllm:kv_cache_usage_perc, a 0..1 fraction), prefix_cache_hit_rate
    (hits_total / queries_total) and spec_acceptance_rate (spec_decode accepted / draft tokens).
    A signal the engine does not expose is left out (e.g. no speculative decoding configured)."""
    from inferopt.monitoring import metrics_parse as mp

    snap = mp.parse_metrics(text)
    window = mp.delta(snap, mp.parse_metrics(earlier)) if earlier else snap
    names = snap.sample_names
    if not any(n.startswith("vllm:") for n in names):
        raise CourseError("the /metrics snapshot has no vllm: samples; is it a vLLM engine's /metrics?")
    out = {}
    if "vllm:num_preemptions_total" in names:
        out["preemptions"] = int(window.value("vllm:num_preemptions_total"))
    if "vllm:num_requests_waiting" in names:
        out["queue_len"] = int(mp.queue_length(snap))
    if "vllm:kv_cache_usage_perc" in names:
        out["kv_cache_usage"] = min(1.0, max(0.0, mp.kv_cache_usage(snap)))
    if "vllm:prefix_cache_queries_total" in names:
        rate = mp.prefix_cache_hit_rate(window)
        if rate is not None:
            out["prefix_cache_hit_rate"] = min(1.0, rate)
    if "vllm:spec_decode_num_draft_tokens_total" in names:
        drafted = window.value("vllm:spec_decode_num_draft_tokens_total")
        if drafted > 0:
            out["spec_acceptance_rate"] = min(1.0, window.value("vllm:spec_decode_num_accepted_tokens_total") / drafted)
    return out


def read_metrics_source(file: str | None = None, url: str | None = None) -> str:
    """The text of a /metrics snapshot from a file or a URL (one clear error otherwise)."""
    if file:
        from pathlib import Path

        p = Path(file)
        if not p.exists():
            raise CourseError(f"--metrics-file {file}: no such file; save one with `curl -s URL/metrics > {file}`")
        return p.read_text(encoding="utf-8", errors="replace")
    import requests

    try:
        r = requests.get(url, timeout=5)
    except requests.RequestException as exc:
        raise CourseError(f"--metrics-url {url}: cannot read it ({exc.__class__.__name__}); is the engine up?") from None
    if r.status_code != 200:
        raise CourseError(f"--metrics-url {url}: HTTP {r.status_code}; give the engine's /metrics URL")
    return r.text
