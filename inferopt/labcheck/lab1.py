"""Lab 1 checks: the root of the decision tree, six diagnoses, one pitfall.

Expected answers come from the course's decision engine (``inferopt.diagnosis.decision``) at
check time, so the lab follows the engine when its rules change. The learner's functions run
with ``diagnose`` made unavailable.
"""
from __future__ import annotations

from inferopt.diagnosis import knowledge
from inferopt.diagnosis.decision import conflicts_for, diagnose
from inferopt.labcheck import (
    CheckFailed,
    NotDone,
    Shortcut,
    call,
    counted,
    forbid,
    need,
    need_callable,
    passed,
    quiet,
    rng,
)

FORBIDDEN = [("inferopt.diagnosis.decision", "diagnose"), ("inferopt.diagnosis.decision", "_metric_checks")]
LATENCY = ["ttft_p95_ms", "tpot_p95_ms", "ttft_p99_ms", "tpot_p99_ms"]


def random_case(r):
    """A baseline and SLOs the learner has never seen: all four latency SLOs set (so P99 is judged
    against its own SLO), some metrics missing, sometimes throughput, sometimes OOM. Never a near
    tie: when the two worst ratios are within 1 % of each other, "the worst" is a rounding matter."""
    while True:
        metrics, slos = _random_case(r)
        ratios = sorted((metrics[k] / slos[k] for k in LATENCY if k in metrics), reverse=True)
        if "throughput_tok_s" in metrics:
            ratios = sorted([*ratios, slos["throughput_tok_s"] / metrics["throughput_tok_s"]], reverse=True)
        if len(ratios) < 2 or ratios[0] <= 1 or ratios[0] > ratios[1] * 1.01:
            return metrics, slos


def _random_case(r):
    slos = {"ttft_p95_ms": r.choice([200, 300, 500, 800, 1500]), "tpot_p95_ms": r.choice([20, 30, 50, 80])}
    slos["ttft_p99_ms"] = slos["ttft_p95_ms"] * r.choice([1.5, 2, 3])
    slos["tpot_p99_ms"] = slos["tpot_p95_ms"] * r.choice([1.5, 2, 3])
    metrics = {}
    for k in LATENCY:  # the engine needs both P95s (unless OOM); P99s are optional
        if k.endswith("p95_ms") or r.random() < 0.7:
            metrics[k] = round(slos[k] * r.choice([r.uniform(0.2, 0.95), r.uniform(1.05, 6.0)]), 1)
            if r.random() < 0.08:
                metrics[k] = slos[k]  # exactly at the SLO: meets it (fails only when above)
    for m in ("ttft", "tpot"):  # a P99 is never below its P95 (the engine refuses such input)
        if f"{m}_p99_ms" in metrics and metrics[f"{m}_p99_ms"] < metrics[f"{m}_p95_ms"]:
            metrics[f"{m}_p99_ms"] = metrics[f"{m}_p95_ms"]
    if r.random() < 0.35:
        slos["throughput_tok_s"] = r.choice([500, 1000, 3000])
        metrics["throughput_tok_s"] = round(slos["throughput_tok_s"] * r.choice([r.uniform(0.1, 0.9), r.uniform(1.1, 3)]), 1)
    if r.random() < 0.12:
        metrics["oom"] = True
    return metrics, slos


def boundary_cases():
    """Cases on the thresholds, in every run: a metric exactly at its SLO (meets it), a hair above
    (fails), a hair below (meets); throughput exactly at, a hair under and a hair over its SLO."""
    base = {"ttft_p95_ms": 500, "tpot_p95_ms": 50, "ttft_p99_ms": 1000, "tpot_p99_ms": 100}
    out = []
    for k in LATENCY:
        for factor in (1.0, 1.000001, 0.999999):
            metrics = {m: (v * factor if m == k else v * 0.5) for m, v in base.items()}
            for m in ("ttft", "tpot"):  # a P99 never below its P95 (the engine refuses such input)
                metrics[f"{m}_p99_ms"] = max(metrics[f"{m}_p99_ms"], metrics[f"{m}_p95_ms"])
            out.append((metrics, dict(base)))
    slos = dict(base, throughput_tok_s=1000)
    for tp in (1000, 999.999, 1000.001):
        out.append(({**{m: v * 0.5 for m, v in base.items()}, "throughput_tok_s": tp}, dict(slos)))
    return out


def _describe(metrics, slos):
    shown = {k: v for k, v in metrics.items()}
    return f"metrics {shown} with SLOs {slos}"


def _hint_worst(got, want, show):
    if want == "oom":
        return "when the server runs out of memory (metrics['oom'] is true) nothing else matters: return \"oom\""
    if want is None:
        return (f"it returned {show} although every metric meets its SLO: only ratios above 1 fail "
                "(latency: measured/SLO; throughput: SLO/measured)")
    if got is None:
        return "it returned None although a metric fails its SLO: compare each measured value with its SLO"
    if "throughput_tok_s" in (got, want):
        return "throughput is better when higher: its how-bad ratio is SLO / measured, latencies use measured / SLO"
    return f"it returned {show} that is not the failing metric with the largest measured/SLO ratio (compare ratios, not raw ms)"


# the branch of each metric, as the lab states it (the learner's BRANCH_OF): to tell which mistake a wrong branch is
_BRANCH_OF_METRIC = {"oom": "C", "ttft_p95_ms": "A", "tpot_p95_ms": "B", "throughput_tok_s": "B",
                     "ttft_p99_ms": "D", "tpot_p99_ms": "D"}


def _hint_branch(got, want, show, worst=None):
    if want is None:
        return f"it returned {show} although nothing fails: return None"
    if got is None:
        return "it returned None although a metric fails its SLO"
    why = ("the branch is not the worst metric's branch" if got == _BRANCH_OF_METRIC.get(worst)
           else "check the order of the steps, and which of them fail")
    return (f"it returned {show} that is not the earliest failing step of the order OOM (C) -> TTFT P95 (A) -> "
            f"TPOT P95 or throughput (B) -> P99 tail (D) (chapter 04): {why}")


@counted
def part1(ns: dict, n_cases: int = 300, seed=None) -> None:
    task = "Part 1"
    worst_metric, branch_for = need_callable(ns, task, "worst_metric", "branch_for")
    r = rng(seed)
    incidents = need(ns, task, "INCIDENTS")
    slo_default = need(ns, task, "SLO")
    cases = [(inc["metrics"], inc.get("slos", slo_default)) for inc in incidents.values()]
    n_fixed = len(cases)
    cases += boundary_cases() + [random_case(r) for _ in range(n_cases)]
    for i, (metrics, slos) in enumerate(cases):
        d = diagnose(metrics, slos)
        with forbid(ns, FORBIDDEN), quiet():
            got_w = call(task, worst_metric, dict(metrics), dict(slos))
            got_b = call(task, branch_for, dict(metrics), dict(slos))
        made_up = i >= n_fixed
        where = f"on a case the check made up, {_describe(metrics, slos)}" if made_up else "on one of the six incidents"
        if got_w != d.worst_metric:  # an incident's answer is never echoed
            show = repr(got_w) if made_up else "a metric"
            raise CheckFailed(f"{task}: worst_metric is wrong {where}: {_hint_worst(got_w, d.worst_metric, show)}")
        if got_b != d.branch:
            show = repr(got_b) if made_up else "a branch"
            raise CheckFailed(f"{task}: branch_for is wrong {where}: {_hint_branch(got_b, d.branch, show, d.worst_metric)}")
    passed(f"Part 1 passes: worst_metric and branch_for agree with the decision engine on the 6 incidents, "
           f"{len(boundary_cases())} cases on the thresholds and {n_cases} cases made up just now")


def _used_diagnose(ns: dict) -> bool:
    """Did any cell run so far use the decision engine's diagnosis? (IPython keeps the cells run as `In`.)

    A text test, so only the notebook's own view; the grader (``inferopt grade``) decides at run time:
    it runs the cell that defines `answers` with a profiler that sees every call into the engine."""
    for src in ns.get("In", []) or []:
        if isinstance(src, str) and "labcheck" not in src and ("diagnose" in src or "_metric_checks" in src
                                                                or "decision import" in src):
            return True
    return False


@counted
def part2(ns: dict) -> None:
    task = "Part 2"
    answers, incidents, slo_default = need(ns, task, "answers", "INCIDENTS", "SLO")
    if not isinstance(answers, dict):
        raise CheckFailed(f"{task}: `answers` should be a dict {{incident: (branch, first thing to try)}}")
    missing = [n for n in incidents if n not in answers]
    if missing:
        raise NotDone(f"{task} is not done yet: `answers` has no entry for {', '.join(missing)}")
    if _used_diagnose(ns):
        raise Shortcut(f"{task}: write it yourself: work the answers out from the tree and the reports; "
                       "a cell that defines `answers` calls diagnose")
    ids = set(knowledge.technique_ids())
    tree = knowledge.load("decision_tree")
    actions = {a["id"] for b in tree["branches"] for c in b["conditions"] for a in c["actions"]}
    kinds = set()
    for name, inc in incidents.items():
        entry = answers[name]
        if not (isinstance(entry, (tuple, list)) and len(entry) == 2):
            kinds.add("each answer is a pair (branch letter, technique or action id)")
            continue
        branch, fix = entry
        d = diagnose(inc["metrics"], inc.get("slos", slo_default), inc["workload"], inc["techniques_on"])
        fixes = d.techniques + [a["id"] for a in d.actions]   # ranked: the tree's first thing to try comes first
        if fix not in ids | actions:
            kinds.add("a fix you named is not a technique or action id (see the lists above)")
        elif fix in inc["techniques_on"]:
            kinds.add("a fix you named is already on in its incident: when the fitting technique is on, the tree "
                      "names a tuning action instead")
        elif branch != d.branch or fix not in fixes:
            kinds.add("at least one diagnosis differs from the tree's")
        elif fix != fixes[0]:  # a later one of the tree's list: INT4 before TP, a tuning action before the technique
            kinds.add("a fix you named is on the tree's list but not the first thing to try: the tree ranks a "
                      "condition's fixes (the one that costs least accuracy first; a technique that is off before "
                      "a tuning action)")
    if kinds:
        # One verdict for the whole set, never which incident is wrong or how many: per-incident
        # feedback would let a loop try every (branch, fix) until each incident passes.
        raise CheckFailed(f"{task}: not all {len(incidents)} diagnoses agree with the tree: " + "; ".join(sorted(kinds))
                          + ". For each incident list the failing metrics, apply the order C -> A -> B -> D (your "
                          "branch_for does this), then read that branch's conditions against the report")
    passed(f"Part 2 passes: all {len(incidents)} diagnoses agree with the decision engine")


PLAN = ["speculative_decoding", "int4_awq_marlin"]
PLAN_WORKLOAD = {"concurrency": 1, "gpu_type": "L40S", "draft_model": "draft-160m", "draft_dtype": "int4"}


@counted
def part3(ns: dict) -> None:
    task = "Part 3"
    pitfall = need(ns, task, "pitfall")
    ids = [p["id"] for p in knowledge.load("pitfalls")["pitfalls"]]
    if pitfall not in ids:
        raise CheckFailed(f"{task}: {pitfall!r} is not a pitfall id of assets/pitfalls.yaml (the list is printed above)")
    fired = [c["id"] for c in conflicts_for(PLAN, PLAN_WORKLOAD)]
    if pitfall not in fired:
        raise CheckFailed(f"{task}: the engine's rule for {pitfall!r} does not fire for this plan: which two "
                          "techniques does the team combine, and which model is quantized? (chapter 03)")
    if len(fired) != 1:
        raise CheckFailed(f"{task}: more than one pitfall fires for this plan; the lab expects exactly one")
    advice = next(p["advice"] for p in knowledge.load("pitfalls")["pitfalls"] if p["id"] == pitfall)
    passed(f"Part 3 passes. The pitfall's advice: {advice}")
