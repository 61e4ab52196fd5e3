"""The decision tree's rules over the facts (assets/decision_tree.yaml): a condition's clauses, the
walk down one branch (its sub-conditions, techniques, actions and what stays undecided), and the
§3 pitfalls (assets/pitfalls.yaml) that fire for the techniques in force."""
from __future__ import annotations

import operator
from dataclasses import dataclass, field

from inferopt.diagnosis import knowledge
from inferopt.diagnosis.inputs import Deployment, Workload
from inferopt.diagnosis.sizing import _flags_for, _size_action
from inferopt.errors import CourseError

_OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
        ">": operator.gt, ">=": operator.ge}


def _clause_holds(c: dict, facts: dict, thresholds: dict):
    """(holds, text) for one clause; an unknown fact (None) never holds."""
    if c["fact"] not in facts:
        raise CourseError(f"assets/decision_tree.yaml: unknown fact {c['fact']!r}; known facts: {', '.join(sorted(facts))}")
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


_HW_FACT_RULES = {"gpu_fp8_compute": "fp8_w8a8", "gpu_fp8_weights": "fp8_w8a16", "gpu_marlin": "int4_marlin"}


def _hardware_rule_for(cond, branch_id: str) -> str | None:
    """The hardware-table rule a technique's condition tests (None if it tests no GPU fact)."""
    for c in (cond or {}).get("clauses", []):
        if c["fact"] == "gpu_fp8":
            return "fp8_w8a16" if branch_id == "C" else "fp8_w8a8"
        if c["fact"] in _HW_FACT_RULES:
            return _HW_FACT_RULES[c["fact"]]
    return None


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
                    "because": why, "why": p["why"], "advice": p["advice"], "avoid_flags": list(p["avoid_flags"])})
    return out


@dataclass
class Walk:
    """What walking one branch found: the facts it was judged on, the path taken, the conditions that
    matched, the techniques recommended / already on / skipped, the actions, the undecided sub-branches."""
    facts: dict
    path: list
    matched: list = field(default_factory=list)
    recs: list = field(default_factory=list)
    actions: list = field(default_factory=list)
    already: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    undecided: list = field(default_factory=list)


def walk_branch(branch: dict, facts: dict, thresholds: dict, techs: dict, on: set, w: Workload,
                dep: Deployment | None, mem: dict | None) -> Walk:
    """Every sub-condition of ``branch`` that holds, with its techniques (flags sized to the workload)
    and actions; a sub-condition a missing measurement would decide is listed as undecided."""
    branch_id = branch["id"]
    if branch_id == "C":  # FP8 here saves memory: weight-only FP8 (FP8 Marlin) counts (hardware_rules.yaml)
        facts = {**facts, "gpu_fp8": facts["gpu_fp8_weights"]}
    path = ["baseline", branch_id]
    matched, recs, actions, already, skipped, undecided = [], [], [], [], [], []
    seen = set()
    for ci, cond in enumerate(branch["conditions"]):
        ok, why = _cond_holds(cond["when"], facts, thresholds)
        if not ok:
            decided_no = cond["when"].get("match") == "all" and any(
                facts.get(c["fact"]) is not None and not _clause_holds(c, facts, thresholds)[0]
                for c in cond["when"]["clauses"])
            if any("not given" in x for x in why) and not decided_no:
                undecided.append({"id": cond["id"], "title": cond["title"], "decided_by": cond["decided_by"]})
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
                unless = t.get("unless", "condition not met")
                hw_rule = _hardware_rule_for(t.get("when"), branch_id)
                if hw_rule and not unknown:
                    from inferopt.planning import hardware

                    unless = f"{hardware.rule(hw_rule)['text']} ({hardware.cite(hw_rule)})"
                skipped.append({"id": tid, "condition": cond["id"],
                                "reason": unless + (" (the needed trait was not given)" if unknown else "")})
                continue
            if tid in on:
                already.append({"id": tid, "condition": cond["id"],
                                "reason": f"already on; {cond['title'].lower()} persists, so look at the next cause"})
                continue
            add, remove = _flags_for(tid, tech, w, facts, thresholds, on, mem)
            rank = t.get("rank", knowledge.COST_ORDER[tech.cost_level])
            recs.append({"id": tid, "name": tech.name, "condition": cond["id"], "reason": reason,
                         "flags_add": add, "flags_remove": remove, "flag_note": tech.flag_note,
                         "rank": rank, "_order": (ci, len(recs))})
            if tech.checkpoint:   # a precision that is another checkpoint (INT4 AWQ/GPTQ), not a flag
                from inferopt.vllm_oracle.runtime import checkpoint_change

                recs[-1]["checkpoint"] = checkpoint_change(dep.model if dep is not None else None, tech.checkpoint)
        for a in cond["actions"]:
            if _cond_holds(a.get("when"), facts, thresholds)[0]:
                actions.append(_action_item(a, cond["id"], facts, w, dep, mem))
    return Walk(facts, path, matched, recs, actions, already, skipped, undecided)


def _action_item(a: dict, cond_id: str, facts: dict, w: Workload, dep: Deployment | None, mem: dict | None) -> dict:
    """One action of a sub-condition, sized to the workload when the tree says ``sized``."""
    item = {"id": a["id"], "condition": cond_id, "text": a["text"], "rank": a.get("rank", 3),
            "flags_add": list(a.get("flags", [])), "flags_remove": [], "sized_because": ""}
    if a.get("sized"):
        add, remove, because = _size_action(a["sized"], facts, w, dep, mem)
        item.update(flags_add=list(add or []), flags_remove=list(remove or []), sized_because=because)
        gain = next((c["concurrency_factor"] for c in (mem or {}).get("candidates", [])
                     if c["id"] == a["id"] and c["flags"] == item["flags_add"]), None)
        if gain is not None and gain < 1.25:  # a free change that frees little comes after the techniques
            item["rank"] = 3
            item["frees_little"] = True
            item["sized_because"] += f" (frees little: concurrency x{gain:.2f})"
        if add is None:
            item["text"] += f" (not sized: {because})"
    return item
