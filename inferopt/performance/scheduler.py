"""Continuous batching like vLLM's V1 scheduler, simulated step by step (pure, deterministic).

Each step first serves the running requests: every decoding request gets one token, a request still
in its prefill gets the next chunk of its prompt (chunked prefill), all within the token budget
(``--max-num-batched-tokens``); then it admits waiting requests first-come first-served while fewer
than ``--max-num-seqs`` run, the budget has room (without chunked prefill a whole prompt must fit) and
the KV cache has free blocks. When a decoding request needs a block and none is free, the most recently
admitted request is preempted (vLLM's recompute: its blocks are freed and it waits again, its prompt
and the tokens it had produced to be prefilled anew), and no waiting request is admitted in that step (vLLM
V1's rule: vllm/v1/core/sched/scheduler.py, Scheduler.schedule). Prefix-cache hits: a share of each prompt is
already cached (one shared copy), so only the rest is prefilled.

The step takes ``Engine.step_time`` (the per-kernel roofline with the profile's factors), or the
front-end's time for that step's output when that is longer (:mod:`inferopt.performance.frontend`).
Closed loop: ``concurrency`` requests stay outstanding (a new one arrives when one finishes, like
``vllm bench serve --max-concurrency``): from one burst of C at time 0 (requests of equal length then stay
in its lockstep), or with ``warm_start`` from the spread steady state (C uncounted requests whose outputs
are staggered 1/C of a request apart, so one finishes every output_tokens / C steps; uncounted fillers keep
the load at C until the last counted request finishes, and every figure counts from the first counted
arrival). A closed loop's successor reaches the engine ``successor_gap_s`` after the step that finished its
predecessor (the last token out through the API server, the client's next request, its tokenization): by then
the engine runs its next step for the others, and vLLM's engine core takes new requests from its input queue only
between steps (vllm/v1/engine/core.py: EngineCoreProc.run_busy_loop, _process_input_queue then
_process_engine_step), so the request waits for that step in flight before its prefill; a request is admitted
only once it has arrived. Open loop: Poisson arrivals at ``request_rate`` from a fixed
seed, or at explicit ``arrivals`` (request i at ``arrivals[i]``, with ``lengths[i]``: a scripted scene such
as decode streams joined by a long prompt). Decoding requests are kept as aggregates (count, summed context, a heap of finish steps), so a
step costs O(1) plus the requests that change state in it.
"""
from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass, field

from inferopt.errors import CourseError
from inferopt.performance.frontend import frontend_time
from inferopt.performance.steptime import Engine

MAX_STEPS = 400_000
CTX_BUCKET = 32        # steps whose mean contexts differ by less than this share one roofline evaluation


@dataclass
class SchedulerConfig:
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_capacity_tokens: int            # the KV cache, in tokens (the calculator's "KV cache size")
    block_size: int = 16
    enable_chunked_prefill: bool = True
    prefix_hit_fraction: float = 0.0   # share of each prompt found in the prefix cache
    api_server_count: int = 1


@dataclass
class Workload:
    input_tokens: int
    output_tokens: int
    concurrency: int | None = None
    request_rate: float | None = None
    num_requests: int = 200
    seed: int = 0
    lengths: list | None = None        # per-request (prompt, output) tokens, cycled; overrides the two means
    arrivals: list | None = None       # explicit arrival times (s), one per request: open loop, no rate
    warm_start: bool = False           # closed loop: start from the spread steady state, not one burst (see simulate)
    successor_gap_s: float = 0.0       # closed loop: a finished request's successor reaches the engine this long
    # after the step that finished it (see simulate: it then waits for the step in flight)


@dataclass
class _Req:
    rid: int
    arrival: float
    prompt: int                        # tokens to prefill (cache hits excluded)
    cached: int
    output: int
    done_prefill: int = 0
    generated: int = 0
    first_step: int = -1               # step index whose end produced the first token
    first_time: float = -1.0
    version: int = 0
    recompute: int = 0                 # tokens produced before a preemption, prefilled again
    counted: bool = True               # False: a warm-start request, left out of every figure


@dataclass
class SimResult:
    ttft_s: list = field(default_factory=list)
    tpot_s: list = field(default_factory=list)
    e2e_s: list = field(default_factory=list)
    itl_weighted: list = field(default_factory=list)     # (step seconds, decoding requests in it)
    duration_s: float = 0.0
    output_tokens: int = 0
    completed: int = 0
    preemptions: int = 0
    steps: int = 0
    time_waiting: float = 0.0          # integral of the waiting queue over time
    time_running: float = 0.0
    time_kv: float = 0.0               # integral of KV usage (0..1)
    kv_max: float = 0.0
    kernel_time: dict = field(default_factory=dict)      # seconds per kernel name (and "frontend_wait")
    kernel_bound: dict = field(default_factory=dict)     # seconds per (kernel, bound)
    frontend_paced_s: float = 0.0
    max_running: int = 0
    arrival_span_s: float = 0.0
    finishes: list = field(default_factory=list)         # (arrival, finish, output tokens) per completed request
    records: list = field(default_factory=list)          # per completed request: rid, arrival, ttft/tpot/e2e s, output


def _check(cfg: SchedulerConfig, wl: Workload) -> None:
    for name in ("max_num_seqs", "max_num_batched_tokens", "kv_capacity_tokens", "block_size"):
        v = getattr(cfg, name)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise CourseError(f"{name}={v!r}: give a whole number >= 1")
    if not (0 <= cfg.prefix_hit_fraction < 1):
        raise CourseError(f"prefix_hit_fraction={cfg.prefix_hit_fraction!r}: a share in [0, 1)")
    for name in ("input_tokens", "output_tokens", "num_requests"):
        v = getattr(wl, name)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise CourseError(f"{name}={v!r}: give a whole number >= 1")
    if sum(x is not None for x in (wl.concurrency, wl.request_rate, wl.arrivals)) != 1:
        raise CourseError("give one of a concurrency (closed loop), a request rate or arrival times (open loop)")
    if wl.arrivals is not None:
        if len(wl.arrivals) != wl.num_requests or not all(
                isinstance(a, (int, float)) and math.isfinite(a) and a >= 0 for a in wl.arrivals):
            raise CourseError(f"arrivals: give {wl.num_requests} finite times >= 0 (seconds), one per request")
        if list(wl.arrivals) != sorted(wl.arrivals):
            raise CourseError("arrivals: give the times in order (request i arrives at arrivals[i], with lengths[i])")
    if not (isinstance(wl.successor_gap_s, (int, float)) and math.isfinite(wl.successor_gap_s)
            and wl.successor_gap_s >= 0):
        raise CourseError(f"successor_gap_s={wl.successor_gap_s!r}: give a finite number of seconds >= 0")
    if wl.concurrency is not None and (not isinstance(wl.concurrency, int) or wl.concurrency < 1):
        raise CourseError(f"concurrency={wl.concurrency!r}: give a whole number >= 1")
    if wl.request_rate is not None and not (isinstance(wl.request_rate, (int, float)) and
                                            math.isfinite(wl.request_rate) and wl.request_rate > 0):
        raise CourseError(f"request_rate={wl.request_rate!r}: give a finite number of requests per second > 0")
    for pair in wl.lengths or []:
        if len(pair) != 2 or not all(isinstance(x, int) and x >= 1 for x in pair):
            raise CourseError(f"lengths entry {pair!r}: give (prompt tokens, output tokens), whole numbers >= 1")
    if not cfg.enable_chunked_prefill and wl.input_tokens > cfg.max_num_batched_tokens:
        raise CourseError(f"a {wl.input_tokens}-token prompt does not fit the token budget "
                          f"{cfg.max_num_batched_tokens} without chunked prefill: vLLM refuses such a "
                          "configuration; raise --max-num-batched-tokens or enable chunked prefill")


def simulate(engine: Engine, cfg: SchedulerConfig, wl: Workload) -> SimResult:
    """Run the workload through the scheduler; every figure in the result is from simulated steps."""
    _check(cfg, wl)
    hit = int(wl.input_tokens * cfg.prefix_hit_fraction) // cfg.block_size * cfg.block_size
    shared_blocks = math.ceil(hit / cfg.block_size) if hit else 0
    cap_blocks = cfg.kv_capacity_tokens // cfg.block_size - shared_blocks
    if cap_blocks < math.ceil((wl.input_tokens - hit + wl.output_tokens) / cfg.block_size):
        raise CourseError(f"the KV cache ({cfg.kv_capacity_tokens} tokens) cannot hold one request of "
                          f"{wl.input_tokens}+{wl.output_tokens} tokens: vLLM would not start with this max_model_len")
    rng = random.Random(wl.seed)
    arrivals: list[float] = [float(a) for a in wl.arrivals] if wl.arrivals is not None else []
    open_loop = wl.concurrency is None
    if wl.request_rate is not None:
        t = 0.0
        for _ in range(wl.num_requests):
            t += rng.expovariate(wl.request_rate)
            arrivals.append(t)
    res = SimResult()
    step_cache: dict = {}
    next_id = 0
    waiting: list[_Req] = []           # FIFO; preempted requests go back to the front
    prefilling: list[_Req] = []        # admitted, prompt not done (chunked)
    order: list[_Req] = []             # admitted decoding requests, in admission order (preemption: last)
    decoding: dict[int, _Req] = {}
    finish_heap: list = []             # (finish step, rid, version)
    dec_ctx_sum = 0                    # summed context of the decoding requests
    used_tokens = 0                    # tokens held in private KV blocks (all admitted requests)
    now, step = 0.0, 0
    times = [0.0]                      # end time of each step (times[k] = end of step k-1)
    issued = 0
    t0 = None                          # arrival of the first counted request: the figures' time origin
    fillers = 0                        # uncounted requests (warm start), numbered -1, -2, ...
    window_tokens = 0                  # tokens every request produced from t0 on (warm start: the throughput)

    def spawn(at: float) -> None:
        nonlocal next_id, issued, t0
        if wl.lengths:
            i, o = wl.lengths[next_id % len(wl.lengths)]
            h = min(hit, (i - 1) // cfg.block_size * cfg.block_size)
            waiting.append(_Req(next_id, at, i - h, h, o))
        else:
            waiting.append(_Req(next_id, at, wl.input_tokens - hit, hit, wl.output_tokens))
        next_id += 1
        issued += 1
        t0 = at if t0 is None else t0

    warm = wl.concurrency is not None and wl.warm_start
    if warm:
        # the steady state of a closed loop: its C requests are spread over a request's life, so one finishes
        # (and its successor arrives) every output_tokens / C steps. Start there: C uncounted requests whose
        # outputs are staggered 1/C of a request apart; each counted request replaces one when it finishes.
        C = wl.concurrency
        for k in range(C):
            o = max(1, math.ceil((k + 1) * wl.output_tokens / C))
            waiting.append(_Req(-1 - k, 0.0, wl.input_tokens - hit, hit, o, counted=False))
        fillers = C
    elif wl.concurrency is not None:
        for _ in range(min(wl.concurrency, wl.num_requests)):
            spawn(0.0)
    else:
        ai = 0
    def replace(at: float) -> None:
        """Closed loop: a finished request's client sends the next one, which reaches the engine
        ``successor_gap_s`` later (warm start: uncounted fillers once the counted requests are all sent, so the
        load stays at C until the last counted one finishes)."""
        nonlocal fillers
        if wl.concurrency is None:
            return
        at += wl.successor_gap_s
        if issued < wl.num_requests:
            spawn(at)
        elif warm:
            fillers += 1
            waiting.append(_Req(-fillers, at, wl.input_tokens - hit, hit, wl.output_tokens, counted=False))

    blocks_of = lambda tokens, n: tokens / cfg.block_size + 0.5 * n      # noqa: E731  (mean half-empty last block)

    def preempt_last() -> bool:
        nonlocal dec_ctx_sum, used_tokens
        if not order:
            return False
        r = order.pop()
        ctx = r.cached + r.prompt + r.recompute + (step - r.first_step)
        decoding.pop(r.rid, None)
        dec_ctx_sum -= ctx
        used_tokens -= ctx - r.cached
        r.version += 1
        r.recompute += 1 + step - r.first_step      # every token produced so far is prefilled again
        r.done_prefill = 0
        r.first_step = -1
        waiting.insert(0, r)
        res.preemptions += 1
        return True

    while res.completed < wl.num_requests and step < MAX_STEPS:
        if open_loop:
            while ai < len(arrivals) and arrivals[ai] <= now:
                spawn(arrivals[ai])
                ai += 1
        n_admitted_dec = len(decoding) + len(prefilling)
        if not waiting and n_admitted_dec == 0:
            if open_loop and ai < len(arrivals):
                now = max(now, arrivals[ai])
                continue
            break
        budget = cfg.max_num_batched_tokens
        n_dec = len(decoding)
        # KV room for this step's decode tokens (one each); preempt the newest until it fits
        preempted_now = res.preemptions
        while n_dec and blocks_of(used_tokens + n_dec, n_admitted_dec) > cap_blocks and preempt_last():
            n_dec = len(decoding)
            n_admitted_dec = len(decoding) + len(prefilling)
        preempted_now = res.preemptions > preempted_now
        budget -= n_dec
        chunks: list[tuple[_Req, int]] = []
        for r in prefilling:
            if budget <= 0:
                break
            left = r.prompt + r.recompute - r.done_prefill
            n = min(left, budget)
            if blocks_of(used_tokens + n, n_admitted_dec) > cap_blocks:
                break
            chunks.append((r, n))
            used_tokens += n
            budget -= n
        admitted = 0
        # vLLM admits no waiting request in a step that preempted one (vllm/v1/core/sched/scheduler.py:
        # Scheduler.schedule, "Next, schedule the WAITING requests. if not preempted_reqs"): else the request just
        # preempted would be admitted again at once, and the cache thrash
        while (not preempted_now and waiting and budget > 0
               and len(decoding) + len(prefilling) + admitted < cfg.max_num_seqs):
            r = waiting[0]
            if r.arrival > now:        # not at the engine yet (a closed loop's successor): a later step's
                break
            left = r.prompt + r.recompute
            n = min(left, budget) if cfg.enable_chunked_prefill else (left if left <= budget else 0)
            if n == 0 or blocks_of(used_tokens + n, n_admitted_dec + admitted + 1) > cap_blocks:
                break
            waiting.pop(0)
            chunks.append((r, n))
            used_tokens += n
            budget -= n
            admitted += 1
        if n_dec == 0 and not chunks:
            if open_loop and ai < len(arrivals):   # nothing fits now; wait for work
                now = max(now, arrivals[ai])
                continue
            if waiting and waiting[0].arrival > now:    # the engine idles until the next request reaches it
                now = waiting[0].arrival
                continue
            raise CourseError("the scheduler cannot place any request (KV cache too small for one prompt)")
        p_tokens = sum(n for _, n in chunks)
        p_ctx = (sum(r.cached + r.done_prefill for r, _ in chunks) / len(chunks)) if chunks else 0.0
        finishing_prefill = [r for r, n in chunks if r.done_prefill + n >= r.prompt + r.recompute]
        ctx_mean = dec_ctx_sum / n_dec if n_dec else 0.0
        key = (n_dec, int(ctx_mean) // CTX_BUCKET, p_tokens, int(p_ctx) // CTX_BUCKET, len(chunks))
        sr = step_cache.get(key)
        if sr is None:
            sr = step_cache[key] = engine.step(n_dec, ctx_mean, p_tokens, p_ctx, len(chunks))
        t_engine = sr.time_s * engine.pp
        t_front = frontend_time(engine.profile, n_dec + len(finishing_prefill), admitted, cfg.api_server_count)
        dt = max(t_engine, t_front)
        running = len(decoding) + len(prefilling) + admitted
        if t0 is not None:             # warm start: the figures count from the first counted arrival on
            for k in sr.kernels:
                res.kernel_time[k.name] = res.kernel_time.get(k.name, 0.0) + k.time_s * engine.pp
                key = (k.name, k.bound)
                res.kernel_bound[key] = res.kernel_bound.get(key, 0.0) + k.time_s * engine.pp
            if t_front > t_engine:
                res.frontend_paced_s += dt
                res.kernel_time["frontend_wait"] = res.kernel_time.get("frontend_wait", 0.0) + t_front - t_engine
            res.time_waiting += len(waiting) * dt
            res.time_running += running * dt
            kv = min(1.0, (blocks_of(used_tokens + n_dec, running) + shared_blocks) /
                     (cap_blocks + shared_blocks)) if running else 0.0
            res.time_kv += kv * dt
            res.kv_max = max(res.kv_max, kv)
            res.max_running = max(res.max_running, running)
            if n_dec:
                res.itl_weighted.append((dt, n_dec))
            window_tokens += n_dec + len(finishing_prefill)
        now += dt
        step += 1
        times.append(now)
        used_tokens += n_dec
        dec_ctx_sum += n_dec
        # prefill progress
        for r, n in chunks:
            if r not in prefilling:
                prefilling.append(r)
            r.done_prefill += n
        for r in finishing_prefill:
            prefilling.remove(r)
            if r.first_time < 0:
                r.first_time = now
            r.first_step = step
            produced = r.recompute + 1
            if produced >= r.output:
                _finish(r, now, res, wl, times)
                used_tokens -= r.prompt + r.recompute
                replace(now)
                continue
            ctx = r.cached + r.prompt + r.recompute
            decoding[r.rid] = r
            order.append(r)
            dec_ctx_sum += ctx
            heapq.heappush(finish_heap, (step + r.output - produced, r.rid, r.version))
        while finish_heap and finish_heap[0][0] <= step:
            fs, rid, ver = heapq.heappop(finish_heap)
            r = decoding.get(rid)
            if r is None or r.version != ver:
                continue
            del decoding[rid]
            order.remove(r)
            ctx = r.cached + r.prompt + r.recompute + (step - r.first_step)
            dec_ctx_sum -= ctx
            used_tokens -= ctx - r.cached
            _finish(r, now, res, wl, times)
            replace(now)
    res.steps = step
    first = 0.0 if not open_loop else (arrivals[0] if arrivals else 0.0)
    res.duration_s = now - (t0 if warm else first)
    if warm:      # the rate of the steady state: every request's tokens in the window, not only the counted ones'
        res.output_tokens = window_tokens
        res.completed = round(window_tokens / wl.output_tokens)
    res.arrival_span_s = (arrivals[-1] - arrivals[0]) if open_loop and len(arrivals) > 1 else 0.0
    return res


def _finish(r: _Req, now: float, res: SimResult, wl: Workload, times: list) -> None:
    if not r.counted:
        return
    res.finishes.append((r.arrival, now, r.output))
    res.records.append({"rid": r.rid, "arrival_s": r.arrival, "ttft_s": r.first_time - r.arrival,
                        "tpot_s": (now - r.first_time) / (r.output - 1) if r.output > 1 else None,
                        "e2e_s": now - r.arrival, "output_tokens": r.output})
    res.completed += 1
    res.output_tokens += r.output
    res.ttft_s.append(r.first_time - r.arrival)
    res.e2e_s.append(now - r.arrival)
    if r.output > 1:
        res.tpot_s.append((now - r.first_time) / (r.output - 1))
