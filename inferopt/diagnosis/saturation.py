"""Saturation named by the throughput ceiling, not by where the queue piles up (issue 50).

A sweep (levels of load: concurrency, request rate, or the --max-num-seqs cap, each with the completed
requests per second it measured) shows the engine's throughput roof: once completions per second stop
rising with load, more load or a higher cap only lengthens the queue (Little's law: the requests in the
system grow, the rate out does not); in an open-loop (request-rate) sweep, completions per second short
of the offered rate say the same. Then no per-engine knob of the queue helps ("raise --max-num-seqs"
is withdrawn); the fleet is sized on goodput at the SLO, the requests per second one replica completes
*within* the SLOs (DistServe, Zhong et al., OSDI 2024, §2; vLLM bench serve --goodput), with the course's
capacity math (:func:`inferopt.planning.capacity.plan_instances`).

A sweep level (a dict): exactly one load key ``concurrency`` | ``rate`` | ``max_num_seqs``;
``request_throughput_rps`` (completed requests/s, required); optional ``goodput_rps`` (requests/s meeting
every SLO), ``ttft_p95_ms``, ``tpot_p95_ms`` (to judge a level against the SLOs when goodput is not given).
"""
from __future__ import annotations

import math

from inferopt.errors import CourseError

LOAD_KEYS = ("concurrency", "rate", "max_num_seqs")
LEVEL_FIELDS = (*LOAD_KEYS, "request_throughput_rps", "goodput_rps", "ttft_p95_ms", "tpot_p95_ms", "requests")
FLAT = 0.10        # completions/s within 10 % of the roof count as on it (and, open loop, 10 % short of the
                   # offered rate counts as falling behind it)
MORE_LOAD = 1.5    # ... while the load grew at least 1.5x past the first level on it
GONE = ("raise_concurrency",)   # actions that raise the cap of a queue (decision_tree.yaml B3)


def read_sweep(levels) -> list:
    """The sweep checked: a list of level dicts (see the module docstring), sorted by load."""
    if levels is None:
        return []
    if not isinstance(levels, list) or not all(isinstance(x, dict) for x in levels):
        raise CourseError("sweep: expected a list of levels {concurrency|rate|max_num_seqs: N, "
                          "request_throughput_rps: R, ...}; give one per load measured")
    out, keys = [], set()
    for i, lv in enumerate(levels):
        unknown = set(lv) - set(LEVEL_FIELDS) - {"load_key", "load"}
        if unknown:
            raise CourseError(f"sweep[{i}]: unknown field(s) {sorted(unknown)}; known: {', '.join(LEVEL_FIELDS)}")
        load = [k for k in LOAD_KEYS if lv.get(k) is not None]
        if len(load) != 1:
            raise CourseError(f"sweep[{i}]: give exactly one load ({', '.join(LOAD_KEYS)}), got {load or 'none'}")
        keys.add(load[0])
        row = {"load_key": load[0]}
        for k in LEVEL_FIELDS:
            v = lv.get(k)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise CourseError(f"sweep[{i}].{k}: {v!r} is not a number >= 0")
            row[k] = float(v)
        row["load"] = row[load[0]]
        if row["load"] <= 0:
            raise CourseError(f"sweep[{i}].{load[0]}: the load must be positive")
        if "request_throughput_rps" not in row:
            raise CourseError(f"sweep[{i}]: request_throughput_rps (completed requests/s) is needed to see the roof")
        if row.get("goodput_rps", 0) > row["request_throughput_rps"] * (1 + 1e-9):
            raise CourseError(f"sweep[{i}]: goodput_rps {row['goodput_rps']:g} is above request_throughput_rps "
                              f"{row['request_throughput_rps']:g}; goodput counts a subset of the completions")
        out.append(row)
    if len(keys) > 1:
        raise CourseError(f"sweep: the levels vary {sorted(keys)}; give one sweep over one load")
    return sorted(out, key=lambda r: r["load"])


def roof(levels: list) -> dict | None:
    """The throughput roof of a sweep: {saturated, roof_rps, knee (load of the first level on the roof),
    last (highest load), load_key, text}; None with fewer than two levels."""
    if len(levels) < 2:
        return None
    top = max(lv["request_throughput_rps"] for lv in levels)
    knee = next(lv for lv in levels if lv["request_throughput_rps"] >= (1 - FLAT) * top)
    last = levels[-1]
    key = last["load_key"].replace("_", " ")
    saturated = last is not knee and last["load"] >= MORE_LOAD * knee["load"]
    behind = [lv for lv in levels if lv["load_key"] == "rate" and lv["request_throughput_rps"] < (1 - FLAT) * lv["load"]]
    if behind and not saturated:   # open loop: arrivals outrun completions, so the queue grows without bound
        lv = behind[0]
        text = (f"saturated: at rate {lv['load']:g} req/s only {lv['request_throughput_rps']:.3g} requests/s complete "
                f"(the throughput roof, {top:.3g} req/s over the sweep): the arrivals outrun it and the queue grows "
                "without bound")
        return {"saturated": True, "roof_rps": top, "knee": lv["load"], "last": last["load"],
                "load_key": "rate", "text": text}
    if saturated:
        text = (f"saturated: {top:.3g} completed requests/s is the throughput roof, reached at {key} {knee['load']:g} "
                f"and not passed at {key} {last['load']:g} ({last['load'] / knee['load']:.1f}x the load, "
                f"{last['request_throughput_rps']:.3g} req/s): more load or a higher cap only lengthens the queue")
    else:
        text = (f"not saturated: completed requests/s still rise with the load (top {top:.3g} req/s at "
                f"{key} {knee['load']:g}, the highest measured)")
    return {"saturated": saturated, "roof_rps": top, "knee": knee["load"], "last": last["load"],
            "load_key": last["load_key"], "text": text}


def goodput(levels: list, s) -> tuple[float | None, str]:
    """(requests/s one replica completes within the SLOs, how it was read): the best level's goodput_rps,
    else the throughput of the levels whose P95s meet every P95 SLO given."""
    best, how = None, ""
    for lv in levels:
        g = lv.get("goodput_rps")
        why = "its goodput_rps"
        if g is None:
            checks = [(lv.get(m), getattr(s, m)) for m in ("ttft_p95_ms", "tpot_p95_ms") if getattr(s, m) is not None]
            if not checks or any(v is None for v, _ in checks):
                continue
            g = lv["request_throughput_rps"] if all(v <= slo for v, slo in checks) else 0.0
            why = "its P95s meet the SLOs" if g else ""
        if g and (best is None or g > best):
            best, how = g, f"{lv['load_key'].replace('_', ' ')} {lv['load']:g}: {why}"
    return best, how


def fleet(target_rps: float, per_replica: float, gpus_per_replica: int):
    """The fleet for ``target_rps`` at ``per_replica`` goodput: :func:`inferopt.planning.capacity.plan_instances`
    (the course's capacity math: base = ceil(target / per replica), plus surge and N+1 spares)."""
    from inferopt.planning.capacity import plan_instances

    return plan_instances(target_rps, per_replica, gpus_per_instance=int(gpus_per_replica))


def view(levels: list, s, w, dep) -> dict | None:
    """The saturation view of a diagnosis (``Diagnosis.saturation``), or None without a sweep."""
    r = roof(levels)
    if r is None:
        return None
    g, how = goodput(levels, s)
    out = {**r, "goodput_rps": g, "goodput_from": how, "fleet": None}
    tp = dep.tp if dep is not None else 1
    if g and w.target_rps:
        plan = fleet(w.target_rps, g, tp)
        out["fleet"] = {"instances": plan.instances, "gpus": plan.gpus, "base_instances": plan.base_instances,
                        "working": plan.working, "replicas_now": 1}   # the deployment diagnosed: one replica
    return out


def failing_goodput(sat: dict | None, w) -> dict | None:
    """The goodput shortfall as a failing metric: the replicas in use carry less than the target rate."""
    if not sat or not sat["goodput_rps"] or not w.target_rps or not sat["fleet"]:
        return None
    have = sat["fleet"]["replicas_now"] * sat["goodput_rps"]
    if have >= w.target_rps:
        return None
    return {"metric": "goodput_rps", "value": round(have, 3), "slo": w.target_rps, "ratio": round(w.target_rps / have, 3),
            "branch": "B", "why": f"{sat['fleet']['replicas_now']} replica(s) x {sat['goodput_rps']:g} req/s within "
                                  f"the SLOs < the {w.target_rps:g} req/s to carry"}


def apply(sat: dict | None, actions: list, w, dep) -> None:
    """On a saturated engine: withdraw the cap-raising actions and add the fleet sized on goodput (in place)."""
    if not sat or not sat["saturated"]:
        return
    actions[:] = [a for a in actions if a["id"] not in GONE and a["id"] not in ("add_replicas", "buy_replicas")]
    tp = dep.tp if dep is not None else 1
    f = sat["fleet"]
    if f:
        have = int(w.num_gpus)
        aid = "add_replicas" if f["gpus"] <= have else "buy_replicas"
        text = (f"The engine is saturated at {sat['roof_rps']:.3g} req/s (the throughput roof): size the fleet on "
                f"goodput at the SLO, {sat['goodput_rps']:.3g} req/s per replica of TP={tp}: {f['instances']} "
                f"replicas ({f['gpus']} GPUs) for {w.target_rps:g} req/s, behind a router")
        because = "; ".join(f["working"]) + f" (inferopt.planning.capacity.plan_instances; goodput from {sat['goodput_from']})"
    else:
        aid = "add_replicas" if int(w.num_gpus) >= 2 * tp else "buy_replicas"
        need = "workload.target_rps (the request rate to carry)" if sat["goodput_rps"] else \
            "goodput_rps per sweep level (vllm bench serve --goodput) or the levels' P95s with the SLOs"
        text = (f"The engine is saturated at {sat['roof_rps']:.3g} req/s (the throughput roof): more replicas, not a "
                f"higher --max-num-seqs; give {need} to size the fleet")
        because = sat["text"]
    actions.insert(0, {"id": aid, "condition": "saturation", "text": text, "rank": 0, "flags_add": [],
                       "flags_remove": [], "sized_because": because})
