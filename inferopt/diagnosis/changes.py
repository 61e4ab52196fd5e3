"""The candidate changes of the branch taken, in the order to try them: the tree's techniques and
actions plus the free fixes it lacks (``config_fixes``) and vLLM's start remedies (``start_failure``),
each offered once, labelled and ordered by cost (``cost``: free before accuracy before hardware)."""
from __future__ import annotations

from inferopt.diagnosis import config_fixes, cost, knowledge, saturation, start_failure
from inferopt.diagnosis.inputs import Baseline, Deployment, Workload
from inferopt.diagnosis.tree import Walk


def complete(walk: Walk, branch_id: str, w: Workload, dep: Deployment | None, b: Baseline, on: set,
             failing: list, thresholds: dict, mem: dict | None, techs: dict, sat: dict | None = None) -> None:
    """Add the free fixes and start remedies to ``walk.actions``, drop repeats, label every item with
    its cost and sort recommendations and actions in the order to try them (in place)."""
    recs, actions = walk.recs, walk.actions
    actions += config_fixes.extra_actions(branch_id, walk.facts, w, dep, b, on, failing, thresholds, walk.path)
    saturation.apply(sat, actions, w, dep)   # a throughput roof: no cap to raise, the fleet sized on goodput
    if branch_id == "C" and mem is not None and not mem["will_start"]:
        per_node = int(w.gpus_per_node or w.num_gpus)
        actions[:0] = start_failure.remedies(mem, w, min(int(w.num_gpus), per_node))
    if any(a["id"] == "idle_gpus_tp" for a in actions) and any(r["id"] == "tensor_parallel" for r in recs):
        actions[:] = [a for a in actions if a["id"] != "idle_gpus_tp"]
    seen_flags, unique = set(), []
    for a in actions:  # one change offered once (a start remedy and a free fix may both say TP 1 -> 2)
        key = tuple(a["flags_add"])
        if key and key in seen_flags:
            continue
        seen_flags.add(key)
        unique.append(a)
    actions[:] = unique
    walk.skipped += cost.annotate(recs, actions, mem)
    # the order to try: vLLM's start remedies, then free before accuracy before hardware; then rank
    # (tree), then cost level, then tree order
    recs.sort(key=lambda r: (cost.sort_key(r["cost_kind"], r["rank"], r["id"]),
                             knowledge.COST_ORDER[techs[r["id"]].cost_level], r["_order"]))
    for r in recs:
        r.pop("_order")
    actions.sort(key=lambda a: cost.sort_key(a["cost_kind"], a["rank"], a["id"], a.get("frees_little", False)))
    if mem is not None and mem["candidates"] and branch_id == "C":
        gains = {c["id"]: c["text"] for c in mem["candidates"]}
        for r in recs:
            if r["id"] in gains:
                r["memory"] = gains[r["id"]]


def in_order(recs: list, actions: list) -> list:
    """Every concrete change, in the order to try them: techniques and sized actions by rank (a free
    action such as "give the KV cache the memory it needs" before an accuracy-costing technique)."""
    changes = [{"id": r["id"], "kind": "technique", "rank": r["rank"], "flags_add": r["flags_add"],
                "flags_remove": r["flags_remove"], "cost_kind": r["cost_kind"],
                **({"checkpoint": r["checkpoint"]} if r.get("checkpoint") else {})} for r in recs]
    changes += [{"id": a["id"], "kind": "action", "rank": a["rank"], "flags_add": a["flags_add"],
                 "flags_remove": a["flags_remove"], "cost_kind": a["cost_kind"], "weak": a.get("frees_little", False)}
                for a in actions if a["flags_add"] or a["flags_remove"] or cost.is_change_without_flags(a["id"])]
    changes.sort(key=lambda c: cost.sort_key(c["cost_kind"], c["rank"], c["id"], c.get("weak", False)))
    return changes


def with_model(changes: list, candidates: list) -> list:
    """The change list with the performance model's ranked candidates (``Diagnosis.model["candidates"]``) joined
    in: each change the model ranks and the tree did not offer (same id or same flags), with its predicted
    after-metrics, placed by cost kind before the tree's changes of the same kind (issue 50: the model ranks
    FP8 weights, CUDA graphs, replicas over TP, a higher --max-num-seqs ... where the tree has no rule)."""
    have = {tuple(c["flags_add"]) for c in changes if c["flags_add"]}
    ids = {c["id"] for c in changes}
    out = list(changes)
    for c in candidates:
        add = list(c["flags"])
        remove = ["--enforce-eager"] if c["id"] == "cuda_graphs" else []
        if c["id"] in ids or (add and tuple(add) in have):
            continue
        out.append({"id": c["id"], "kind": "model", "rank": 9, "flags_add": add, "flags_remove": remove,
                    "cost_kind": c["cost_kind"], "name": c["name"], "predicted": c["predicted"],
                    **({"checkpoint": c["checkpoint"]} if c.get("checkpoint") else {})})
    # within a cost kind the model's changes come first: each was checked against this measurement (the model
    # explains it) and carries its predicted effect, where a rule of the tree carries none
    return sorted(out, key=lambda c: (*cost.sort_key(c["cost_kind"], 0, c["id"], c.get("weak", False))[:2],
                                      c["kind"] != "model"))


def fit_text(checks: list) -> str:
    """How far the model's prediction lies from each measured figure: "TPOT P95 measured 22.4 vs predicted 21.0
    (7 % off)"."""
    name = {"tpot": "TPOT P95 (ms)", "ttft": "TTFT P95 (ms)", "throughput": "throughput (tok/s)"}
    return ", ".join(f"{name.get(c['metric'], c['metric'])} measured {c['observed']:g} vs predicted "
                     f"{c['predicted']:g} ({abs(c['ratio'] - 1):.0%} off)" for c in checks)


def model_step(first: dict, base: dict, branch: str | None = None, branch_title: str | None = None,
               checks: list | None = None) -> str:
    """The next step when the first change is one the performance model ranks: the change, the decision tree's
    branch and the binding limit it relieves, and how far the model lies from what was measured."""
    p = first["predicted"]
    change = " ".join(first["flags_add"]) or "remove " + " ".join(first["flags_remove"])
    if first.get("checkpoint"):           # another checkpoint, not a flag (INT4 AWQ/GPTQ, INT8 W8A8)
        from inferopt.vllm_oracle.runtime import checkpoint_text

        change = checkpoint_text(first["checkpoint"])
    where = (f"Decision tree branch {branch} ({branch_title}); " if branch else "") + (
        f"binding limit: {base['binding_limit']} ({base['why']}); the model reproduces the measurement "
        f"({fit_text(checks or [])}). ")
    return where + (f"Apply one change the performance model ranks first: {first['name']} ({change}; predicted means, no queue: TTFT "
            f"{base['ttft_ms']:.0f} -> {p['ttft_ms']:.0f} ms, TPOT {base['tpot_ms']:.1f} -> {p['tpot_ms']:.1f} ms, "
            f"{base['throughput_tok_s']:.0f} -> {p['throughput_tok_s']:.0f} tok/s) [{cost.label(first['cost_kind'])}]. "
            "Then run the same benchmark again and diagnose the new baseline.")
