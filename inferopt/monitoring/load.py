"""A small closed-loop load generator for the monitoring and capacity demos.

``concurrency`` worker threads each send chat requests one after another (a new one as soon
as the last answered) for ``requests_per_worker`` requests or until ``duration_s`` has passed.
Optionally a sampler thread reads ``/metrics`` every ``sample_every_s`` seconds, so the run can
be plotted as time series. Every prompt shares one system-style prefix (so the prefix cache
has something to hit) and ends with a different question.

Client-side timing here is only start/end of each request (seconds); TTFT/TPOT come from the
engine's own histograms (:mod:`.metrics_parse`), which is what a production dashboard sees.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from inferopt.errors import CourseError
from inferopt.monitoring.metrics_parse import MetricsSnapshot, delta, latency_quantiles, parse_metrics

# ~300 tokens: longer than two of the CPU engine's 128-token KV blocks, so that the prefix
# cache (which matches whole blocks) has something to hit.
SHARED_PREFIX = (
    "You are a concise assistant for a course on serving large language models in production. "
    "The learners run a small model on a laptop and a large model on a GPU server. They measure "
    "time to first token, time per output token, throughput in tokens per second, memory use and "
    "the length of the request queue. They change one setting at a time and measure again. They "
    "know that the prefill phase reads the whole prompt at once and is limited by compute, while "
    "the decode phase produces one token per step and is limited by memory bandwidth. They know "
    "that the key-value cache grows with the number of layers, the number of key-value heads, the "
    "head size, the data type and the number of tokens in flight, and that paged attention stores "
    "it in fixed-size blocks. They know that continuous batching admits new requests at every "
    "step, that chunked prefill splits long prompts so decoding streams do not stall, that prefix "
    "caching reuses the blocks of a shared system prompt, and that quantization trades a little "
    "accuracy for memory and speed. Answer every question in one or two plain sentences, without "
    "lists, headings or code, and do not repeat the question. They also read the dashboards of "
    "the service every morning and call a colleague when an alert fires in the night. ")
TOPICS = ("batching", "the KV cache", "quantization", "prefix caching", "tensor parallelism",
          "speculative decoding", "chunked prefill", "paged attention", "a GPU", "latency")


def prompt_for(i: int) -> str:
    """The i-th prompt: the shared prefix plus a question that differs per request."""
    return f"{SHARED_PREFIX}Question {i}: what is {TOPICS[i % len(TOPICS)]}, in short?"


@dataclass
class LoadResult:
    """One load run: per-request (start_s, end_s, ok, error) relative to the run start, wall
    time in seconds, metrics snapshots before/after and the sampled time series."""

    concurrency: int
    max_tokens: int
    wall_s: float
    requests: list = field(default_factory=list)
    before: MetricsSnapshot | None = None
    after: MetricsSnapshot | None = None
    samples: list = field(default_factory=list)     # [(t_s, MetricsSnapshot)]

    @property
    def completed(self) -> int:
        return sum(1 for r in self.requests if r["ok"])

    @property
    def errors(self) -> list:
        return [r["error"] for r in self.requests if not r["ok"]]

    @property
    def qps(self) -> float:
        """Completed requests per second of wall time."""
        return self.completed / self.wall_s if self.wall_s > 0 else 0.0

    def window(self) -> MetricsSnapshot:
        """Counters and histograms over this run only (after - before)."""
        if self.before is None or self.after is None:
            raise CourseError("this run has no before/after /metrics snapshots.")
        return delta(self.after, self.before)

    def quantiles(self) -> dict:
        """TTFT/TPOT/ITL/E2E P50/P95/P99 (seconds) over this run, from the engine's histograms."""
        return latency_quantiles(self.window())


def run_load(srv, concurrency: int = 4, requests_per_worker: int | None = 3, duration_s: float | None = None,
             max_tokens: int = 32, sample_every_s: float | None = None, first_index: int = 0) -> LoadResult:
    """Answer "what does the engine do under this load?": run the closed loop and return a
    :class:`LoadResult` (QPS, per-request times, metrics before/after, optional samples)."""
    if not (isinstance(concurrency, int) and concurrency >= 1):
        raise CourseError(f"concurrency must be a whole number >= 1, got {concurrency!r}.")
    if requests_per_worker is None and duration_s is None:
        raise CourseError("give requests_per_worker or duration_s (or both) so the load stops.")
    if requests_per_worker is not None and requests_per_worker < 1:
        raise CourseError(f"requests_per_worker must be >= 1, got {requests_per_worker!r}.")
    result = LoadResult(concurrency=concurrency, max_tokens=max_tokens, wall_s=0.0)
    lock = threading.Lock()
    stop = threading.Event()
    counter = iter(range(first_index, first_index + 10**9))
    result.before = parse_metrics(srv.metrics_text())
    t0 = time.monotonic()

    def worker():
        n = 0
        while not stop.is_set():
            if requests_per_worker is not None and n >= requests_per_worker:
                return
            if duration_s is not None and time.monotonic() - t0 >= duration_s:
                return
            with lock:
                i = next(counter)
            start = time.monotonic() - t0
            try:
                srv.chat(prompt_for(i), max_tokens=max_tokens)
                ok, err = True, ""
            except Exception as exc:  # recorded, the run goes on
                ok, err = False, str(exc)[:300]
            with lock:
                result.requests.append({"i": i, "start_s": start, "end_s": time.monotonic() - t0,
                                        "ok": ok, "error": err})
            n += 1

    def sampler():
        while not stop.is_set():
            try:
                result.samples.append((time.monotonic() - t0, parse_metrics(srv.metrics_text())))
            except Exception:
                pass
            stop.wait(sample_every_s)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    samp = threading.Thread(target=sampler, daemon=True) if sample_every_s else None
    if samp:
        samp.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    result.wall_s = time.monotonic() - t0
    stop.set()
    if samp:
        samp.join()
    result.after = parse_metrics(srv.metrics_text())
    result.samples.append((time.monotonic() - t0, result.after))
    result.requests.sort(key=lambda r: r["start_s"])
    return result
