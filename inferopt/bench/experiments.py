"""The live experiments of the decision tree: measure, diagnose, change one flag, measure again.

Each function here measures one workload on a running engine (``inferopt.serving.engine.VLLMServer``)
and returns summaries; the notebook owns the engines (one per configuration, reused across
experiments) so that every comparison differs in exactly one flag. Sizes are chosen for the
2-core CPU engine (about a minute per experiment); on a GPU pass larger sizes.

- branch A (TTFT): ``shared_prefix_run`` - a customer-service system prompt shared by every
  request, one request at a time; prefix caching off vs on.
- branch B (TPOT/throughput): ``concurrency_sweep`` - continuous batching's throughput gain and its
  TPOT cost (``sweep_to_first_miss``: doubling until the SLO breaks, chapter 5b); ``spec_run`` - n-gram
  speculative decoding on code-like prompts at low and higher
  concurrency (pitfall 3.2: the gain shrinks as the batch grows).
- branch C (memory): ``kv_pressure_run`` - more requests than the KV budget holds; /metrics shows
  waiting and preempted requests; ``kv_fix_gib`` - the memory calculator's budget for the load.
- branch D (tail): ``prefill_interference_run`` - a long prompt arrives while others decode; the
  decode streams' ITL P99 with the whole prefill in one step vs split into chunks.
``decision_inputs`` turns a summary (+ /metrics deltas) into the decision engine's input.
"""
from __future__ import annotations

import math
import random
import threading
import time

from inferopt.bench import loadgen
from inferopt.bench.metrics import SLO, summarize
from inferopt.bench.workload import RequestSpec, Workload, build_requests, load_tokenizer
from inferopt.errors import CourseError

# ---------------------------------------------------------------- /metrics
WATCHED = ("vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc",
           "vllm:num_preemptions_total", "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
           "vllm:spec_decode_num_draft_tokens_total", "vllm:spec_decode_num_accepted_tokens_total",
           "vllm:spec_decode_num_drafts_total")


def parse_metrics(text: str) -> dict:
    """Sum each vLLM sample over its labels: {'vllm:num_preemptions_total': 3.0, ...}.

    Counters keep their ``_total`` name; histogram parts (_bucket/_sum/_count) are kept as named."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name.startswith("vllm:"):
                out[s.name] = out.get(s.name, 0.0) + float(s.value)
    return out


def parse_per_position(text: str, name: str = "vllm:spec_decode_num_accepted_tokens_per_pos_total") -> dict:
    """{position: value} of a counter labelled by ``position`` (summed over its other labels); {} when absent."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name and "position" in s.labels:
                pos = int(s.labels["position"])
                out[pos] = out.get(pos, 0.0) + float(s.value)
    return out


def scrape(srv) -> dict:
    """The engine's /metrics now, summed over labels (see parse_metrics)."""
    return parse_metrics(srv.metrics_text())


def delta(after: dict, before: dict, name: str) -> float:
    return after.get(name, 0.0) - before.get(name, 0.0)


def per_step(after: dict, before: dict) -> float | None:
    """Requests served per engine step between two scrapes: the engine's own batch size, from counters.

    Every engine step that produces output adds one observation to ``vllm:iteration_tokens_total``
    (a histogram; vLLM 0.32 ``v1/metrics/loggers.py``, one ``IterationStats`` per engine output in
    ``v1/engine/async_llm.py``) and one generated token per request it advanced to
    ``vllm:generation_tokens_total``. Their ratio is the mean number of requests each step decoded:
    polling ``vllm:num_requests_running`` can miss a batch that lives 0.1 s, the counters cannot."""
    steps = delta(after, before, "vllm:iteration_tokens_total_count")
    return delta(after, before, "vllm:generation_tokens_total") / steps if steps > 0 else None


def mean_queue_ms(after: dict, before: dict) -> float | None:
    """Mean time a request waited in vLLM's queue between two scrapes (ms), from the
    ``vllm:request_queue_time_seconds`` histogram's sum and count; None if no request finished."""
    n = delta(after, before, "vllm:request_queue_time_seconds_count")
    return 1000 * delta(after, before, "vllm:request_queue_time_seconds_sum") / n if n > 0 else None


class MetricsPoller:
    """Samples /metrics gauges every ``interval_s`` in a thread; ``peak[name]`` is the maximum seen, ``timeline``
    the requests inside the engine at each sample (``vllm:num_requests_running`` + ``vllm:num_requests_waiting``,
    with the sample's ``time.perf_counter()``)."""

    def __init__(self, srv, interval_s: float = 0.5):
        self.srv, self.interval_s = srv, interval_s
        self.peak: dict = {}
        self.samples = 0
        self.timeline: list = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self._stop.is_set():
            try:
                m = scrape(self.srv)
            except CourseError:
                break
            self.samples += 1
            self.timeline.append((time.perf_counter(),
                                  m.get("vllm:num_requests_running", 0.0) + m.get("vllm:num_requests_waiting", 0.0)))
            for k in ("vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc"):
                self.peak[k] = max(self.peak.get(k, 0.0), m.get(k, 0.0))
            self._stop.wait(self.interval_s)

    def in_engine_request_seconds(self) -> float:
        """The area under the engine's own count of requests in it (running + waiting) over the polled window,
        in request-seconds: each sample holds until the next. Divided by a run's duration it is the time-averaged
        number of requests in the engine, measured by the engine, not from the client's per-request times."""
        t = self.timeline
        return sum(n * (t2 - t1) for (t1, n), (t2, _) in zip(t[:-1], t[1:], strict=True))

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(timeout=5)


class Sampler:
    """Calls ``read()`` every ``interval_s`` in a thread from ``start()`` to ``stop()``; ``samples`` holds
    (seconds since ``t0`` by ``time.monotonic()``, the value) for each read that answered (a read that raises one of
    ``errors``, e.g. a server restarting, is skipped). Chapter 06b samples the router's view of each engine's health
    this way while an engine is killed and restarted."""

    def __init__(self, read, *, t0: float, interval_s: float = 0.5, errors=(OSError, ValueError)):
        if interval_s <= 0:
            raise CourseError(f"Sampler: interval_s={interval_s}; give a positive number of seconds")
        self.read, self.t0, self.interval_s, self.errors = read, t0, interval_s, errors
        self.samples: list = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self._stop.is_set():
            try:
                self.samples.append((time.monotonic() - self.t0, self.read()))
            except self.errors:
                pass
            self._stop.wait(self.interval_s)

    def start(self) -> Sampler:
        self._t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._t.join(timeout=10)


def kill_under_load(ep, requests, *, rate: float, kill, kill_after: int, after_n: int, settle_s: float,
                    t0: float) -> tuple:
    """An open-loop load at ``rate`` req/s with a crash in it: once ``kill_after`` requests have finished, call
    ``kill()`` (no drain); the load stops sending once ``after_n`` requests sent ``settle_s`` or more after the kill
    have finished, so both sides of the kill have data. Answers (the run, the kill's time in seconds since ``t0``).
    The kill waits for finished requests, not for a fixed time: on a slow machine a fixed time can come before any
    request has finished. ``requests`` must be more than the load needs (it stops itself)."""
    if kill_after < 0 or after_n < 1 or settle_s < 0:
        raise CourseError(f"kill_under_load: kill_after={kill_after}, after_n={after_n}, settle_s={settle_s}; give "
                          "kill_after >= 0, after_n >= 1 and settle_s >= 0")
    finished, out, at = [], {}, {}

    def after_crash_done():
        return "kill" in at and sum(r.ok and r.start_s >= at["kill"] + settle_s for r in finished) >= after_n

    def load():
        out["run"] = loadgen.run(ep, requests, rate=rate, progress=False, on_record=finished.append,
                                 stop_when=after_crash_done)
    sending = threading.Thread(target=load)
    sending.start()
    while sum(r.ok for r in finished) < kill_after and sending.is_alive():      # poll the finished count
        time.sleep(0.05)
    kill()
    at["kill"] = time.monotonic() - t0
    sending.join()
    return out["run"], at["kill"]


def _measure(srv, run_kwargs: dict, slo: SLO | None = None, poll: bool = False) -> dict:
    """Run loadgen with /metrics read before and after (and polled if asked); one result dict."""
    ep = loadgen.Endpoint.from_server(srv)
    before_text = srv.metrics_text()
    before = parse_metrics(before_text)
    if poll:
        with MetricsPoller(srv) as poller:
            res = loadgen.run(ep, **run_kwargs)
        peak = dict(poller.peak)
    else:
        res = loadgen.run(ep, **run_kwargs)
        peak = {}
    after_text = srv.metrics_text()
    after = parse_metrics(after_text)
    counters = {name: delta(after, before, name) for name in WATCHED if name.endswith("_total")}
    pos_before, pos_after = parse_per_position(before_text), parse_per_position(after_text)
    per_pos = [pos_after[i] - pos_before.get(i, 0.0) for i in sorted(pos_after)]   # [] without spec decoding
    return {"summary": res.summary(slo), "records": res.records, "counters": counters, "peak": peak,
            "accepted_per_pos": per_pos,
            "wall_s": res.duration_s, "client_cpu_ms_per_request": 1000 * res.client_cpu_s_per_request}


# ---------------------------------------------------------------- decision-engine glue
def decision_inputs(summary: dict, *, counters: dict | None = None, peak: dict | None = None,
                    memory_symptom: bool | None = None) -> dict:
    """The decision engine's ``metrics`` dict from one of our summaries (latencies in ms).

    ``memory_symptom``: vLLM does not crash when its KV space runs out - it queues and preempts
    requests. By default the memory symptom (``oom``) is reported when the run saw preemptions.

    The summary's ``completed`` (requests behind its percentiles) travels as ``requests``: the sample size the
    diagnosis needs for an order-statistic verdict on a tail percentile (inferopt.diagnosis.sample)."""
    m = {k: summary[k] for k in ("ttft_p95_ms", "tpot_p95_ms", "ttft_p99_ms", "tpot_p99_ms", "throughput_tok_s")
         if k in summary and summary[k] is not None and not (isinstance(summary[k], float) and math.isnan(summary[k]))}
    if summary.get("completed") is not None:
        m["requests"] = int(summary["completed"])
    counters, peak = counters or {}, peak or {}
    if "vllm:num_preemptions_total" in counters:
        m["preemptions"] = int(counters["vllm:num_preemptions_total"])
    if "vllm:num_requests_waiting" in peak:
        m["queue_len"] = int(peak["vllm:num_requests_waiting"])
    if "vllm:kv_cache_usage_perc" in peak:
        m["memory_used_frac"] = min(1.0, float(peak["vllm:kv_cache_usage_perc"]))
    if memory_symptom is None:
        memory_symptom = m.get("preemptions", 0) > 0
    m["oom"] = bool(memory_symptom)
    return m


def ratio(before: float, after: float) -> float:
    """after / before (a speed-up shows as < 1 for latencies, > 1 for throughput)."""
    if not before:
        raise CourseError("cannot form a ratio with a zero 'before' value")
    return after / before


# ---------------------------------------------------------------- branch A
def shared_prefix_requests(tokenizer, *, n: int = 5, prefix_tokens: int = 600, question_tokens: int = 30,
                           output_tokens: int = 8, seed: int = 0) -> list[RequestSpec]:
    """Customer-service chat: one long system prompt (same for all) + a short, different question."""
    return build_requests(Workload(input_tokens=prefix_tokens + question_tokens, output_tokens=output_tokens,
                                   num_requests=n, shared_prefix_tokens=prefix_tokens, seed=seed), tokenizer)


def shared_prefix_run(srv, tokenizer=None, *, n: int = 5, prefix_tokens: int = 600, seed: int = 0,
                      progress: bool = True, **kw) -> dict:
    """Requests one at a time; the first fills the cache (cold), the rest can reuse it (warm).

    Returns the _measure dict plus ``cold_ttft_ms`` (first request) and ``warm_ttft_ms``
    (median of the others) and the prefix-cache hit counters."""
    tokenizer = tokenizer or load_tokenizer()
    reqs = shared_prefix_requests(tokenizer, n=n, prefix_tokens=prefix_tokens, seed=seed, **kw)
    out = _measure(srv, {"requests": reqs, "concurrency": 1, "progress": progress, "desc": "shared prefix"})
    ttfts = [r.ttft_s * 1000 for r in out["records"] if r.ok]
    out["cold_ttft_ms"] = ttfts[0]
    out["warm_ttft_ms"] = sorted(ttfts[1:])[len(ttfts[1:]) // 2]
    out["summary"]["warm_ttft_p50_ms"] = out["warm_ttft_ms"]
    return out


# ---------------------------------------------------------------- branch B
def concurrency_sweep(srv, tokenizer=None, *, concurrencies=(1, 2, 4, 8), input_tokens: int = 100,
                      output_tokens: int = 32, min_rounds: int = 2, slo: SLO | None = None, writer=None,
                      progress: bool = True, seed: int = 0, min_requests: int = 1) -> list[dict]:
    """Closed-loop sweep on a running engine (fresh prompts per level); one summary per level.

    Each level sends max(``min_requests``, ``min_rounds`` x concurrency) requests: pass
    ``min_requests=20`` where a level's P95 is to be read (no percentile from fewer than 20)."""
    from inferopt.bench.sweep import sweep

    ep = loadgen.Endpoint.from_server(srv)
    if min_requests < 1:
        raise CourseError(f"min_requests={min_requests}: give 1 or more requests per level")
    wl = Workload(input_tokens=input_tokens, output_tokens=output_tokens, num_requests=int(min_requests), seed=seed)
    return sweep(ep, wl, concurrencies=list(concurrencies), tokenizer=tokenizer or load_tokenizer(), slo=slo,
                 min_rounds=min_rounds, writer=writer, progress=progress)


def doubling_levels(measure, *, max_level: int) -> list[dict]:
    """Measure level 1, 2, 4, 8, ... until a level misses its SLO or reaches ``max_level``; the rows, in order.

    ``measure(level)`` answers one row with a ``meets_slo`` field. The stopping rule of a load-test sweep: the last
    row is the first level that misses (and the one before it the largest that meets), or ``max_level`` met."""
    if not isinstance(max_level, int) or max_level < 1:
        raise CourseError(f"max_level={max_level!r}: give a whole number of 1 or more (the engine's slots, e.g. 16)")
    rows, level = [], 1
    while True:
        rows.append(measure(level))
        if not rows[-1]["meets_slo"] or level >= max_level:
            return rows
        level *= 2


def sweep_to_first_miss(srv, tokenizer, *, slo: SLO, max_concurrency: int, input_tokens: int = 100,
                        output_tokens: int = 16, min_requests: int = 20, min_rounds: int = 2, writer=None) -> list[dict]:
    """Closed-loop sweep at concurrency 1, 2, 4, ... (``doubling_levels``) until a level misses ``slo`` or the
    engine's ``max_concurrency`` slots are full; one ``concurrency_sweep`` row per level, each with ``per_step``:
    the mean number of requests each engine step decoded at that level, from vLLM's counters (``per_step``)."""
    def measure(c):
        before = scrape(srv)
        row, = concurrency_sweep(srv, tokenizer, concurrencies=[c], input_tokens=input_tokens,
                                 output_tokens=output_tokens, min_rounds=min_rounds, min_requests=min_requests,
                                 slo=slo, writer=writer, seed=c)
        return {**row, "per_step": per_step(scrape(srv), before)}
    return doubling_levels(measure, max_level=max_concurrency)


CODE_HEADER = "# Python: the same helper, written out for each module.\n\n"


def code_prompt(seed: int, copies: int = 4) -> str:
    """A repetitive code prompt: one small function written out ``copies`` times.

    At temperature 0 the model goes on repeating it, so vLLM's n-gram lookup finds the next tokens
    in the prompt: the friendly case for n-gram speculative decoding (code edits, boilerplate)."""
    rng = random.Random(f"code-{seed}")
    name = rng.choice(["scale", "accumulate", "weigh", "blend", "fold", "tally"]) + f"_{rng.randint(10, 99)}"
    k = rng.randint(2, 9)
    body = (f"def {name}(values):\n    total = 0\n    for v in values:\n        total += v * {k}\n"
            f"    return total\n\n\n")
    return CODE_HEADER + body * copies


def spec_requests(tokenizer, *, n: int, output_tokens: int = 64, seed: int = 0) -> list[RequestSpec]:
    out = []
    for i in range(n):
        p = code_prompt(seed * 1000 + i)
        out.append(RequestSpec(p, len(tokenizer(p).input_ids), output_tokens, "code"))
    return out


def spec_run(srv, tokenizer=None, *, concurrency: int = 1, n: int | None = None, output_tokens: int = 64,
             seed: int = 0, progress: bool = True) -> dict:
    """Code-like prompts at one concurrency; adds the draft acceptance rate when spec decoding is on."""
    tokenizer = tokenizer or load_tokenizer()
    n = n or (2 * concurrency if concurrency > 1 else 2)
    reqs = spec_requests(tokenizer, n=n, output_tokens=output_tokens, seed=seed * 100 + concurrency)
    out = _measure(srv, {"requests": reqs, "concurrency": concurrency, "progress": progress, "warmup": 1,
                         "desc": f"code prompts, concurrency={concurrency}"})
    c = out["counters"]
    drafts = c.get("vllm:spec_decode_num_draft_tokens_total", 0.0)
    out["acceptance_rate"] = (c.get("vllm:spec_decode_num_accepted_tokens_total", 0.0) / drafts) if drafts else None
    out["summary"]["concurrency"] = concurrency
    return out


# ---------------------------------------------------------------- branch C
NULL_BLOCKS = 1   # vLLM's KV manager reserves one block (the null block); it never holds tokens


def min_kv_gib(max_model_len: int = 2048, dtype: str = "float32") -> float:
    """The smallest KV budget (GiB) the CPU engine accepts for ``max_model_len``: enough blocks for
    one full-length request plus the null block."""
    from inferopt.planning.memory import cpu_engine_prediction

    probe = cpu_engine_prediction(kv_cache_gib=1.0, max_model_len=max_model_len, dtype=dtype)
    blocks = math.ceil(max_model_len / probe.block_size) + NULL_BLOCKS
    return blocks * probe.bytes_per_block / (1 << 30)


def kv_fix_gib(*, concurrency: int, input_tokens: int, output_tokens: int, max_model_len: int,
               headroom: float = 1.25, dtype: str = "float32") -> dict:
    """The memory calculator's KV budget (GiB, 2^30 B) for ``concurrency`` requests of this length.

    blocks needed = concurrency × ceil((input + output) / block size), and never fewer than one
    max_model_len request (vLLM refuses to start otherwise); times ``headroom``, plus the one
    block vLLM keeps as its "null block" (measured: a budget of exactly 16 blocks of 128 tokens
    is refused for max_model_len 2048 - "estimated maximum model length is 1920");
    budget = blocks × bytes per block. Returns the working."""
    from inferopt.planning.memory import cpu_engine_prediction

    probe = cpu_engine_prediction(kv_cache_gib=1.0, max_model_len=max_model_len, dtype=dtype)
    block = probe.block_size
    per_req = math.ceil((input_tokens + output_tokens) / block)
    need_blocks = max(concurrency * per_req, math.ceil(max_model_len / block))
    blocks = math.ceil(need_blocks * headroom) + NULL_BLOCKS
    gib = blocks * probe.bytes_per_block / (1 << 30)
    check = cpu_engine_prediction(kv_cache_gib=gib, max_model_len=max_model_len, dtype=dtype)
    return {"block_size": block, "bytes_per_block": probe.bytes_per_block, "blocks_per_request": per_req,
            "blocks_needed": need_blocks, "blocks_with_headroom": blocks, "kv_cache_gib": gib,
            "predicted_kv_tokens": check.kv_cache_tokens, "predicted_blocks": check.num_blocks}


def kv_pressure_run(srv, tokenizer=None, *, concurrency: int = 12, input_tokens: int = 100,
                    output_tokens: int = 60, seed: int = 0, slo: SLO | None = None, progress: bool = True) -> dict:
    """``concurrency`` requests at once, each growing past a block boundary while it decodes."""
    tokenizer = tokenizer or load_tokenizer()
    reqs = build_requests(Workload(input_tokens=input_tokens, output_tokens=output_tokens,
                                   num_requests=concurrency, seed=seed), tokenizer)
    out = _measure(srv, {"requests": reqs, "concurrency": concurrency, "progress": progress,
                         "desc": f"KV pressure, concurrency={concurrency}"}, slo=slo, poll=True)
    out["summary"]["concurrency"] = concurrency
    return out


# ---------------------------------------------------------------- branch D
def prefill_interference_run(srv, tokenizer=None, *, streams: int = 4, stream_input_tokens: int = 100,
                             stream_output_tokens: int = 64, long_prompt_tokens: int = 1500,
                             arrive_after_tokens: int = 16, seed: int = 0, progress: bool = True) -> dict:
    """``streams`` decode streams start at t=0; one fresh long prompt is sent once every stream has streamed
    ``arrive_after_tokens`` tokens (:class:`loadgen.AfterTokens`), so it joins them mid-decode on any machine
    (a fixed send time, 2 s, found a fast engine's 64-token streams already finished).

    Every prompt is new random text, so no run profits from the prefix cache of the one before.
    Returns the _measure dict plus ``decode`` (summary of the streams only: ITL P99 is the stall
    they felt), ``long_ttft_ms`` (the long prompt's own TTFT), ``long_sent_s`` (when it was sent) and
    ``overlapped`` (every stream was still decoding when the long prompt's first token came)."""
    if not 1 <= arrive_after_tokens < stream_output_tokens:
        raise CourseError(f"arrive_after_tokens={arrive_after_tokens}: give 1 to {stream_output_tokens - 1}, so the "
                          f"long prompt arrives while the {stream_output_tokens}-token streams still decode")
    tokenizer = tokenizer or load_tokenizer()
    dec = build_requests(Workload(input_tokens=stream_input_tokens, output_tokens=stream_output_tokens,
                                  num_requests=streams, seed=seed * 10 + 1), tokenizer, tag="decode")
    long = build_requests(Workload(input_tokens=long_prompt_tokens, output_tokens=8, num_requests=1,
                                   seed=seed * 10 + 2), tokenizer, tag="long")
    schedule = [(0.0, r) for r in dec] + [(loadgen.AfterTokens("decode", arrive_after_tokens), long[0])]
    out = _measure(srv, {"schedule": schedule, "progress": progress, "desc": "decode streams + long prompt"})
    recs = out["records"]
    out["decode"] = summarize([r for r in recs if r.tag == "decode"])
    lr = next(r for r in recs if r.tag == "long" and r.ok)
    out["long_ttft_ms"] = lr.ttft_s * 1000
    out["long_sent_s"] = lr.start_s
    out["overlapped"] = all(r.start_s + r.e2e_s > lr.start_s + lr.ttft_s for r in recs if r.tag == "decode" and r.ok)
    return out


def describe(diagnosis) -> str:
    """A short, deterministic text of a decision-engine Diagnosis: branch, worst metric, the one change."""
    if diagnosis.branch is None:
        return "all SLOs met: " + diagnosis.next_step
    fails = ", ".join(f"{f['metric']} {f['value']:.0f} vs {f['slo']:.0f}"
                      if f.get("slo") is not None and f.get("value") is not None
                      else f"{f['metric']}" for f in diagnosis.failing)
    first = diagnosis.recommendations[0] if diagnosis.recommendations else None
    lines = [f"branch {diagnosis.branch}: {diagnosis.branch_title}",
             f"failing: {fails}",
             f"path: {' -> '.join(diagnosis.path)}"]
    if first:
        lines.append(f"one change: {first['name']}  flags {' '.join(first['flags_add']) or '-'}"
                     + (f"  (remove {' '.join(first['flags_remove'])})" if first["flags_remove"] else ""))
    for a in diagnosis.already_on:
        lines.append(f"already on: {a['id']}")
    return "\n".join(lines)
