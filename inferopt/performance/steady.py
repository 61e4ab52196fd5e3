"""The steady state of a closed loop in a few roofline evaluations: fast enough for ``diagnose``.

:func:`steady_state` answers what :func:`inferopt.performance.scheduler.simulate` would settle to
when ``concurrency`` requests of ``input_tokens`` / ``output_tokens`` stay in flight, without
simulating steps: the running batch is the concurrency capped by ``--max-num-seqs`` and by the KV
cache (each request holds up to prompt + output tokens); each request's prompt is spread over its
output steps (chunked prefill: B x prompt / output tokens of prefill per step; with fewer than one arrival
per step, a cycle of the steps one prompt takes and output_tokens / B - those of decode only); a step takes the
per-kernel roofline's time or the front-end's, whichever is longer; TTFT is the steps its own prompt
needs within the token budget, plus the step in flight when it reaches the engine (with others running, it
arrives one pass through the API server after its predecessor's last step, during the next one, and vLLM's
engine core takes new requests only between steps: see :mod:`inferopt.performance.scheduler`), plus the wait
for a slot (Little's law on the queue). The simulator
stays the reference (tests/test_performance_steady.py keeps the two within a stated tolerance).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

from inferopt.errors import CourseError
from inferopt.performance.frontend import frontend_time
from inferopt.performance.scheduler import SchedulerConfig
from inferopt.performance.steptime import Engine

WHAT = {"weights_bandwidth": "reading the weights from memory", "kv_bandwidth": "reading the KV cache (attention)",
        "compute": "compute-bound matrix multiplies", "interconnect": "TP all-reduce over the interconnect",
        "step_overhead": "the fixed cost of each step (launches, scheduling, sampling)"}


@dataclass
class Steady:
    ttft_ms: float
    tpot_ms: float
    throughput_tok_s: float
    running: float
    queue_len: float
    kv_usage: float
    binding_limit: str
    why: str
    step_shares: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def kernel_limit(kernels) -> tuple[str, float]:
    """(limit, share of the step) of the kernel group that takes the most time."""
    groups: dict[str, float] = {}
    for k in kernels:
        if k.name in ("linear", "lm_head"):
            g = "compute" if k.bound == "compute" else "weights_bandwidth"
        elif k.name == "attention":
            g = "compute" if k.bound == "compute" else "kv_bandwidth"
        elif k.name == "allreduce":
            g = "interconnect"
        else:
            g = "step_overhead"
        groups[g] = groups.get(g, 0.0) + k.time_s
    top = max(groups, key=groups.get)
    return top, groups[top] / (sum(groups.values()) or 1.0)


def steady_state(engine: Engine, cfg: SchedulerConfig, input_tokens: int, output_tokens: int,
                 concurrency: int) -> Steady:
    """The closed loop's steady state (see the module docstring); figures per replica."""
    for name, v in (("input_tokens", input_tokens), ("output_tokens", output_tokens), ("concurrency", concurrency)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise CourseError(f"{name}={v!r}: give a whole number >= 1")
    hit = int(input_tokens * cfg.prefix_hit_fraction)
    new = input_tokens - hit
    by_kv = max(1, cfg.kv_capacity_tokens // (input_tokens + output_tokens))
    B = min(concurrency, cfg.max_num_seqs, by_kv)
    ctx = input_tokens + output_tokens / 2
    room = max(1, cfg.max_num_batched_tokens - B)
    if B >= output_tokens:       # a request arrives every step or more: each step carries prompt tokens
        pre = min(room, math.ceil(B * new / output_tokens))
        reqs = max(1, round(B / output_tokens)) if pre else 0
        step = engine.step(B, ctx, pre, hit + new / 2, reqs)
        kernels, t_eng = step.kernels, step.time_s * engine.pp
    else:                        # one arrival every output_tokens / B steps: its prompt's steps, then decode only
        k = output_tokens / B
        n_pre = math.ceil(new / room)
        step = engine.step(B, ctx, min(new, room), hit + new / 2, 1)
        dec = engine.step(B, ctx)
        w_pre, w_dec = n_pre / max(k, n_pre), max(0.0, k - n_pre) / max(k, n_pre)
        kernels = [replace(x, time_s=x.time_s * w_pre) for x in step.kernels] + \
                  [replace(x, time_s=x.time_s * w_dec) for x in dec.kernels]
        t_eng = (step.time_s * w_pre + dec.time_s * w_dec) * engine.pp
    t_fe = frontend_time(engine.profile, B, B / output_tokens, cfg.api_server_count)
    tpot = max(t_eng, t_fe)
    chunks = math.ceil(new / room)
    own = engine.step(B - 1, ctx, min(new, room), hit, 1).time_s * engine.pp
    gap = engine.profile.frontend_per_request_ms * 1e-3
    in_flight = max(0.0, tpot - gap) if B > 1 else 0.0     # the others' step it arrives during
    ttft = chunks * max(own, t_fe) + gap + in_flight
    e2e = ttft + (output_tokens - 1) * tpot
    x = B / e2e
    queue = concurrency - B
    if queue > 0:
        ttft += queue / x
    kv = min(1.0, B * ctx / cfg.kv_capacity_tokens)
    total = sum(kt.time_s for kt in kernels)
    shares = {}
    for kt in kernels:
        shares[kt.name] = shares.get(kt.name, 0.0) + kt.time_s
    shares = {n: round(v / total, 4) for n, v in shares.items()} if total else {}
    if queue > 0 and B == by_kv and by_kv < min(concurrency, cfg.max_num_seqs):
        limit, why = "kv_cache", (f"the KV cache holds {by_kv} requests of {input_tokens}+{output_tokens} tokens: "
                                  f"{queue} wait for blocks")
    elif queue > 0:
        limit, why = "max_num_seqs", (f"{queue} requests wait while {B} run at the cap --max-num-seqs "
                                      f"{cfg.max_num_seqs}, with the KV cache {kv:.0%} used")
    elif t_fe > t_eng:
        limit, why = "frontend", (f"the API server needs {t_fe * 1e3:.1f} ms per step for the tokens, the engine "
                                  f"{t_eng * 1e3:.1f} ms: add --api-server-count")
    else:
        limit, share = kernel_limit(kernels)
        why = f"{share:.0%} of the step time is {WHAT[limit]}"
    return Steady(ttft * 1e3, tpot * 1e3, x * output_tokens, float(B), float(max(0, queue)), kv, limit, why, shares)
