"""Predict a vLLM deployment's latency and throughput for a workload, and name the limit that binds.

    from inferopt.performance.predict import predict
    p = predict("llama-3-70b", "H100", tp=8, weights="fp8", kv_dtype="fp8",
                input_tokens=800, output_tokens=150, request_rate=50)
    p.ttft_ms, p.tpot_ms, p.throughput_tok_s, p.binding_limit, p.error_band

The instance's KV capacity and vLLM's batch defaults come from :mod:`inferopt.planning.memory` and
:mod:`inferopt.planning.hardware`; each step's time from the per-kernel roofline
(:mod:`inferopt.performance.steptime`); the queue from :mod:`inferopt.performance.scheduler`. With
``num_gpus`` > tp x pp the load is split evenly over ``num_gpus / (tp x pp)`` replicas.

``binding_limit`` is one of: ``max_num_seqs`` (requests wait while the running set is at the cap and the
KV cache has room), ``kv_cache`` (preemptions, or waiting with the KV cache full), ``frontend`` (the API
server paces the steps), or, when nothing queues, what the steps' time goes to: ``weights_bandwidth``
(reading the weights), ``kv_bandwidth`` (reading the KV cache: attention), ``compute`` (compute-bound
linear layers), ``interconnect`` (TP all-reduce), ``step_overhead`` (fixed per-step cost, e.g.
``--enforce-eager``). ``saturated`` says the engine cannot keep up with the offered rate.

CLI: ``python -m inferopt predict --model M --gpu G --input-tokens I --output-tokens O
(--concurrency C | --request-rate R) [--tp N --pp N --num-gpus N --weights W --kv-dtype D ...] [--json]``.
"""
from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict, dataclass, field, replace

from inferopt.errors import CourseError
from inferopt.performance import profiles as P
from inferopt.performance.scheduler import SchedulerConfig, SimResult, Workload, simulate
from inferopt.performance.steptime import Engine
from inferopt.planning import gpu_catalog, hardware, memory
from inferopt.planning import roofline as R
from inferopt.planning.model_specs import load_spec

LIMITS = ("max_num_seqs", "kv_cache", "frontend", "weights_bandwidth", "kv_bandwidth", "compute",
          "interconnect", "step_overhead")


@dataclass
class Prediction:
    ttft_ms: float
    ttft_p95_ms: float
    tpot_ms: float
    tpot_p50_ms: float
    tpot_p95_ms: float
    itl_ms: float
    e2e_ms: float
    throughput_tok_s: float            # output tokens per second, all replicas
    request_throughput_rps: float
    queue_len: float                   # mean requests waiting, per replica
    running: float                     # mean requests running, per replica
    kv_usage: float                    # mean share of the KV cache in use
    kv_usage_max: float
    preemptions: int
    binding_limit: str
    why: str
    saturated: bool
    replicas: int
    kv_capacity_tokens: int
    max_num_seqs: int
    max_num_batched_tokens: int
    step_shares: dict = field(default_factory=dict)
    error_band: dict = field(default_factory=dict)
    littles_law_in_flight: float | None = None
    ttft_max_ms: float = float("nan")
    tpot_max_ms: float = float("nan")
    itl_p50_ms: float = float("nan")   # gaps between tokens, over every decoding request's tokens
    itl_p99_ms: float = float("nan")
    requests: list = field(default_factory=list)   # with explicit arrivals, per request in order: ttft/tpot/e2e ms

    def as_dict(self) -> dict:
        return asdict(self)


def _pct(xs: list, q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    k = (len(s) - 1) * q
    lo = math.floor(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def _wpct(weighted: list, q: float) -> float:
    """The q-quantile of values given as (value, count) pairs (each step's time, once per decoding request)."""
    total = sum(k for _, k in weighted)
    if not total:
        return float("nan")
    seen, target = 0, q * total
    for v, k in sorted(weighted):
        seen += k
        if seen >= target:
            return v
    return max(v for v, _ in weighted)


def _mean(xs: list) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def _num(name: str, v, *, whole=False, lo=None, lo_open=False, hi=None):
    if v is None:
        return None
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if ok and whole:
        ok = float(v).is_integer()
    if ok and lo is not None:
        ok = v > lo if lo_open else v >= lo
    if ok and hi is not None:
        ok = v <= hi
    if not ok:
        rng = f"{'>' if lo_open else '>='} {lo}" if lo is not None else ""
        raise CourseError(f"{name}={v!r}: give a finite {'whole ' if whole else ''}number {rng}".rstrip())
    return int(v) if whole else float(v)


def _limit(res: SimResult, sched: SchedulerConfig, saturated: bool) -> tuple[str, str]:
    T = res.duration_s or 1.0
    waiting, running = res.time_waiting / T, res.time_running / T
    if res.frontend_paced_s > 0.5 * T:
        return "frontend", (f"the API server paced {res.frontend_paced_s / T:.0%} of the time: tokenizing and "
                            "streaming take longer than the engine's steps (add --api-server-count)")
    if res.preemptions or (waiting > 0.5 and res.kv_max > 0.9):
        return "kv_cache", (f"the KV cache ran full ({res.kv_max:.0%} at most, {res.preemptions} preemptions): "
                            "requests wait for blocks, not for a slot")
    if waiting > 0.5 and res.max_running >= sched.max_num_seqs and running >= 0.9 * sched.max_num_seqs:
        return "max_num_seqs", (f"{waiting:.1f} requests waited on average while {running:.0f} ran at the cap "
                                f"--max-num-seqs {sched.max_num_seqs} and the KV cache was {res.time_kv / T:.0%} used")
    groups: dict[str, float] = {}
    for (name, bound), t in res.kernel_bound.items():
        if name in ("linear", "lm_head"):
            g = "compute" if bound == "compute" else "weights_bandwidth"
        elif name == "attention":
            g = "compute" if bound == "compute" else "kv_bandwidth"
        elif name == "allreduce":
            g = "interconnect"
        else:
            g = "step_overhead"
        groups[g] = groups.get(g, 0.0) + t
    top = max(groups, key=groups.get)
    share = groups[top] / sum(groups.values())
    what = {"weights_bandwidth": "reading the weights from memory", "kv_bandwidth": "reading the KV cache (attention)",
            "compute": "compute-bound matrix multiplies", "interconnect": "TP all-reduce over the interconnect",
            "step_overhead": "the fixed cost of each step (launches, scheduling, sampling)"}[top]
    pre = "saturated: the engine cannot keep up with the offered load; " if saturated else ""
    return top, f"{pre}{share:.0%} of the step time is {what}"


PROMPTS_PER_CONCURRENCY = 10     # a closed-loop run's prompts per request in flight when none are given:
# vllm bench serve sweeps commonly send --num-prompts 10 x --max-concurrency; the measured runs at load
# (assets/performance/measured_runs_h200.csv) fit 10 (inferopt.performance.measured fits it on its fit rows)


def _closed_run(engine: Engine, cfg: SchedulerConfig, wl: Workload, successor_wait: bool = True) -> SimResult:
    """A closed-loop run of ``wl.num_requests`` prompts at ``wl.concurrency``: the first C sent at once, the rest
    in the spread steady state. Rates, queue, KV and step shares are the steady state's; TTFT / TPOT / E2E lists
    hold the burst's C requests and N - C drawn in turn from the steady state's."""
    C, N = wl.concurrency, wl.num_requests
    # the steady state's successors reach the engine one pass through the API server after their predecessor's
    # last step (the profile's per-request front-end time), during the next step: they wait for it (simulate)
    gap = engine.profile.frontend_per_request_ms * 1e-3 if successor_wait else 0.0
    steady = simulate(engine, cfg, replace(wl, num_requests=max(3 * C, 40), warm_start=True, successor_gap_s=gap))
    burst = simulate(engine, cfg, replace(wl, num_requests=C))

    def mix(first: list, rest: list) -> list:
        return list(first) + [rest[i % len(rest)] for i in range(N - C)] if rest else list(first)

    steady.ttft_s = mix(burst.ttft_s, steady.ttft_s)
    steady.tpot_s = mix(burst.tpot_s, steady.tpot_s)
    steady.e2e_s = mix(burst.e2e_s, steady.e2e_s)
    return steady


def predict(model, gpu: str, *, input_tokens: int, output_tokens: int, concurrency: int | None = None,
            request_rate: float | None = None, num_gpus: int | None = None, tp: int = 1, pp: int = 1,
            weights: str = "auto", kv_dtype: str = "auto", dtype: str = "bfloat16",
            max_num_seqs: int | None = None, max_num_batched_tokens: int | None = None,
            enable_chunked_prefill: bool = True, prefix_hit_fraction: float = 0.0, enforce_eager: bool = False,
            gpu_memory_utilization: float = memory.DEFAULT_GPU_MEMORY_UTILIZATION, max_model_len: int | None = None,
            kv_cache_memory_bytes: int | None = None, api_server_count: int = 1, num_requests: int | None = None,
            profile: P.Profile | None = None, roof: R.Roof | None = None, seed: int = 0,
            lengths: list | None = None, num_scheduler_steps: int = 1, arrivals: list | None = None,
            spread: bool | None = None, successor_wait: bool = True) -> Prediction:
    """The model's prediction for one operating point (see the module docstring).

    ``arrivals``: explicit arrival times in seconds (one per request, in order, with ``lengths``) instead of
    a concurrency or a rate: a scripted scene, e.g. decode streams that a long prompt joins.

    Closed loop (``concurrency`` C, ``num_requests`` N prompts, default ``PROMPTS_PER_CONCURRENCY`` x C): the
    means are over a run as ``vllm bench serve --max-concurrency C --num-prompts N`` sends it: its first C
    prompts at once (a burst whose prefills queue behind each other), then one prompt whenever one finishes,
    by then spread over a request's life (the steady state: :func:`~inferopt.performance.scheduler.simulate`
    with ``warm_start``). ``spread=False``: every request stays in lockstep with the first burst (the simulator
    alone, deterministic requests of equal length). ``spread=None``: the profile's ``closed_loop_spread``,
    measured per kind: on the H200 runs at load (10 prompts per request in flight) lockstep over-predicts TTFT
    1.5-3x (tests/test_performance_measured.py); the course's CPU runs (1-5 prompts per request in flight, a
    cycle or two) fit lockstep better (TTFT median error 17 % against 21 % spread). In the spread steady state a
    successor reaches the engine one pass through the API server after its predecessor's last step and waits
    for the step in flight (:mod:`~inferopt.performance.scheduler`); ``successor_wait=False``: the model before,
    which admitted it at that step's end (TTFT low by about a step: tests/test_performance_measured.py)."""
    spec = load_spec(model)
    on_cpu = str(gpu).lower() == "cpu"
    tp = _num("tp", tp, whole=True, lo=1)
    pp = _num("pp", pp, whole=True, lo=1)
    num_gpus = _num("num_gpus", num_gpus, whole=True, lo=1) or tp * pp
    if num_gpus % (tp * pp):
        raise CourseError(f"num_gpus={num_gpus} is not a multiple of tp x pp = {tp * pp}: each replica needs "
                          "tp x pp GPUs")
    replicas = num_gpus // (tp * pp)
    _num("input_tokens", input_tokens, whole=True, lo=1)
    _num("output_tokens", output_tokens, whole=True, lo=1)
    _num("concurrency", concurrency, whole=True, lo=1)
    _num("request_rate", request_rate, lo=0, lo_open=True)
    _num("prefix_hit_fraction", prefix_hit_fraction, lo=0, hi=0.99)
    _num("gpu_memory_utilization", gpu_memory_utilization, lo=0, lo_open=True, hi=1)
    _num("api_server_count", api_server_count, whole=True, lo=1)
    _num("max_num_seqs", max_num_seqs, whole=True, lo=1)
    _num("max_num_batched_tokens", max_num_batched_tokens, whole=True, lo=1)
    _num("max_model_len", max_model_len, whole=True, lo=1)
    _num("num_scheduler_steps", num_scheduler_steps, whole=True, lo=1)
    if sum(x is not None for x in (concurrency, request_rate, arrivals)) != 1:
        raise CourseError("give either --concurrency (closed loop) or --request-rate (open loop), not both")
    if arrivals is not None and (replicas != 1 or not lengths or len(lengths) != len(arrivals)):
        raise CourseError("arrivals: give one (prompt, output) pair in lengths per arrival, on one replica")
    prof = profile or P.profile("cpu" if on_cpu else "gpu")
    spread = prof.closed_loop_spread if spread is None else bool(spread)
    fmt = memory.resolve_weight_format(spec, weights)
    if on_cpu:
        fmt = "fp32" if weights == "auto" and dtype in ("float32", "fp32") else fmt
        if roof is None:
            if not prof.roof:
                raise CourseError("the cpu profile has no fitted roof; pass roof=custom_roof(...)")
            roof = R.custom_roof("cpu", prof.roof["peak_flops"], prof.roof["bandwidth"], "fp32")
        gid = None
    else:
        gid = gpu_catalog.resolve(gpu)
        roof = roof or R.device_roof(gid)
    kvb = memory.kv_dtype_bytes(kv_dtype, "float32" if fmt == "fp32" else dtype)
    d_budget, d_seqs = hardware.batch_defaults(None if on_cpu else gid, on_cpu=on_cpu)
    seqs = max_num_seqs or d_seqs
    budget = max_num_batched_tokens or d_budget
    if on_cpu and kv_cache_memory_bytes is None:
        raise CourseError("on the CPU give kv_cache_memory_bytes (--kv-cache-memory-bytes), as the course's engine does")
    mem = memory.calculate(spec, gid, tp=tp * pp, weight_format=fmt, kv_dtype=kv_dtype,
                           dtype="float32" if fmt == "fp32" else dtype,
                           gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len,
                           kv_cache_memory_bytes=kv_cache_memory_bytes, max_num_batched_tokens=budget,
                           max_num_seqs=seqs, enforce_eager=enforce_eager)
    engine = Engine(spec, roof, prof, tp=tp, pp=pp, weights=fmt, kv_dtype_bytes=kvb, enforce_eager=enforce_eager,
                    scheduler_steps=num_scheduler_steps)
    cfg = SchedulerConfig(seqs, budget, int(mem.kv_cache_tokens), mem.block_size, enable_chunked_prefill,
                          float(prefix_hit_fraction), int(api_server_count))
    per_conc = None if concurrency is None else max(1, math.ceil(concurrency / replicas))
    per_rate = None if request_rate is None else request_rate / replicas
    n = (len(arrivals) if arrivals is not None else num_requests
         or (PROMPTS_PER_CONCURRENCY * per_conc if per_conc and spread else
             max(4 * per_conc, 40) if per_conc else int(min(3000, max(100, per_rate * 30)))))
    wl = Workload(int(input_tokens), int(output_tokens), per_conc, per_rate, int(n), seed,
                  [tuple(x) for x in lengths] if lengths else None, list(arrivals) if arrivals is not None else None)
    if per_conc is not None and spread and not lengths and n > per_conc:
        res = _closed_run(engine, cfg, wl, successor_wait)
    else:
        res = simulate(engine, cfg, wl)
    T = res.duration_s or 1.0
    thr, req_thr, saturated = res.output_tokens / T, res.completed / T, False
    if per_rate is not None:
        # open loop: conservation gives the throughput unless the queue grows (then the engine's own rate,
        # read from the completions of the run's second half)
        fin = sorted(res.finishes, key=lambda x: x[0])
        k = max(1, len(fin) // 5)
        first, last = _mean([f - a for a, f, _ in fin[:k]]), _mean([f - a for a, f, _ in fin[-k:]])
        by_end = sorted(res.finishes, key=lambda x: x[1])
        half = by_end[len(by_end) // 2:]
        span = (half[-1][1] - half[0][1]) or 1.0
        engine_rps = (len(half) - 1) / span
        # the same requests' arrival span, not the nominal rate: Poisson noise in a window of ~75 arrivals is
        # ~12 %, enough to call a stable engine saturated; a saturated one finishes them slower than they came
        arr = [a for a, _, _ in half]
        offered_rps = (len(half) - 1) / ((max(arr) - min(arr)) or 1.0)
        saturated = engine_rps < 0.9 * offered_rps or last > 1.5 * first + 0.5
        if saturated:
            req_thr, thr = engine_rps, sum(o for _, _, o in half[1:]) / span
        else:
            req_thr = per_rate
            thr = per_rate * _mean([o for _, _, o in res.finishes])
    limit, why = _limit(res, cfg, saturated)
    fe = prof.frontend_per_request_ms * 1e-3
    itl_n = sum(k for _, k in res.itl_weighted)
    itl = sum(dt * k for dt, k in res.itl_weighted) / itl_n if itl_n else float("nan")
    # multi-step scheduling (vLLM 0.6's --num-scheduler-steps k): tokens reach the client k at a time, so the
    # first one waits for the k-1 steps after the prefill and the gaps between chunks are k steps
    multi = (num_scheduler_steps - 1) * (itl if itl_n else 0.0)
    ttft = [t + fe + multi for t in res.ttft_s]
    itl *= num_scheduler_steps
    total_k = sum(res.kernel_time.values()) or 1.0
    e2e = _mean(res.e2e_s) + fe
    band = {m: {"median_rel": e["median"], "worst_rel": e["worst"], "n_runs": e["n"]} for m, e in prof.error.items()}
    band["measured_on"] = prof.fitted_on + (
        "; the public GPU runs are bursts of at most 10 requests: small-batch decode is checked, large prefill-heavy "
        "batches (compute efficiency, all-reduce of many tokens) are not" if not on_cpu else "")
    return Prediction(
        ttft_ms=_mean(ttft) * 1e3, ttft_p95_ms=_pct(ttft, 0.95) * 1e3, tpot_ms=_mean(res.tpot_s) * 1e3,
        tpot_p50_ms=_pct(res.tpot_s, 0.5) * 1e3, tpot_p95_ms=_pct(res.tpot_s, 0.95) * 1e3, itl_ms=itl * 1e3, e2e_ms=e2e * 1e3,
        throughput_tok_s=thr * replicas, request_throughput_rps=req_thr * replicas,
        queue_len=res.time_waiting / T, running=res.time_running / T, kv_usage=res.time_kv / T,
        kv_usage_max=res.kv_max, preemptions=res.preemptions, binding_limit=limit, why=why, saturated=saturated,
        replicas=replicas, kv_capacity_tokens=int(mem.kv_cache_tokens), max_num_seqs=seqs,
        max_num_batched_tokens=budget,
        step_shares={k: round(v / total_k, 4) for k, v in sorted(res.kernel_time.items())},
        error_band=band,
        littles_law_in_flight=(request_rate * e2e) if request_rate is not None else None,
        ttft_max_ms=max(ttft) * 1e3 if ttft else float("nan"),
        tpot_max_ms=max(res.tpot_s) * 1e3 if res.tpot_s else float("nan"),
        itl_p50_ms=_wpct(res.itl_weighted, 0.5) * num_scheduler_steps * 1e3,
        itl_p99_ms=_wpct(res.itl_weighted, 0.99) * num_scheduler_steps * 1e3,
        requests=[{"ttft_ms": (r["ttft_s"] + fe + multi) * 1e3,
                   "tpot_ms": None if r["tpot_s"] is None else r["tpot_s"] * 1e3, "e2e_ms": (r["e2e_s"] + fe) * 1e3}
                  for r in sorted(res.records, key=lambda r: r["rid"])] if arrivals is not None else [])


# ---------------------------------------------------------------- CLI: python -m inferopt predict
def add_subcommand(subparsers) -> None:
    p = subparsers.add_parser("predict", help="TTFT, TPOT, throughput and the binding limit of a deployment",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="llama-3-70b", help="shipped model name or path to config.json")
    p.add_argument("--gpu", default="H100-SXM-80GB", help="GPU id or alias (H100) from assets/gpus.yaml, or 'cpu'")
    p.add_argument("--num-gpus", type=int, default=None, help="GPUs in all (default tp x pp); more = replicas")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel size")
    p.add_argument("--pp", type=int, default=1, help="pipeline-parallel size")
    p.add_argument("--weights", default="auto", choices=["auto", "bf16", "fp16", "fp8", "int8", "int4", "fp32"])
    p.add_argument("--kv-dtype", default="auto", choices=memory.KV_DTYPES)
    p.add_argument("--dtype", default="bfloat16", help="compute dtype (what kv-dtype auto means)")
    p.add_argument("--input-tokens", type=int, required=True)
    p.add_argument("--output-tokens", type=int, required=True)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--concurrency", type=int, default=None, help="requests in flight (closed loop)")
    g.add_argument("--request-rate", type=float, default=None, help="requests per second (Poisson arrivals)")
    p.add_argument("--max-num-seqs", type=int, default=None)
    p.add_argument("--max-num-batched-tokens", type=int, default=None, help="token budget (default: vLLM's)")
    p.add_argument("--no-enable-chunked-prefill", action="store_true")
    p.add_argument("--prefix-hit", type=float, default=0.0, help="share of each prompt found in the prefix cache")
    p.add_argument("--enforce-eager", action="store_true")
    p.add_argument("--gpu-memory-utilization", type=float, default=memory.DEFAULT_GPU_MEMORY_UTILIZATION)
    p.add_argument("--max-model-len", type=int, default=None)
    p.add_argument("--kv-cache-memory-bytes", type=int, default=None)
    p.add_argument("--api-server-count", type=int, default=1)
    p.add_argument("--num-requests", type=int, default=None,
                   help="closed loop: prompts in the run (GPU default 10 x concurrency); open loop: requests")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cli)


def _oracle(args: argparse.Namespace):
    """vLLM's verdict (inferopt.vllm_oracle.runtime) on the command the prediction is for, and its notes."""
    from inferopt.vllm_oracle.runtime import check_command, check_request, serve_argv

    argv, notes = serve_argv(args.model, args.weights, (
        ("--tensor-parallel-size", args.tp, 1), ("--pipeline-parallel-size", args.pp, 1),
        ("--kv-cache-dtype", args.kv_dtype, "auto"), ("--max-num-seqs", args.max_num_seqs, None),
        ("--max-num-batched-tokens", args.max_num_batched_tokens, None), ("--max-model-len", args.max_model_len, None),
        ("--kv-cache-memory-bytes", args.kv_cache_memory_bytes, None)))
    argv += ["--no-enable-chunked-prefill"] if args.no_enable_chunked_prefill else []
    argv += ["--enforce-eager"] if args.enforce_eager else []
    v = check_command(argv, gpu=args.gpu).require()      # vLLM's refusal first, in its one line
    if v.ok:
        check_request(args.input_tokens, args.output_tokens, v.resolved["max_model_len"],
                      "--max-model-len" if args.max_model_len else "the model's derived maximum")
    return v, notes


def _cli(args: argparse.Namespace) -> int:
    oracle, notes = _oracle(args)
    left = oracle.left_out
    seqs = args.max_num_seqs or left.get("--max-num-seqs", (None,))[0]      # vLLM's own, where the user left it out
    budget = args.max_num_batched_tokens or left.get("--max-num-batched-tokens", (None,))[0]
    pr = predict(args.model, args.gpu, input_tokens=args.input_tokens, output_tokens=args.output_tokens,
                 concurrency=args.concurrency, request_rate=args.request_rate, num_gpus=args.num_gpus, tp=args.tp,
                 pp=args.pp, weights=args.weights, kv_dtype=args.kv_dtype, dtype=args.dtype,
                 max_num_seqs=seqs, max_num_batched_tokens=budget,
                 enable_chunked_prefill=not args.no_enable_chunked_prefill, prefix_hit_fraction=args.prefix_hit,
                 enforce_eager=args.enforce_eager, gpu_memory_utilization=args.gpu_memory_utilization,
                 max_model_len=args.max_model_len, kv_cache_memory_bytes=args.kv_cache_memory_bytes,
                 api_server_count=args.api_server_count, num_requests=args.num_requests)
    if args.json:
        print(json.dumps({**pr.as_dict(), "vllm": {**oracle.as_dict(), "notes": notes}}, indent=2, sort_keys=True))
        return 0
    band = pr.error_band.get("tpot", {})
    print(f"TTFT mean {pr.ttft_ms:.0f} ms (P95 {pr.ttft_p95_ms:.0f}), TPOT mean {pr.tpot_ms:.1f} ms "
          f"(P95 {pr.tpot_p95_ms:.1f}), output {pr.throughput_tok_s:,.0f} tok/s over {pr.replicas} replica(s)")
    print(f"binding limit: {pr.binding_limit}: {pr.why}")
    print(f"queue {pr.queue_len:.1f} waiting, {pr.running:.1f} running (max-num-seqs {pr.max_num_seqs}), "
          f"KV {pr.kv_usage:.0%} used (max {pr.kv_usage_max:.0%}), {pr.preemptions} preemptions")
    if band.get("median_rel") is not None:
        print(f"error band (calibration, runs not fitted): TPOT median {band['median_rel']:.0%}, "
              f"worst {band['worst_rel']:.0%} over {band['n_runs']} runs")
    print(" ".join(oracle.argv))
    from inferopt.i18n import localize

    print("\n".join(oracle.lines() + [localize(n) for n in notes]))
    return 0
