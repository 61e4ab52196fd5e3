"""A live tuning loop: start vLLM badly configured, measure, diagnose, change ONE flag, measure again.

``python -m inferopt tune [--start prefix_off|kv_small|all] [--max-steps 4] [--json FILE]``

1. Calibrate: start the engine in a good configuration and measure idle TTFT/TPOT
   (:func:`inferopt.bench.lesson.calibrate`); the SLOs are the lesson SLOs of this machine
   (:func:`inferopt.bench.lesson.lesson_slo`), so "meets the SLO" means the same on any machine.
2. For each starting point: start the engine with a deliberately poor configuration, measure the
   starting point's workload with the project's load generator (:mod:`inferopt.bench.loadgen`),
   read vLLM's own signals from ``/metrics`` (preemptions, waiting queue, KV use, prefix-cache hits),
   and give it all to the decision engine (:func:`inferopt.diagnosis.decision.diagnose`) with the
   deployment (so its actions are sized by the memory calculator).
3. Apply exactly the one change the diagnosis names (the first recommendation, else the first sized
   action), restart the engine, measure the same workload again. If the failing metric got worse the
   change is reverted and the next candidate is tried. Stop when every SLO holds, when nothing is
   left to try, or after ``max_steps`` changes - and say which.

Several starting points run in lockstep (:func:`tune_all`): each round starts the engines that every
loop needs next together (on two cores, two starts take little more than one), then measures them one
at a time, each while the others of its round wait idle; each loop decides on its own measurements only.

Starting points (small workloads, a few seconds each on 2 cores):
- ``prefix_off``: a customer-service prompt (900 shared tokens + a 30-token question) with prefix
  caching turned off (``--no-enable-prefix-caching``): every request prefills the whole prompt.
- ``kv_small``: 3 concurrent requests of 100 + 48 tokens with the least KV budget vLLM accepts for
  max_model_len 256 (one request's blocks + the null block: 3 blocks of 128 tokens on the CPU engine,
  17 of 16 on a GPU): requests wait for KV blocks and get preempted.
Budgets are sized in blocks of the engine that will run (``inferopt.planning.platform_defaults``), so a
start means the same on a CPU and a GPU.
"""
from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass, field

from inferopt.errors import CourseError
from inferopt.slo import tail_samples_needed

MAX_STEPS = 4


@dataclass(frozen=True)
class Start:
    """A deliberately poor starting configuration and the workload that shows it."""
    name: str
    title: str
    max_model_len: int
    kv_cache_bytes: int
    extra_args: tuple
    workload: dict            # for the decision engine
    run: dict                 # for the load generator: n, concurrency, prompt, output, shared_prefix


def _cpu_block_bytes(dtype: str | None = None) -> int:
    from inferopt.planning.memory import block_bytes

    return block_bytes("cpu", dtype=dtype)


PREFIX_OFF_KV_TOKENS = 32768   # a KV cache large enough that only prefill matters


def starts(kind: str | None = None) -> dict:
    """The starting points, sized for the engine ``kind`` (default: the one this machine uses)."""
    from inferopt.planning import memory as M
    from inferopt.planning import platform_defaults as P
    from inferopt.serving.gpu import engine_kind

    kind = kind or engine_kind()
    blk = M.block_bytes(kind)
    small = P.least_kv_blocks(256, kind)
    return {
        "prefix_off": Start(
            "prefix_off", "prefix caching off, shared 900-token system prompt", 1024,
            P.blocks_for_tokens(PREFIX_OFF_KV_TOKENS, kind) * blk,
            ("--no-enable-prefix-caching",),
            {"prompt_tokens": 930, "output_tokens": 16, "shared_prefix_frac": 1.0, "concurrency": 2},
            {"n": 6, "concurrency": 2, "prompt": 930, "output": 16, "shared_prefix": 900}),
        "kv_small": Start(
            "kv_small", f"KV budget of {small} blocks for 3 concurrent requests",
            256, small * blk, (),
            {"prompt_tokens": 100, "output_tokens": 48, "shared_prefix_frac": 0.0, "concurrency": 3},
            {"n": 6, "concurrency": 3, "prompt": 100, "output": 48, "shared_prefix": 0}),
    }


# ---------------------------------------------------------------- configuration as argv
def _pairs(argv) -> list:
    """[(flag, value or None)] from vLLM argv tokens."""
    out, i, argv = [], 0, list(argv)
    while i < len(argv):
        if not argv[i].startswith("--"):
            raise CourseError(f"cannot read flag list {argv!r}")
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            out.append((argv[i], argv[i + 1]))
            i += 2
        else:
            out.append((argv[i], None))
            i += 1
    return out


_OPPOSITES = {"--enable-prefix-caching": "--no-enable-prefix-caching",
              "--no-enable-prefix-caching": "--enable-prefix-caching"}


def apply_change(args: tuple, kv_bytes: int, add, remove) -> tuple[tuple, int]:
    """The configuration after one change: flags in ``remove`` dropped, flags in ``add`` set
    (``--kv-cache-memory-bytes`` becomes the KV budget)."""
    pairs = [p for p in _pairs(args) if p[0] not in set(remove)]
    for flag, val in _pairs(add):
        if flag == "--kv-cache-memory-bytes":
            kv_bytes = int(val)
            continue
        pairs = [p for p in pairs if p[0] not in (flag, _OPPOSITES.get(flag))]
        pairs.append((flag, val))
    return tuple(t for f, v in pairs for t in ((f,) if v is None else (f, v))), kv_bytes


def techniques_on(args: tuple) -> list:
    from inferopt.diagnosis.decision import default_techniques_on

    on = set(default_techniques_on())
    flags = {f for f, _ in _pairs(args)}
    if "--no-enable-prefix-caching" in flags:
        on.discard("prefix_cache")
    if "--speculative-config" in flags:
        on.add("speculative_decoding")
    return sorted(on)


def _deployment(start: Start, args: tuple, kv_bytes: int) -> dict:
    from inferopt.planning.platform_defaults import CPU

    dep = {"model": "smollm2-135m-instruct", "gpu": "cpu", "weight_format": CPU.weight_format, "dtype": CPU.dtype,
           "max_model_len": start.max_model_len, "kv_cache_memory_bytes": kv_bytes}
    for f, v in _pairs(args):
        if f == "--max-num-batched-tokens":
            dep["max_num_batched_tokens"] = int(v)
        if f == "--max-num-seqs":
            dep["max_num_seqs"] = int(v)
    return dep


# ---------------------------------------------------------------- one measurement
def measure(srv, start: Start, tokenizer, slo) -> dict:
    """Run the starting point's workload once; latencies (ms) with their sample count, vLLM signals."""
    from inferopt.bench import experiments as X
    from inferopt.bench import loadgen
    from inferopt.bench.workload import Workload, build_requests

    r = start.run
    reqs = build_requests(Workload(input_tokens=r["prompt"], output_tokens=r["output"], num_requests=r["n"] + 1,
                                   shared_prefix_tokens=r["shared_prefix"], seed=7), tokenizer)
    if r["shared_prefix"]:
        # steady state of a service with a system prompt: one earlier request has seen it (with prefix
        # caching on, it is cached; with it off, this changes nothing). Not recorded.
        loadgen.run(loadgen.Endpoint.from_server(srv), reqs[:1], concurrency=1, progress=False, desc="prime")
    out = X._measure(srv, {"requests": reqs[1:], "concurrency": r["concurrency"], "warmup": 1, "progress": False,
                           "desc": start.name}, slo=slo, poll=True)
    s, c, p = out["summary"], out["counters"], out["peak"]
    tail = {"ttft_p95_ms": s["ttft_p95_ms"], "tpot_p95_ms": s["tpot_p95_ms"]}
    ok = [rec for rec in out["records"] if rec.ok]
    if len(ok) < tail_samples_needed(95):
        # too few requests for a P95 (bench.stats): the slowest request stands in for it, a conservative
        # estimate the decision engine reads under the P95 keys, printed as "max"
        tpots = [rec.tpot_s for rec in ok if rec.tpot_s is not None]
        tail = {"ttft_p95_ms": max(rec.ttft_s for rec in ok) * 1000 if ok else s["ttft_p95_ms"],
                "tpot_p95_ms": max(tpots) * 1000 if tpots else s["tpot_p95_ms"]}
    m = {**tail, "n": s["completed"],
         "preemptions": int(c.get("vllm:num_preemptions_total", 0)),
         "queue_len": int(p.get("vllm:num_requests_waiting", 0)),
         "kv_cache_usage": min(1.0, float(p.get("vllm:kv_cache_usage_perc", 0.0)))}
    q = c.get("vllm:prefix_cache_queries_total", 0)
    if q:
        m["prefix_cache_hit_rate"] = min(1.0, c.get("vllm:prefix_cache_hits_total", 0) / q)
    return m


def tail_name(n: int) -> str:
    """What the loop's tail figure is: a P95 from 45 requests on (the fewest whose slowest bounds it at 90 %),
    else the slowest request ("max")."""
    return "P95" if n >= tail_samples_needed(95) else "max"


def metric_name(key: str, n: int) -> str:
    """'ttft_p95_ms' as the loop measured it: 'TTFT P95', or 'TTFT max' from fewer than 45 requests."""
    return f"{key.split('_')[0].upper()} {tail_name(n)}"


def _score(m: dict, slo) -> float:
    """How far the worse of TTFT/TPOT is above its SLO (<= 1: both met)."""
    return max(m["ttft_p95_ms"] / slo.ttft_ms, m["tpot_p95_ms"] / slo.tpot_ms)


def _candidates(d) -> list:
    """The changes a diagnosis offers, in its order (``Diagnosis.changes``: techniques and sized actions by rank)."""
    return [(c["id"], list(c["flags_add"]), list(c["flags_remove"])) for c in d.changes]


@dataclass
class Step:
    step: int
    change: str
    flags_add: list
    flags_remove: list
    metric: str
    before: float
    after: float
    score_before: float
    score_after: float
    kept: bool
    n_before: int
    n_after: int
    branch: str | None = None


@dataclass
class Trace:
    start: str
    title: str
    slo: dict
    baseline: dict
    steps: list = field(default_factory=list)
    final: dict | None = None
    final_args: list = field(default_factory=list)
    met: bool = False
    verdict: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


class _Loop:
    """One starting point's loop, advanced one measurement at a time (so that several loops can share
    each round of engine starts: :func:`tune_all`)."""

    def __init__(self, start: Start, slo, max_steps: int, log):
        self.start, self.slo, self.max_steps, self.log = start, slo, max_steps, log
        self.args, self.kv = tuple(start.extra_args), start.kv_cache_bytes
        self.cur: dict | None = None
        self.trace: Trace | None = None
        self.tried: set = set()
        self.pending = None            # the change being measured: (i, cid, add, remove, new_args, new_kv, metric, d)
        self.done = False

    def begin(self, m: dict) -> None:
        """The starting configuration measured."""
        self.cur = m
        self.trace = Trace(self.start.name, self.start.title, {"ttft_p95_ms": self.slo.ttft_ms,
                                                                "tpot_p95_ms": self.slo.tpot_ms}, dict(m))
        q = tail_name(m["n"])
        self.log(f"[{self.start.name}] start {' '.join(self.args) or '(defaults)'}, KV {self.kv:,} B: TTFT {q} "
                 f"{m['ttft_p95_ms']:.0f} ms, TPOT {q} {m['tpot_p95_ms']:.0f} ms (n={m['n']}), "
                 f"preemptions {m['preemptions']}")

    def propose(self) -> tuple | None:
        """The next configuration to measure (args, kv bytes), or None when this loop is over."""
        from inferopt.diagnosis.decision import diagnose

        i = len(self.trace.steps) + 1
        if self.done or i > self.max_steps or _score(self.cur, self.slo) <= 1:
            self.done = True
            return None
        cur, args, kv = self.cur, self.args, self.kv
        metrics = {k: cur[k] for k in ("ttft_p95_ms", "tpot_p95_ms", "preemptions", "queue_len", "kv_cache_usage",
                                       "prefix_cache_hit_rate") if k in cur}
        slos = {"ttft_p95_ms": self.slo.ttft_ms, "tpot_p95_ms": self.slo.tpot_ms}
        d = diagnose(metrics, slos, self.start.workload, techniques_on(args), _deployment(self.start, args, kv))
        cands = [c for c in _candidates(d) if (c[0], tuple(c[1]), tuple(c[2])) not in self.tried]
        if not cands:
            self.trace.verdict = (f"stopped: the SLOs fail (branch {d.branch}) and the decision engine has no change "
                                  f"left to try ({d.next_step})")
            self.done = True
            return None
        cid, add, remove = cands[0]
        self.tried.add((cid, tuple(add), tuple(remove)))
        new_args, new_kv = apply_change(args, kv, add, remove)
        metric = d.worst_metric if d.worst_metric in ("ttft_p95_ms", "tpot_p95_ms") else "ttft_p95_ms"
        self.pending = (i, cid, add, remove, new_args, new_kv, metric, d.branch)
        return new_args, new_kv

    def record(self, after: dict) -> None:
        """The proposed change measured: kept if the worse of TTFT/TPOT over its SLO improved, else reverted."""
        i, cid, add, remove, new_args, new_kv, metric, branch = self.pending
        cur, slo = self.cur, self.slo
        kept = _score(after, slo) < _score(cur, slo)
        change = " ".join(add) + (f" (remove {' '.join(remove)})" if remove else "")
        self.trace.steps.append(Step(i, f"{cid}: {change}", add, remove, metric, cur[metric], after[metric],
                                     round(_score(cur, slo), 3), round(_score(after, slo), 3), kept, cur["n"],
                                     after["n"], branch))
        self.log(f"[{self.start.name}] step {i}: {cid} {change}: {metric_name(metric, after['n'])} {cur[metric]:.0f} "
                 f"-> {after[metric]:.0f} ms (n={after['n']}), {'kept' if kept else 'reverted (worse)'}")
        if kept:
            self.args, self.kv, self.cur = new_args, new_kv, after
        self.pending = None

    def finish(self) -> Trace:
        t = self.trace
        t.final, t.final_args = dict(self.cur), [*self.args, "--kv-cache-memory-bytes", str(self.kv)]
        t.met = _score(self.cur, self.slo) <= 1
        if t.met:
            t.verdict = f"SLOs met after {sum(s.kept for s in t.steps)} kept change(s), {len(t.steps)} tried"
        elif not t.verdict:
            t.verdict = f"stopped after {self.max_steps} steps without meeting the SLOs"
        self.log(f"[{self.start.name}] {t.verdict}")
        return t


def _measure_round(jobs: list, slo, tokenizer) -> list:
    """Measure each job (a loop and the configuration it asked for): all their engines start together
    (``start_together``: on two cores two starts take little more than one), then each is measured while the
    others wait idle (an idle vLLM engine blocks on its queues), and stopped before the next is measured."""
    from inferopt.planning.memory import GiB
    from inferopt.serving.engine import VLLMServer
    from inferopt.serving.managed_process import start_together

    servers = [VLLMServer(max_model_len=loop.start.max_model_len, kv_cache_gib=kv / GiB, extra_args=list(args),
                          quiet=True, engines=len(jobs)) for loop, (args, kv) in jobs]
    start_together(*servers)
    out = []
    try:
        for srv, (loop, _) in zip(servers, jobs, strict=True):
            with srv:
                out.append(measure(srv, loop.start, tokenizer, slo))
    finally:
        for srv in servers:
            srv.stop()
    return out


def tune_all(starts_: list, slo, tokenizer=None, *, max_steps: int = MAX_STEPS, log=print) -> list:
    """The loop for several starting points in lockstep: each round starts the engines every loop needs next
    together and measures them one after the other. Each loop's decisions are exactly :func:`tune`'s: a
    loop reads only its own measurements; the rounds only share the engines' start-up time."""
    from inferopt.bench.workload import load_tokenizer

    tokenizer = tokenizer or load_tokenizer()
    loops = [_Loop(s, slo, max_steps, log) for s in starts_]
    for loop, m in zip(loops, _measure_round([(lp, (lp.args, lp.kv)) for lp in loops], slo, tokenizer),
                       strict=True):
        loop.begin(m)
    while True:
        jobs = [(lp, cfg) for lp in loops if (cfg := lp.propose()) is not None]
        if not jobs:
            break
        for (loop, _), m in zip(jobs, _measure_round(jobs, slo, tokenizer), strict=True):
            loop.record(m)
    return [lp.finish() for lp in loops]


def tune(start: Start, slo, tokenizer=None, *, max_steps: int = MAX_STEPS, log=print) -> Trace:
    """The loop for one starting point (engines started and stopped here)."""
    return tune_all([start], slo, tokenizer, max_steps=max_steps, log=log)[0]


def predicted_step(start: Start, slo, predict_metrics) -> dict:
    """The loop's first step with a model in place of the engine, before any engine runs.

    ``predict_metrics(args, kv_bytes)`` answers what :func:`measure` would read (e.g.
    :func:`inferopt.performance.live.tuning_metrics`). The decision engine gets the predicted start, names
    its first change exactly as :func:`tune` would, and the model predicts the metrics after it: the
    prediction the live loop's first step is then compared with."""
    from inferopt.diagnosis.decision import diagnose

    slos = {"ttft_p95_ms": slo.ttft_ms, "tpot_p95_ms": slo.tpot_ms}
    args, kv = tuple(start.extra_args), start.kv_cache_bytes
    cur = predict_metrics(args, kv)
    out = {"start": start.name, "before": cur, "change": None, "branch": None, "metric": None, "after": None}
    if _score(cur, slo) <= 1:
        return out
    metrics = {k: cur[k] for k in ("ttft_p95_ms", "tpot_p95_ms", "preemptions", "queue_len", "kv_cache_usage",
                                   "prefix_cache_hit_rate") if k in cur}
    d = diagnose(metrics, slos, start.workload, techniques_on(args), _deployment(start, args, kv))
    cands = _candidates(d)
    out["branch"] = d.branch
    if not cands:
        return out
    cid, add, remove = cands[0]
    new_args, new_kv = apply_change(args, kv, add, remove)
    out.update(change=f"{cid}: " + " ".join(add) + (f" (remove {' '.join(remove)})" if remove else ""),
               metric=d.worst_metric if d.worst_metric in ("ttft_p95_ms", "tpot_p95_ms") else "ttft_p95_ms",
               after=predict_metrics(new_args, new_kv))
    return out


def calibrate_slo(tokenizer=None, log=print):
    """The lesson SLO of this machine, measured on a good configuration (vLLM defaults, 1 GiB KV)."""
    from inferopt.bench.lesson import calibrate, lesson_slo
    from inferopt.serving.engine import VLLMServer

    with VLLMServer(max_model_len=1024, kv_cache_gib=1.0, quiet=True) as srv:
        cal = calibrate(srv, tokenizer)
    slo = lesson_slo(cal)
    log(f"calibration: {cal.describe()} -> SLO TTFT P95 <= {slo.ttft_ms:.0f} ms, TPOT P95 <= {slo.tpot_ms:.0f} ms")
    return cal, slo


def run_all(names=("prefix_off", "kv_small"), *, max_steps: int = MAX_STEPS, log=print) -> dict:
    from inferopt.bench.workload import load_tokenizer

    table = starts()
    unknown = [n for n in names if n not in table]
    if unknown:  # checked before any engine starts
        raise CourseError(f"unknown starting point(s) {unknown}; choose from {', '.join(table)}")
    tok = load_tokenizer()
    cal, slo = calibrate_slo(tok, log)
    traces = tune_all([table[n] for n in names], slo, tok, max_steps=max_steps, log=log)
    return {"calibration": asdict(cal), "slo": {"ttft_p95_ms": slo.ttft_ms, "tpot_p95_ms": slo.tpot_ms},
            "traces": [t.to_dict() for t in traces]}


def plot(result: dict):
    """One panel per starting point: the worse of TTFT/TPOT over its SLO, step by step (1 = the SLO)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    traces = result["traces"]
    fig = make_subplots(rows=1, cols=len(traces), subplot_titles=[t["title"] for t in traces])
    for j, t in enumerate(traces, start=1):
        xs, ys, text = [0], [t["steps"][0]["score_before"] if t["steps"] else None], ["start"]
        for s in t["steps"]:
            xs.append(s["step"])
            ys.append(s["score_after"])
            text.append(f"{s['change']} ({'kept' if s['kept'] else 'reverted'})")
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", text=text, name=t["start"]), row=1, col=j)
        fig.add_hline(y=1.0, line_dash="dash", row=1, col=j)
    fig.update_yaxes(title_text="worst latency / SLO", type="log")
    fig.update_xaxes(title_text="step", dtick=1)
    fig.update_layout(title="Tuning loop: one change per step, measured on the live engine", height=380)
    return fig


def format_trace(result: dict) -> str:
    lines = [f"SLO: TTFT P95 <= {result['slo']['ttft_p95_ms']:.0f} ms, TPOT P95 <= {result['slo']['tpot_p95_ms']:.0f} ms"]
    for t in result["traces"]:
        b = t["baseline"]
        q = tail_name(b["n"])
        lines.append(f"{t['start']} ({t['title']}): start TTFT {q} {b['ttft_p95_ms']:.0f} ms, TPOT {q} "
                     f"{b['tpot_p95_ms']:.0f} ms (n={b['n']})")
        for s in t["steps"]:
            lines.append(f"  step {s['step']} [{s['branch']}] {s['change']}: {metric_name(s['metric'], s['n_after'])} "
                         f"{s['before']:.0f} -> "
                         f"{s['after']:.0f} ms (n={s['n_after']}), {'kept' if s['kept'] else 'reverted'}")
        lines.append(f"  => {t['verdict']}")
    return "\n".join(lines)


# ---------------------------------------------------------------- CLI
def add_subcommand(subparsers) -> None:
    p = subparsers.add_parser("tune", help="live tuning loop on the CPU engine: diagnose, change one flag, re-measure",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("--start", default="all", help="prefix_off, kv_small or all (default)")
    p.add_argument("--max-steps", type=int, default=MAX_STEPS)
    p.add_argument("--json", dest="json_out", help="write the traces to this JSON file")
    p.set_defaults(func=_cli)


def _cli(args: argparse.Namespace) -> int:
    names = tuple(starts()) if args.start == "all" else tuple(s.strip() for s in args.start.split(","))
    if args.max_steps < 1:
        raise CourseError("--max-steps must be at least 1")
    if args.json_out:
        from pathlib import Path

        parent = Path(args.json_out).resolve().parent
        if not parent.is_dir():
            raise CourseError(f"--json {args.json_out}: folder {parent} does not exist")
    res = run_all(names, max_steps=args.max_steps)
    print(format_trace(res))
    if args.json_out:
        from pathlib import Path

        try:
            Path(args.json_out).write_text(json.dumps(res, indent=2), encoding="utf-8")
        except OSError as exc:
            raise CourseError(f"--json {args.json_out}: cannot write ({exc.strerror})") from None
    return 0 if all(t["met"] for t in res["traces"]) else 1
