"""The decision engine of §2-§4: from a measured baseline to the next optimization to try.

``diagnose(metrics, slos, workload=None, techniques_on=None) -> Diagnosis`` is a pure function
over the data in ``assets/`` (decision_tree.yaml, pitfalls.yaml, optimization_order.yaml,
techniques.yaml). It answers:

- which metric is worst against its SLO (``worst_metric``, the largest measured/SLO ratio) and
  which branch to take (``branch``: the first failing branch in the §4 order
  C (OOM) -> A (TTFT) -> B (TPOT/throughput) -> D (tail));
- the techniques to try (cheapest first), each with the sub-condition that matched and the vLLM
  flag change it implies (``recommendations[i].flags_add`` / ``flags_remove``); ``flags`` /
  ``flags_remove`` hold the change of the one next step (the first recommendation, or the first
  tuning action when the fitting technique is already on);
- conflicts (§3 pitfalls) among the techniques already on plus the recommended ones;
- the next step: apply one change, then measure again.

Input (plain dicts, so a benchmark summary can be passed as it is)
------------------------------------------------------------------
``metrics`` (the baseline; every latency in milliseconds):
    ttft_p95_ms, tpot_p95_ms      P95 time to first token / time per output token, ms
                                  (required unless ``oom`` is true)
    ttft_p99_ms, tpot_p99_ms      P99 of the same, ms (optional)
    throughput_tok_s              output tokens per second, all requests together (optional)
    gpu_util                      GPU busy fraction 0..1 (optional; not a percentage)
    oom                           bool: the server ran out of memory (default false)
    memory_used_frac              GPU/KV memory in use, fraction 0..1 (optional; checked and
                                  reported, not used by the tree: vLLM pre-allocates its pool)
    queue_len                     requests waiting (vllm:num_requests_waiting), >= 0 (optional)
    preemptions                   preempted requests in the run, >= 0 (optional)
``slos``:
    ttft_p95_ms, tpot_p95_ms      required, ms (e.g. {"ttft_p95_ms": 500, "tpot_p95_ms": 50})
    ttft_p99_ms, tpot_p99_ms      optional, ms; without them the tail counts as out of control
                                  when P99 > tail_ratio (decision_tree.yaml) x P95
    throughput_tok_s              optional minimum output tokens/s
``workload`` (all optional; a missing trait never matches a condition):
    prompt_tokens, output_tokens  mean tokens per request
    shared_prefix_frac            share of requests that start with a common prefix, 0..1
    concurrency                   requests in flight (the benchmark's concurrency)
    model_weights_gib             model weights in GiB (2^30 B)
    gpu_memory_gib                memory of one GPU in GiB (default: from gpu_type)
    gpu_type                      a GPU of assets/gpus.yaml by alias or id (H100, A100, L40S, T4, ...) or CPU
    num_gpus                      GPUs available to this deployment (default 1)
    lora_adapters                 number of LoRA adapters served (default 0)
    draft_model                   name of a draft model for speculative decoding, or null
``techniques_on``: technique ids already in force (see ``technique_ids()``); ``None`` means
    vLLM 0.32's defaults (those marked default_on in techniques.yaml); ``[]`` means none.

A benchmark summary with more keys than these: ``metrics_from_summary(summary)`` keeps the
known fields and drops the rest (and None values).

Bad input (unknown field or technique, negative or missing value, a percentage where a fraction
is due, an SLO that looks like seconds) raises CourseError naming the field.

CLI (:mod:`inferopt.diagnosis.cli`): ``python -m inferopt diagnose --ttft-p95-ms 1800 --tpot-p95-ms 30
--slo-ttft-p95-ms 500 --slo-tpot-p95-ms 50 --shared-prefix-frac 0.7 --json`` (or ``--input FILE`` / ``--baseline
profile_export_aiperf.json``); ``python -m inferopt diagnose --bench`` times the engine.
"""
from __future__ import annotations

import json
import math
import operator
from dataclasses import asdict, dataclass, field

from inferopt.diagnosis import knowledge
from inferopt.errors import CourseError

METRIC_FIELDS = {
    "ttft_p95_ms": "P95 time to first token, ms",
    "tpot_p95_ms": "P95 time per output token, ms",
    "ttft_p99_ms": "P99 time to first token, ms",
    "tpot_p99_ms": "P99 time per output token, ms",
    "throughput_tok_s": "output tokens per second",
    "gpu_util": "GPU utilization, fraction 0..1",
    "oom": "true if the server ran out of memory",
    "memory_used_frac": "memory in use, fraction 0..1",
    "queue_len": "requests waiting in the queue",
    "preemptions": "preempted requests during the run",
}
SLO_FIELDS = {
    "ttft_p95_ms": "TTFT P95 SLO, ms",
    "tpot_p95_ms": "TPOT P95 SLO, ms",
    "ttft_p99_ms": "TTFT P99 SLO, ms",
    "tpot_p99_ms": "TPOT P99 SLO, ms",
    "throughput_tok_s": "minimum output tokens per second",
}
WORKLOAD_FIELDS = {
    "prompt_tokens": "mean prompt tokens per request",
    "output_tokens": "mean output tokens per request",
    "shared_prefix_frac": "share of requests with a common prefix, 0..1",
    "concurrency": "requests in flight",
    "model_weights_gib": "model weights, GiB",
    "gpu_memory_gib": "memory of one GPU, GiB",
    "gpu_type": "GPU class (H100, A100, L40S, T4, CPU, ...; see assets/gpus.yaml)",
    "num_gpus": "GPUs available",
    "lora_adapters": "LoRA adapters served",
    "draft_model": "draft model name for speculative decoding",
}
FRACTIONS = {"gpu_util", "memory_used_frac", "shared_prefix_frac"}
COUNTS = {"queue_len", "preemptions", "prompt_tokens", "output_tokens", "concurrency", "num_gpus", "lora_adapters"}
# which branch a failing metric sends you to
METRIC_BRANCH = {"oom": "C", "ttft_p95_ms": "A", "tpot_p95_ms": "B", "throughput_tok_s": "B",
                 "ttft_p99_ms": "D", "tpot_p99_ms": "D"}
_OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
        ">": operator.gt, ">=": operator.ge}


# ----------------------------------------------------------------------------- input checking
def _number(section: str, key: str, value, *, fraction=False, count=False) -> float:
    where = f"{section}.{key}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise CourseError(f"{where}: {value!r} is not a number; give a number") from None
    if math.isnan(value) or math.isinf(value):
        raise CourseError(f"{where}: {value} is not a finite number")
    if value < 0:
        raise CourseError(f"{where}: {value} is negative; give a value >= 0")
    if fraction and value > 1:
        raise CourseError(f"{where}: {value} is above 1; give a fraction 0..1 "
                          f"(if you meant {value:g} %, write {value / 100:g})")
    if count and value != int(value):
        raise CourseError(f"{where}: {value} is not a whole number")
    return float(value)


def _unknown(section: str, key: str, known: dict) -> CourseError:
    hint = ""
    for suffix in ("_s", "_sec", "_us", "_seconds"):
        if key.endswith(suffix) and key[: -len(suffix)] + "_ms" in known:
            hint = f" (give it in milliseconds as {key[: -len(suffix)]}_ms)"
    return CourseError(f"{section}.{key}: unknown field{hint}; known fields: {', '.join(known)}")


def _as_dict(section: str, d) -> dict:
    if d is None:
        return {}
    if hasattr(d, "__dataclass_fields__"):
        d = {k: v for k, v in asdict(d).items() if v is not None}
    if not isinstance(d, dict):
        raise CourseError(f"{section}: expected a dict of field -> value, got {type(d).__name__}")
    return d


def metrics_from_summary(summary: dict) -> dict:
    """The ``metrics`` dict from a benchmark summary that holds other keys too (kept: METRIC_FIELDS)."""
    if not isinstance(summary, dict):
        raise CourseError(f"summary: expected a dict, got {type(summary).__name__}")
    return {k: summary[k] for k in METRIC_FIELDS if summary.get(k) is not None}


@dataclass(frozen=True)
class Baseline:
    """Measured metrics (latencies in ms). Build with ``Baseline.from_dict``."""
    ttft_p95_ms: float | None = None
    tpot_p95_ms: float | None = None
    ttft_p99_ms: float | None = None
    tpot_p99_ms: float | None = None
    throughput_tok_s: float | None = None
    gpu_util: float | None = None
    oom: bool = False
    memory_used_frac: float | None = None
    queue_len: float | None = None
    preemptions: float | None = None

    @classmethod
    def from_dict(cls, d) -> Baseline:
        d = _as_dict("metrics", d)
        vals = {}
        for k, v in d.items():
            if k not in METRIC_FIELDS:
                raise _unknown("metrics", k, METRIC_FIELDS)
            if v is None:
                continue
            if k == "oom":
                if not isinstance(v, bool):
                    raise CourseError(f"metrics.oom: {v!r} is not true/false")
                vals[k] = v
            else:
                vals[k] = _number("metrics", k, v, fraction=k in FRACTIONS, count=k in COUNTS)
        if not vals.get("oom"):
            for k in ("ttft_p95_ms", "tpot_p95_ms"):
                if k not in vals:
                    raise CourseError(f"metrics.{k}: missing; measure it (ms) or set oom: true "
                                      "if the server could not run")
        return cls(**vals)


@dataclass(frozen=True)
class SLOs:
    """Service-level objectives (latencies in ms, throughput in output tokens/s)."""
    ttft_p95_ms: float
    tpot_p95_ms: float
    ttft_p99_ms: float | None = None
    tpot_p99_ms: float | None = None
    throughput_tok_s: float | None = None

    @classmethod
    def from_dict(cls, d) -> SLOs:
        d = _as_dict("slos", d)
        vals = {}
        for k, v in d.items():
            if k not in SLO_FIELDS:
                raise _unknown("slos", k, SLO_FIELDS)
            if v is None:
                continue
            x = _number("slos", k, v)
            if x == 0:
                raise CourseError(f"slos.{k}: 0 is not a usable target; give a positive value")
            if k.endswith("_ms") and x < 1:
                raise CourseError(f"slos.{k}: {x:g} ms looks like seconds; give milliseconds "
                                  f"(e.g. {x * 1000:g})")
            vals[k] = x
        for k in ("ttft_p95_ms", "tpot_p95_ms"):
            if k not in vals:
                raise CourseError(f"slos.{k}: missing; give the target in ms (e.g. 500 for TTFT, 50 for TPOT)")
        return cls(**vals)


@dataclass(frozen=True)
class Workload:
    """Workload traits; every field optional (None = unknown, matches no condition)."""
    prompt_tokens: float | None = None
    output_tokens: float | None = None
    shared_prefix_frac: float | None = None
    concurrency: float | None = None
    model_weights_gib: float | None = None
    gpu_memory_gib: float | None = None
    gpu_type: str | None = None
    num_gpus: float = 1
    lora_adapters: float = 0
    draft_model: str | None = None

    @classmethod
    def from_dict(cls, d) -> Workload:
        d = _as_dict("workload", d)
        vals = {}
        for k, v in d.items():
            if k not in WORKLOAD_FIELDS:
                raise _unknown("workload", k, WORKLOAD_FIELDS)
            if v is None:
                continue
            if k == "gpu_type":
                vals[k] = knowledge.gpu_info(v)["name"]
            elif k == "draft_model":
                if not isinstance(v, str) or not v:
                    raise CourseError("workload.draft_model: give the draft model's name (a string) or leave it out")
                vals[k] = v
            else:
                vals[k] = _number("workload", k, v, fraction=k in FRACTIONS, count=k in COUNTS)
        if vals.get("num_gpus", 1) < 1:
            raise CourseError("workload.num_gpus: must be at least 1")
        return cls(**vals)


# ----------------------------------------------------------------------------- output
@dataclass
class Diagnosis:
    """What ``diagnose`` answers; ``to_dict()`` is the CLI's JSON."""
    branch: str | None
    branch_title: str | None
    worst_metric: str | None
    failing: list
    order: list
    path: list
    matched_conditions: list
    techniques: list
    recommendations: list
    actions: list
    already_on: list
    skipped: list
    conflicts: list
    flags: list
    flags_remove: list
    next_step: str
    techniques_on: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)


# ----------------------------------------------------------------------------- engine
def _data():
    return (knowledge.load("decision_tree"), knowledge.load("pitfalls")["pitfalls"],
            knowledge.load("optimization_order")["steps"], knowledge.technique_index())


def _facts(b: Baseline, w: Workload, thresholds: dict, on=()) -> dict:
    gpu = knowledge.gpu_info(w.gpu_type) if w.gpu_type else None
    gpu_mem = w.gpu_memory_gib if w.gpu_memory_gib is not None else (
        gpu["memory_gib"] if gpu and gpu["memory_gib"] else None)
    cc = gpu["compute_capability"] if gpu else None
    needs = knowledge.load("techniques")["hardware_needs"]
    weights_fit = None
    if w.model_weights_gib is not None and gpu_mem:
        weights_fit = w.model_weights_gib <= gpu_mem * thresholds["usable_memory_frac"]
    ctx = None
    if w.prompt_tokens is not None or w.output_tokens is not None:
        ctx = (w.prompt_tokens or 0) + (w.output_tokens or 0)
    return {
        "prompt_tokens": w.prompt_tokens, "output_tokens": w.output_tokens, "context_tokens": ctx,
        "shared_prefix_frac": w.shared_prefix_frac, "concurrency": w.concurrency,
        "gpu_util": b.gpu_util, "queue_len": b.queue_len, "preemptions": b.preemptions,
        "lora_adapters": w.lora_adapters, "num_gpus": w.num_gpus,
        "has_draft_model": w.draft_model is not None,
        "gpu_fp8": None if cc is None else cc >= needs["fp8"]["min_compute_capability"],
        "gpu_marlin": None if cc is None else cc >= needs["marlin"]["min_compute_capability"],
        "weights_fit": weights_fit, "gpu_memory_gib": gpu_mem,
        "tpot_tail_ratio": (b.tpot_p99_ms / b.tpot_p95_ms) if b.tpot_p99_ms and b.tpot_p95_ms else None,
        "ttft_tail_ratio": (b.ttft_p99_ms / b.ttft_p95_ms) if b.ttft_p99_ms and b.ttft_p95_ms else None,
        **{f"on_{t}": t in on for t in knowledge.technique_index()},
    }


def _clause_holds(c: dict, facts: dict, thresholds: dict):
    """(holds, text) for one clause; an unknown fact (None) never holds."""
    if c["fact"] not in facts:
        raise CourseError(f"assets/decision_tree.yaml: unknown fact {c['fact']!r}; "
                          f"known facts: {', '.join(sorted(facts))}")
    have = facts[c["fact"]]
    want = c["value"]
    label = f"{c['fact']} {c['op']} {str(want).lower() if isinstance(want, bool) else want}"
    if isinstance(want, str):
        label = f"{c['fact']} {c['op']} {want} ({thresholds[want]:g})"
        want = thresholds[want]
    if have is None:
        return False, f"{label}: {c['fact']} not given"
    shown = str(have).lower() if isinstance(have, bool) else f"{have:g}"
    return bool(_OPS[c["op"]](have, want)), f"{c['fact']} = {shown}, {c['op']} {label.split(c['op'], 1)[1].strip()}"


def _cond_holds(cond, facts, thresholds):
    """(holds, texts of the clauses that decided it). None/empty condition holds."""
    if not cond:
        return True, []
    results = [_clause_holds(c, facts, thresholds) for c in cond["clauses"]]
    if cond.get("match", "any") == "all":
        ok = all(r[0] for r in results)
        return ok, [t for r, t in results] if ok else [t for r, t in results if not r]
    ok = any(r[0] for r in results)
    return ok, [t for r, t in results if r] if ok else [t for r, t in results]


def _metric_checks(b: Baseline, s: SLOs, tail_ratio: float) -> list:
    """Failing metrics: dicts with metric, value, slo, ratio (>1 = worse than the SLO), branch."""
    out = []
    if b.oom:
        out.append({"metric": "oom", "value": True, "slo": False, "ratio": None, "branch": "C"})
    for k in ("ttft_p95_ms", "tpot_p95_ms"):
        v = getattr(b, k)
        if v is not None and v > getattr(s, k):
            out.append({"metric": k, "value": v, "slo": getattr(s, k), "ratio": v / getattr(s, k),
                        "branch": METRIC_BRANCH[k]})
    if s.throughput_tok_s is not None and b.throughput_tok_s is not None and b.throughput_tok_s < s.throughput_tok_s:
        ratio = s.throughput_tok_s / b.throughput_tok_s if b.throughput_tok_s > 0 else float("inf")
        out.append({"metric": "throughput_tok_s", "value": b.throughput_tok_s, "slo": s.throughput_tok_s,
                    "ratio": ratio, "branch": "B"})
    for k, p95 in (("ttft_p99_ms", "ttft_p95_ms"), ("tpot_p99_ms", "tpot_p95_ms")):
        v = getattr(b, k)
        if v is None:
            continue
        slo = getattr(s, k)
        if slo is None:  # no P99 SLO: a P99 far above P95 is the tail symptom
            base = getattr(b, p95)
            if not base:
                continue
            slo = base * tail_ratio
        if v > slo:
            out.append({"metric": k, "value": v, "slo": round(slo, 3), "ratio": v / slo, "branch": "D"})
    for f in out:
        if f["ratio"] is not None:
            f["ratio"] = round(f["ratio"], 3) if math.isfinite(f["ratio"]) else None
    return out


def _tp_size(w: Workload, facts: dict, thresholds: dict) -> int:
    """Smallest power of two (<= num_gpus) whose GPUs hold the weights in usable memory."""
    gpus = int(w.num_gpus)
    if w.model_weights_gib is None or not facts["gpu_memory_gib"]:
        return max(2, min(gpus, 2))
    per_gpu = facts["gpu_memory_gib"] * thresholds["usable_memory_frac"]
    tp = 2
    while tp < gpus and w.model_weights_gib / tp > per_gpu * 0.8:
        tp *= 2
    return min(tp, gpus)


def _flags_for(tid: str, tech, w: Workload, facts: dict, thresholds: dict, on: set):
    add = list(tech.enable_flags)
    remove = []
    if tid == "tensor_parallel":
        add = ["--tensor-parallel-size", str(_tp_size(w, facts, thresholds))]
    if tid == "speculative_decoding" and w.draft_model:
        add = ["--speculative-config", json.dumps({"model": w.draft_model, "num_speculative_tokens": 4})]
    if tech.default_on and tid not in on and tech.disable_flags:
        remove = list(tech.disable_flags)  # it was turned off: drop the flag that did it
    return add, remove


def default_techniques_on() -> list:
    """Technique ids vLLM 0.32 runs without any flag (default_on in techniques.yaml)."""
    return [t.id for t in knowledge.techniques() if t.default_on]


def diagnose(metrics, slos, workload=None, techniques_on=None) -> Diagnosis:
    """Diagnose one baseline: worst metric, branch, techniques with reasons and flags, conflicts.

    See the module docstring for the exact field names and units.
    """
    tree, pitfalls, steps, techs = _data()
    thresholds = tree["thresholds"]
    b = metrics if isinstance(metrics, Baseline) else Baseline.from_dict(metrics)
    s = slos if isinstance(slos, SLOs) else SLOs.from_dict(slos)
    w = workload if isinstance(workload, Workload) else Workload.from_dict(workload)
    on_list = default_techniques_on() if techniques_on is None else knowledge.check_technique_ids(techniques_on)
    on = set(on_list)
    facts = _facts(b, w, thresholds, on)

    failing = _metric_checks(b, s, thresholds["tail_ratio"])
    order_ids = [st["branch"] for st in steps]
    failing.sort(key=lambda f: (order_ids.index(f["branch"]), -(f["ratio"] or float("inf"))))
    branches_failing = [x for x in order_ids if any(f["branch"] == x for f in failing)]
    worst = None
    if failing:
        worst = max(failing, key=lambda f: float("inf") if f["ratio"] is None else f["ratio"])["metric"]

    if not failing:
        return Diagnosis(None, None, None, [], [], ["baseline"], [], [], [], [], [], [],
                         _conflicts(pitfalls, on, set(), facts, thresholds, techs), [], [],
                         "All SLOs are met: stop optimizing here, keep monitoring, and re-run the "
                         "benchmark when traffic or the model changes.", sorted(on_list))

    branch_id = branches_failing[0]
    branch = next(x for x in tree["branches"] if x["id"] == branch_id)
    path = ["baseline", branch_id]
    matched, recs, actions, already, skipped = [], [], [], [], []
    seen = set()
    for cond in branch["conditions"]:
        ok, why = _cond_holds(cond["when"], facts, thresholds)
        if not ok:
            continue
        path.append(cond["id"])
        reason = f"{cond['id']}: {cond['title']} ({'; '.join(why)})"
        matched.append({"id": cond["id"], "title": cond["title"], "because": why})
        for t in cond["techniques"]:
            tid = t["id"]
            if tid in seen:
                continue
            seen.add(tid)
            tech = techs[tid]
            t_ok, t_why = _cond_holds(t.get("when"), facts, thresholds)
            if not t_ok:
                unknown = any("not given" in x for x in t_why)
                skipped.append({"id": tid, "condition": cond["id"],
                                "reason": t.get("unless", "condition not met")
                                + (" (the needed trait was not given)" if unknown else "")})
                continue
            if tid in on:
                already.append({"id": tid, "condition": cond["id"],
                                "reason": f"already on; {cond['title'].lower()} persists, so look at the next cause"})
                continue
            add, remove = _flags_for(tid, tech, w, facts, thresholds, on)
            recs.append({"id": tid, "name": tech.name, "condition": cond["id"], "reason": reason,
                         "flags_add": add, "flags_remove": remove, "flag_note": tech.flag_note})
        for a in cond["actions"]:
            a_ok, _ = _cond_holds(a.get("when"), facts, thresholds)
            if a_ok:
                actions.append({"id": a["id"], "condition": cond["id"], "text": a["text"],
                                "flags_add": list(a.get("flags", []))})

    # cheapest first (stable within a cost level: tree order), so the one change to try is the cheapest
    recs.sort(key=lambda r: knowledge.COST_ORDER[techs[r["id"]].cost_level])
    new_ids = {r["id"] for r in recs}
    conflicts = _conflicts(pitfalls, on, new_ids, facts, thresholds, techs)
    # the flag change of the ONE next step (first recommendation, else the first tuning action)
    nxt_item = recs[0] if recs else next((a for a in actions if a["flags_add"]), None)
    flags = list(nxt_item["flags_add"]) if nxt_item else []
    flags_remove = list(nxt_item.get("flags_remove", [])) if nxt_item else []
    if recs:
        first = recs[0]
        change = " ".join(first["flags_add"]) or "no flag"
        if first["flags_remove"]:
            change = (f"remove {' '.join(first['flags_remove'])} if set"
                      + ("" if not first["flags_add"] else f", add {change}"))
        nxt = (f"Apply one change: {first['name']} ({change}). Then run the same benchmark again and "
               f"diagnose the new baseline before trying anything else.")
    elif actions and actions[0]["flags_add"]:
        nxt = (f"Apply one change: {' '.join(actions[0]['flags_add'])} ({actions[0]['text']}). "
               "Then run the same benchmark again and diagnose the new baseline.")
    elif actions:
        nxt = f"Investigate: {actions[0]['text']}. Then measure again."
    elif not matched:
        nxt = (f"Branch {branch_id} fails but no sub-condition matched the workload traits given; "
               "give prompt/output tokens, shared prefix share, concurrency, GPU utilization and model size, "
               "or profile the server, then diagnose again.")
    else:
        nxt = ("Every technique this branch suggests is already on or not possible here; profile the "
               "server (Nsight Systems, vLLM metrics) and measure again.")
    return Diagnosis(branch_id, branch["title"], worst, failing, branches_failing, path, matched,
                     [r["id"] for r in recs], recs, actions, already, skipped, conflicts,
                     flags, flags_remove, nxt, sorted(on_list))


def _conflicts(pitfalls, on: set, new: set, facts, thresholds, techs) -> list:
    """The §3 pitfalls that fire for the techniques in force (already on + new)."""
    active = on | new
    out = []
    for p in pitfalls:
        if not all(t in active for t in p["all_of"]):
            continue
        hit_any = [t for t in p["any_of"] if t in active]
        if p["any_of"] and not hit_any:
            continue
        ok, why = _cond_holds(p["when"], facts, thresholds)
        if not ok:
            continue
        involved = list(p["all_of"]) + hit_any
        out.append({"id": p["id"], "section": p["section"], "title": p["title"], "severity": p["severity"],
                    "techniques": involved, "from_recommendation": any(t in new for t in involved),
                    "because": why, "why": p["why"], "advice": p["advice"]})
    return out


def conflicts_for(techniques_on, workload=None) -> list:
    """The §3 pitfalls that fire for a set of techniques alone (no baseline needed)."""
    tree, pitfalls, _, techs = _data()
    w = workload if isinstance(workload, Workload) else Workload.from_dict(workload)
    on = set(knowledge.check_technique_ids(techniques_on))
    facts = _facts(Baseline(oom=True), w, tree["thresholds"], on)
    return _conflicts(pitfalls, on, set(), facts,
                      tree["thresholds"], techs)


# ----------------------------------------------------------------------------- benchmark
EXAMPLE = {
    "metrics": {"ttft_p95_ms": 1800, "tpot_p95_ms": 62, "ttft_p99_ms": 2600, "tpot_p99_ms": 90,
                "throughput_tok_s": 2400, "gpu_util": 0.8, "oom": False, "queue_len": 3, "preemptions": 0},
    "slos": {"ttft_p95_ms": 500, "tpot_p95_ms": 50},
    "workload": {"prompt_tokens": 3000, "output_tokens": 150, "shared_prefix_frac": 0.6, "concurrency": 32,
                 "gpu_type": "H100", "num_gpus": 8, "model_weights_gib": 65},
    "techniques_on": ["paged_attention", "continuous_batching", "flash_attention"],
}


def time_diagnosis(calls: int = 200, case: dict | None = None) -> dict:
    """Median and P95 wall time of one ``diagnose`` call, in ms, over ``calls`` calls (data cached)."""
    import time

    case = case or EXAMPLE
    diagnose(**case)  # load and check the assets once
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        diagnose(**case)
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {"calls": calls, "median_ms": times[len(times) // 2], "p95_ms": times[int(len(times) * 0.95) - 1]}


def format_text(d: Diagnosis) -> str:
    """A short human-readable diagnosis (the CLI's default output)."""
    if d.branch is None:
        return d.next_step
    lines = [f"worst metric: {d.worst_metric}", f"branch: {d.branch_title}",
             f"path: {' -> '.join(d.path)}"]
    if len(d.order) > 1:
        lines.append(f"also failing, in order: {', '.join(d.order[1:])}")
    for r in d.recommendations:
        lines.append(f"  try {r['id']}: {r['reason']}; flags: {' '.join(r['flags_add']) or '(none)'}"
                     + (f"; remove {' '.join(r['flags_remove'])}" if r["flags_remove"] else ""))
    for a in d.actions:
        lines.append(f"  do: {a['text']}" + (f"; flags: {' '.join(a['flags_add'])}" if a["flags_add"] else ""))
    for a in d.already_on:
        lines.append(f"  already on: {a['id']}")
    for s in d.skipped:
        lines.append(f"  skipped {s['id']}: {s['reason']}")
    for c in d.conflicts:
        lines.append(f"  conflict [{c['severity']}] {c['title']}: {c['advice']}")
    lines.append(f"next: {d.next_step}")
    return "\n".join(lines)
