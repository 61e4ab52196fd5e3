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
- the next step: apply one change, then measure again (``changes``: every concrete change in the
  order to try them; ``undecided``: sub-branches that a missing measurement would decide).

The inputs (``metrics``, ``slos``, ``workload``, ``deployment``; plain dicts, field names and units)
are described in :mod:`inferopt.diagnosis.inputs`. ``techniques_on``: technique ids already in force
(see ``technique_ids()``); ``None`` means vLLM 0.32's defaults (default_on in techniques.yaml); ``[]``
means none.

The rooms of the diagnosis (each name below stays importable from here):
``inputs`` (Baseline, SLOs, Workload, Deployment and their checks), ``facts`` (what the metrics and
the deployment say; which SLOs fail), ``memory_view`` (the memory calculator's view and candidates),
``tree`` (the decision tree's rules and the §3 pitfalls), ``sizing`` (actions sized to the workload),
``changes`` (the candidate changes in the order to try them; ``cost``, ``config_fixes`` and
``start_failure`` as before), ``report`` (``Diagnosis``, the next step, ``format_text``),
``signals`` (vLLM's /metrics), ``cli`` (the ``diagnose`` command).

Issue 19's families: the hardware table (``inferopt.planning.hardware``, assets/hardware_rules.yaml)
decides FP8/Marlin by compute capability; ``diagnosis.cost`` labels each recommendation free /
accuracy / hardware, orders them so and re-checks every memory change with the calculator (``after``);
``diagnosis.start_failure`` answers a start failure with vLLM's own remedies; ``diagnosis.config_fixes``
adds the free fixes the tree lacks (token budget, idle GPUs, replicas). ``Diagnosis.warnings`` holds
one-line warnings (no SLO given; metrics of a running engine against a "will not start" verdict).

CLI (:mod:`inferopt.diagnosis.cli`): ``python -m inferopt diagnose --ttft-p95-ms 1800 --tpot-p95-ms 30
--slo-ttft-p95-ms 500 --slo-tpot-p95-ms 50 --shared-prefix-frac 0.7 --json`` (or ``--input FILE`` /
``--baseline profile_export_aiperf.json`` / ``--metrics-file FILE`` / ``--metrics-url URL`` /
``--plan plan.json`` / ``--model ... --gpu ...``); ``python -m inferopt diagnose --bench`` times it.
"""
from __future__ import annotations

from inferopt.diagnosis import changes as _changes
from inferopt.diagnosis import knowledge
from inferopt.diagnosis import sample as _sample
from inferopt.diagnosis import saturation as _saturation
from inferopt.diagnosis.facts import (  # noqa: F401 (re-exported: notebooks and tests import them from here)
    METRIC_BRANCH,
    _check_one_gpu,
    _engine_ran,
    _facts,
    _kv_pressure,
    _kv_usage,
    _metric_checks,
    _this_cpu_fp8_kv,
    failing_from_memory,
    rank_failing,
    signals_of,
    vllm_defaults,
)
from inferopt.diagnosis.inputs import (  # noqa: F401 (re-exported)
    COUNTS,
    DEPLOYMENT_FIELDS,
    DRAFT_DTYPES,
    FRACTIONS,
    INT4_KERNELS,
    METRIC_FIELDS,
    SLO_FIELDS,
    WORKLOAD_FIELDS,
    Baseline,
    Deployment,
    SLOs,
    Workload,
    deployment_from_plan,
    metrics_from_summary,
    read_inputs,
)
from inferopt.diagnosis.memory_view import _memory_candidates, _memory_view  # noqa: F401 (re-exported)
from inferopt.diagnosis.model_view import model_view as _model_view
from inferopt.diagnosis.report import Diagnosis, all_met_step, format_text, next_step  # noqa: F401 (re-exported)
from inferopt.diagnosis.report import _not_checked as _not_checked_text
from inferopt.diagnosis.signals import read_metrics_source, signals_from_metrics  # noqa: F401 (re-exported)
from inferopt.diagnosis.sizing import _flags_for, _pow2_floor, _size_action, _tp_size  # noqa: F401 (re-exported)
from inferopt.diagnosis.tree import _clause_holds, _cond_holds, _conflicts, walk_branch  # noqa: F401 (re-exported)


def _data():
    return (knowledge.load("decision_tree"), knowledge.load("pitfalls")["pitfalls"],
            knowledge.load("optimization_order")["steps"], knowledge.technique_index())


def default_techniques_on() -> list:
    """Technique ids vLLM 0.32 runs without any flag (default_on in techniques.yaml)."""
    return [t.id for t in knowledge.techniques() if t.default_on]


def diagnose(metrics, slos, workload=None, techniques_on=None, deployment=None, sweep=None) -> Diagnosis:
    """Diagnose one baseline: worst metric, branch, techniques with reasons and flags, conflicts.

    ``deployment`` (optional, see DEPLOYMENT_FIELDS) joins the memory calculator in. ``sweep`` (optional,
    :mod:`inferopt.diagnosis.saturation`): levels of load with the completed requests/s each measured;
    a flat top is the throughput roof (saturation), and with ``workload.target_rps`` the fleet is sized on
    goodput. See :mod:`inferopt.diagnosis.inputs` for the exact field names and units.
    """
    tree, pitfalls, steps, techs = _data()
    thresholds = tree["thresholds"]
    b, s, w, dep = read_inputs(metrics, slos, workload, deployment)
    sat = _saturation.view(_saturation.read_sweep(sweep), s, w, dep)
    on_list = default_techniques_on() if techniques_on is None else knowledge.check_technique_ids(techniques_on)
    on = set(on_list)
    _check_one_gpu(dep, w)
    mem = _memory_view(dep, w) if dep is not None else None
    mem_out = None if mem is None else {k: v for k, v in mem.items() if not k.startswith("_")}
    facts = _facts(b, w, thresholds, on, mem, dep)
    warnings = _refused_on_this_gpu(on_list, w, dep, techs)
    failing, not_checked = _metric_checks(b, s, thresholds["tail_ratio"])
    failing_from_memory(b, mem, facts, failing, warnings)
    short = _saturation.failing_goodput(sat, w)
    if short:
        failing.append(short)
    branches_failing, worst = rank_failing(failing, steps)
    verdicts = _sample.tail_verdicts(b, s, failing)   # a pass on a tail percentile needs the requests to show it
    unproven = [v for v in verdicts if v["passed"] is None]
    if not failing and any(v["requests"] is None for v in verdicts):   # a stop that rests on sample values alone
        warnings.append(next(v["text"] for v in verdicts if v["requests"] is None))
    sample = {"requests": None if b.requests is None else int(b.requests), "verdicts": verdicts}
    if not failing:  # nothing to fix: stop (or set an SLO first, or measure enough requests to say so)
        if unproven:
            nxt = _sample.measure_more_step(unproven)
        else:
            nxt = all_met_step(any(getattr(s, k) is not None for k in SLO_FIELDS), not_checked, warnings)
        return Diagnosis(None, None, None, [], [], ["baseline"], [], [], [], [], [], [],
                         _conflicts(pitfalls, on, set(), facts, thresholds, techs), [], [],
                         nxt, sorted(on_list), [], not_checked, [], signals_of(facts), mem_out, warnings,
                         model=_model_view(b, s, w, dep, mem_out), sample=sample, saturation=sat)
    not_checked += [{"metric": v["metric"], "why": v["text"]} for v in unproven]

    branch_id = branches_failing[0]   # the first failing branch in the §4 order
    branch = next(x for x in tree["branches"] if x["id"] == branch_id)
    walk = walk_branch(branch, facts, thresholds, techs, on, w, dep, mem)
    _changes.complete(walk, branch_id, w, dep, b, on, failing, thresholds, mem, techs, sat)
    conflicts = _conflicts(pitfalls, on, {r["id"] for r in walk.recs}, walk.facts, thresholds, techs)
    changes = _changes.in_order(walk.recs, walk.actions)
    flags, flags_remove, nxt = next_step(changes, walk, branch_id, not_checked)
    model = _model_view(b, s, w, dep, mem_out, worst)
    if sat and sat["saturated"] and model.get("candidates"):   # the measured roof outranks the model's cap
        model["candidates"] = [c for c in model["candidates"] if c["id"] != "raise_max_num_seqs"]
    if model.get("candidates"):   # what the model ranks joins the change list, with its predicted after-metrics
        changes = _changes.with_model(changes, model["candidates"])
        if changes[0]["kind"] == "model":
            flags, flags_remove = list(changes[0]["flags_add"]), list(changes[0]["flags_remove"])
            nxt = _changes.model_step(changes[0], model["predicted"], branch_id, branch["title"],
                                      model.get("checks")) + _not_checked_text(not_checked)
    elif model.get("ran") and not model.get("explains"):   # the model cannot reproduce it: measure, with the gap
        flags, flags_remove = [], []                       # no flag change until the step is profiled
        nxt = (model["summary"][0].upper() + model["summary"][1:] + f". The decision tree's branch {branch_id} "
               f"({branch['title']}) is where to look once the step is profiled." + _not_checked_text(not_checked))
    # VLLM-ORACLE CALL SITE (issue 50; inferopt/vllm_oracle/ is another helper's scope): the one place where the
    # emitted command (`flags` / `flags_remove` on the deployment `dep`) is final; check it with vLLM's config
    # classes here, before the Diagnosis is built, and show a refusal first.
    return Diagnosis(branch_id, branch["title"], worst, failing, branches_failing, walk.path, walk.matched,
                     [r["id"] for r in walk.recs], walk.recs, walk.actions, walk.already, walk.skipped, conflicts,
                     flags, flags_remove, nxt, sorted(on_list), changes, not_checked, walk.undecided,
                     signals_of(facts), mem_out, warnings, model=model, sample=sample, saturation=sat)


def _refused_on_this_gpu(on_list, w, dep, techs) -> list[str]:
    """A technique said to be in force that vLLM 0.32 does not load on the named GPU (its hardware need's rule of
    assets/hardware_rules.yaml fails there): one line each, so a pitfall about how it runs is not the answer."""
    from inferopt.planning import hardware

    gname = w.gpu_type or (dep.gpu if dep is not None and dep.gpu and not dep.on_cpu else None)
    gpu = knowledge.gpu_info(gname) if gname else None
    cc = gpu["compute_capability"] if gpu else None
    if not cc:
        return []
    needs = knowledge.load("techniques")["hardware_needs"]
    out = []
    for tid in on_list:
        need = needs.get(techs[tid].hardware) if tid in techs else None
        if need and need.get("rule") and not hardware.supports(cc, need["rule"]):
            out.append(f"{techs[tid].name} is listed as in force, but vLLM 0.32 does not load it on a {gname} "
                       f"(compute capability {cc:.1f}; it needs {need['text']}): take it off, or use a GPU that has it")
    return out


def conflicts_for(techniques_on, workload=None) -> list:
    """The §3 pitfalls that fire for a set of techniques alone (no baseline needed)."""
    tree, pitfalls, _, techs = _data()
    w = workload if isinstance(workload, Workload) else Workload.from_dict(workload)
    on = set(knowledge.check_technique_ids(techniques_on))
    facts = _facts(Baseline(oom=True), w, tree["thresholds"], on, None, None)
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
