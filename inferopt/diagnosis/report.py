"""What the diagnosis answers (``Diagnosis``) and the text a learner reads: the next step in one
sentence and the CLI's short report (``format_text``)."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from inferopt.diagnosis.tree import Walk


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
    changes: list = field(default_factory=list)
    not_checked: list = field(default_factory=list)
    undecided: list = field(default_factory=list)
    signals: dict = field(default_factory=dict)
    memory: dict | None = None
    warnings: list = field(default_factory=list)
    model: dict | None = None            # the performance model's view (diagnosis/model_view.py)
    sample: dict = field(default_factory=dict)   # requests measured and each tail verdict (diagnosis/sample.py)
    saturation: dict | None = None       # the sweep's throughput roof and the fleet (diagnosis/saturation.py)
    vllm: dict | None = None             # the CLI's vLLM verdicts on the commands (vllm_oracle.runtime.check_changes)

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)


def _not_checked(not_checked: list) -> str:
    return (" Not checked: " + ", ".join(f"{x['metric']} ({x['why']})" for x in not_checked) + ".") if not_checked else ""


def all_met_step(slos_given: bool, not_checked: list, warnings: list) -> str:
    """The next step when no SLO fails (or none was given: then a warning too)."""
    nxt = ("All SLOs are met: stop optimizing here, keep monitoring, and re-run the "
           "benchmark when traffic or the model changes.")
    if not slos_given:
        nxt = ("No SLO was given, so nothing can fail or pass: set one first (e.g. --slo-ttft-p95-ms 500 "
               "--slo-tpot-p95-ms 50, from what users need), then diagnose again.")
        warnings.append("no SLO given: set at least one (TTFT/TPOT P95, or a throughput target)")
    return nxt + _not_checked(not_checked)


def next_step(changes: list, walk: Walk, branch_id: str, not_checked: list) -> tuple[list, list, str]:
    """(flags to add, flags to remove, the sentence) of the one next step: the first change to try."""
    recs, actions = walk.recs, walk.actions
    nxt_item = None
    if changes:
        pool = recs if changes[0]["kind"] == "technique" else actions
        nxt_item = next(x for x in pool if x["id"] == changes[0]["id"])
    flags = list(nxt_item["flags_add"]) if nxt_item else []
    flags_remove = list(nxt_item.get("flags_remove", [])) if nxt_item else []
    if nxt_item is not None and nxt_item in recs:
        first = nxt_item
        change = " ".join(first["flags_add"]) or "no flag"
        if first.get("checkpoint"):    # another checkpoint, not a flag (INT4 AWQ/GPTQ)
            from inferopt.vllm_oracle.runtime import checkpoint_text

            change = checkpoint_text(first["checkpoint"])
        if first["flags_remove"]:
            change = (f"remove {' '.join(first['flags_remove'])} if set"
                      + ("" if not first["flags_add"] else f", add {change}"))
        after = f"; after: {first['after']['text']}" if first.get("after") else ""
        nxt = (f"Apply one change: {first['name']} ({change}{after}) [{first['cost_label']}]. Then run the same "
               f"benchmark again and diagnose the new baseline before trying anything else.")
    elif nxt_item is None and recs:
        nxt = (f"Apply one change: {recs[0]['name']} (no flag). Then run the same benchmark again and "
               f"diagnose the new baseline before trying anything else.")
    elif nxt_item is not None and not nxt_item["flags_add"] and not nxt_item["flags_remove"]:
        nxt = (f"Apply one change: {nxt_item['text']}"
               + (f" ({nxt_item['sized_because']})" if nxt_item.get("sized_because") else "")
               + f" [{nxt_item['cost_label']}]. Then run the same benchmark again and diagnose the new baseline.")
    elif nxt_item is not None:
        change = " ".join(nxt_item["flags_add"]) or f"remove {' '.join(nxt_item['flags_remove'])}"
        after = f"; after: {nxt_item['after']['text']}" if nxt_item.get("after") else ""
        nxt = (f"Apply one change: {change} ({nxt_item['text']}"
               + (f"; {nxt_item['sized_because']}" if nxt_item.get("sized_because") else "") + after
               + f") [{nxt_item['cost_label']}]. Then run the same benchmark again and diagnose the new baseline.")
    elif actions:
        nxt = f"Investigate: {actions[0]['text']}. Then measure again."
    elif walk.undecided and not walk.matched:
        nxt = (f"Branch {branch_id} fails, and which sub-branch applies depends on a measurement not given. "
               + " ".join(f"{u['id']} ({u['title']}): decided by {u['decided_by']}." for u in walk.undecided)
               + " Measure it and diagnose again.")
    else:
        nxt = ("Every technique this branch suggests is already on or not possible here; profile the "
               "server (Nsight Systems, vLLM metrics) and measure again.")
        if walk.undecided:
            nxt += " Other causes not yet ruled out: " + "; ".join(
                f"{u['id']} ({u['title']}), decided by {u['decided_by']}" for u in walk.undecided) + "."
    return flags, flags_remove, nxt + _not_checked(not_checked)


def format_text(d: Diagnosis) -> str:
    """A short human-readable diagnosis (the CLI's default output)."""
    if d.branch is None:
        return "\n".join([f"warning: {x}" for x in d.warnings] + [d.next_step]
                         + [f"  conflict [{c['severity']}] {c['title']}: {c['advice']}" for c in d.conflicts])
    lines = [f"worst metric: {d.worst_metric}", f"branch: {d.branch_title}",
             f"path: {' -> '.join(d.path)}"]
    if len(d.order) > 1:
        lines.append(f"also failing, in order: {', '.join(d.order[1:])}")
    for r in d.recommendations:
        flags = " ".join(r["flags_add"]) or "(none)"
        if r.get("checkpoint"):        # another checkpoint, not a flag (INT4 AWQ/GPTQ)
            from inferopt.vllm_oracle.runtime import checkpoint_text

            flags += f"; {checkpoint_text(r['checkpoint'])}"
        lines.append(f"  try {r['id']} [{r.get('cost_label', '')}]: {r['reason']}; flags: {flags}"
                     + (f"; remove {' '.join(r['flags_remove'])}" if r["flags_remove"] else ""))
    for a in d.actions:
        lines.append(f"  do [{a.get('cost_label', '')}]: {a['text']}" + (f"; flags: {' '.join(a['flags_add'])}" if a["flags_add"] else "")
                     + (f"; remove {' '.join(a['flags_remove'])}" if a["flags_remove"] else "")
                     + (f" ({a['sized_because']})" if a["flags_add"] and a.get("sized_because") else ""))
    for u in d.undecided:
        lines.append(f"  undecided {u['id']} ({u['title']}): measure {u['decided_by']}")
    if d.memory:
        m = d.memory
        lines.append(f"  memory: weights {m['weights_gib_per_gpu']} GiB per GPU, fit: {m['weights_fit']}, "
                     f"vLLM starts: {m['will_start']}, dominates: {m['dominates'] or 'unknown'}"
                     + (f", KV {m['kv_cache_tokens']:,} tokens" if m.get("kv_cache_tokens") else ""))
        for c in m["candidates"]:
            # a candidate that is another checkpoint (INT4 AWQ/GPTQ) has no flag: its text names what to serve
            lines.append(f"    candidate {c['text']}  [{' '.join(c['flags'])}]" if c["flags"] else f"    candidate {c['text']}")
    for a in d.already_on:
        lines.append(f"  already on: {a['id']}")
    for s in d.skipped:
        lines.append(f"  skipped {s['id']}: {s['reason']}")
    for c in d.conflicts:
        avoid = f" (avoid with: {' '.join(c['avoid_flags'])})" if c["avoid_flags"] else ""   # 3.4: none in vLLM 0.32
        lines.append(f"  conflict [{c['severity']}] {c['title']}: {c['advice']}{avoid}")
    for x in d.not_checked:
        lines.append(f"  not checked: {x['metric']} ({x['why']})")
    for x in d.warnings:
        lines.append(f"  warning: {x}")
    if d.saturation:
        lines.append(f"  throughput: {d.saturation['text']}")
    if d.model and d.model.get("summary"):
        lines.append(f"  model: {d.model['summary']}")
        for c in d.model.get("candidates", []):
            p = c["predicted"]
            lines.append(f"    predicted after {c['name']} [{c['cost_kind']}]: TTFT {p['ttft_ms']:.0f} ms, "
                         f"TPOT {p['tpot_ms']:.1f} ms, {p['throughput_tok_s']:.0f} tok/s ({p['binding_limit']})")
    lines.append(f"next: {d.next_step}")
    return "\n".join(lines)
