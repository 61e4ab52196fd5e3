"""Does one instance hold the plan's rate? The argument that needs least first, then the model over what it does not know.

1. **Little's law** with the plan's own numbers (:class:`inferopt.planning.planner.LittlesLaw`): at λ requests/s,
   ``--max-num-seqs N`` holds only while the mean time in the system stays under N / λ. Nothing else is assumed.
2. **The performance model** (:func:`inferopt.performance.predict.predict`), for each layout of the instance's GPUs the
   memory calculator lets start, with every factor the model *states* rather than fits varied over the range
   ``assets/performance/stated_ranges.yaml`` cites: the highest rate a layout holds is found with every factor at
   its slow end, at its nominal value and at its fast end, and the range is the lowest to the highest of the three
   (the corners span it where the model is monotone in each factor; a layout whose KV cache runs full, with
   preemption, need not be, so the nominal point counts too). The verdict on the plan's rate is the range, never
   one point: "holds" only where the whole range holds it, "misses" only where none of it does, and otherwise
   "the model cannot say".
3. A rate whose queue grows without bound (the model's ``saturated``) is reported as "the queue grows": its
   latency is set only by how long the simulation ran, so it is never quoted as a multiple of the SLO.

:func:`check` answers all three for a plan; :func:`ship` turns the answer into the command to ship and its fleet;
:func:`shipped_plan` makes that a plan again (what chapter 06b's Kubernetes manifests run).
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, replace
from functools import lru_cache

from inferopt import assets
from inferopt.errors import CourseError
from inferopt.performance import profiles as P
from inferopt.performance.predict import predict
from inferopt.planning import capacity as cap
from inferopt.planning import memory, planner, roofline

STEP_QPS = 5                   # the grid of request rates the highest holding rate is found on


FASTER_WHEN_LARGER = ("compute_efficiency", "allreduce_efficiency")   # the others: faster when smaller


def check_ranges(factors: dict) -> dict:
    """``factors`` if every range runs from its slow end through the nominal value to its fast end; else CourseError."""
    for name, r in factors.items():
        order = (r["slow"], r["nominal"], r["fast"])
        ok = order == tuple(sorted(order)) if name in FASTER_WHEN_LARGER else order == tuple(sorted(order, reverse=True))
        if not ok:
            bigger = "larger" if name in FASTER_WHEN_LARGER else "smaller"
            raise CourseError(f"assets/performance/stated_ranges.yaml: {name} runs slow {r['slow']:g}, nominal "
                              f"{r['nominal']:g}, fast {r['fast']:g}; the model is faster when it is {bigger}, so "
                              "order the three from the slow end to the fast end")
    return factors


@lru_cache(maxsize=1)
def stated_ranges() -> dict:
    """{factor: {'slow', 'nominal', 'fast', 'source'}} from ``assets/performance/stated_ranges.yaml``, checked."""
    return check_ranges(assets.load("performance/stated_ranges.yaml")["factors"])


def _setting(gpu: str, end: str) -> tuple[P.Profile, roofline.Roof]:
    """The GPU profile and roof with every stated factor at ``end`` ('slow', 'nominal' or 'fast')."""
    return _with_factors(gpu, {k: v[end] for k, v in stated_ranges().items()})


def _with_factors(gpu: str, f: dict) -> tuple[P.Profile, roofline.Roof]:
    """The GPU profile and roof with the stated factors ``f`` ({factor: value})."""
    prof = P.profile("gpu")
    prof = prof.with_(efficiency={**prof.efficiency, "compute": f["compute_efficiency"]},
                      per_seq_step_us=f["per_seq_step_us"], frontend_per_token_us=f["frontend_per_token_us"])
    roof = replace(roofline.device_roof(gpu), allreduce_latency_s=f["allreduce_latency_us"] * 1e-6,
                   allreduce_efficiency=f["allreduce_efficiency"])
    return prof, roof


@dataclass
class Layout:
    tp: int
    replicas: int
    qps: dict                  # {'slow', 'nominal', 'fast'}: the highest grid rate both SLOs hold at (0: none)
    at_plan: dict              # the nominal prediction at the plan's rate: ttft/tpot P95, limit, queue grows
    kv_requests: float         # requests of the workload's length one replica's KV cache holds

    @property
    def name(self) -> str:
        return f"TP={self.tp} x {self.replicas}"

    @property
    def low(self) -> int:
        return min(self.qps.values())

    @property
    def high(self) -> int:
        return max(self.qps.values())

    def verdict(self, rate: float) -> str:
        if self.low >= rate:
            return "holds"
        if self.high < rate:
            return "misses"
        return "the model cannot say"


@dataclass
class CapacityCheck:
    rate: float                # the plan's requests/s per instance
    gpus: int                  # GPUs per instance
    little: planner.LittlesLaw
    layouts: list[Layout]
    sensitivity: dict = field(default_factory=dict)   # TP of the plan: {factor: (qps at slow end, at fast end)}
    slo: dict = field(default_factory=dict)

    def layout(self, tp: int) -> Layout:
        return next(lay for lay in self.layouts if lay.tp == tp)


def _predict(req: dict, pl: dict, tp: int, gpus: int, rate: float, prof, roof):
    return predict(req["model"], req["gpu"], tp=tp, num_gpus=gpus, request_rate=rate, weights=pl["weight_format"],
                   kv_dtype=pl["kv_cache_dtype"], input_tokens=req["input_tokens"],
                   output_tokens=req["output_tokens"], max_num_seqs=pl["max_num_seqs"],
                   max_num_batched_tokens=pl.get("max_num_batched_tokens"),
                   gpu_memory_utilization=pl["gpu_memory_utilization"], profile=prof, roof=roof)


def _meets(p, slo) -> bool:
    return p.ttft_p95_ms < slo["ttft"] and p.tpot_p95_ms < slo["tpot"] and not p.saturated


def _highest(req, pl, tp, gpus, prof, roof, slo, top: int) -> int:
    """The highest multiple of STEP_QPS up to ``top`` at which both SLOs hold (the model is monotone in the rate:
    bisection on the grid); 0 when even STEP_QPS misses."""
    lo, hi = 0, top // STEP_QPS
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _meets(_predict(req, pl, tp, gpus, mid * STEP_QPS, prof, roof), slo):
            lo = mid
        else:
            hi = mid - 1
    return lo * STEP_QPS


def check(plan: planner.DeploymentPlan, layouts=(8, 4, 2, 1), sensitivity: bool = True) -> CapacityCheck:
    """Little's law, then the model's range of the highest rate each layout holds (see the module docstring)."""
    req, pl = plan.scenario["requirements"], plan.scenario["plan"]
    gpus, rate = req["gpus"], plan.capacity.per_instance_qps if plan.capacity else req["qps"]
    slo = {"ttft": req["ttft_p95_ms"], "tpot": req["tpot_p95_ms"]}
    top = int(math.ceil(2 * rate / STEP_QPS) * STEP_QPS)
    settings = {end: _setting(req["gpu"], end) for end in ("slow", "nominal", "fast")}
    found = []
    for tp in layouts:
        if gpus % tp:
            continue
        try:
            m = memory.calculate(req["model"], req["gpu"], tp=tp, weight_format=pl["weight_format"],
                                 kv_dtype=pl["kv_cache_dtype"], gpu_memory_utilization=pl["gpu_memory_utilization"],
                                 max_num_seqs=pl["max_num_seqs"], max_num_batched_tokens=pl.get("max_num_batched_tokens"),
                                 input_tokens=req["input_tokens"], output_tokens=req["output_tokens"])
        except CourseError:
            continue                                   # does not start: not a layout
        qps = {end: _highest(req, pl, tp, gpus, *settings[end], slo, top) for end in settings}
        p = _predict(req, pl, tp, gpus, rate, *settings["nominal"])
        at = {"ttft_p95_ms": p.ttft_p95_ms, "tpot_p95_ms": p.tpot_p95_ms, "tpot_ms": p.tpot_ms,
              "limit": p.binding_limit, "queue_grows": p.saturated, "meets": _meets(p, slo)}
        found.append(Layout(tp, gpus // tp, qps, at, m.max_concurrency_workload))
    if not found:
        raise CourseError(f"{req['model']} on {gpus} x {req['gpu']}: no layout starts; see the memory calculator")
    out = CapacityCheck(rate, gpus, plan.littles_law, found, slo=slo)
    tp0 = pl["tensor_parallel_size"]
    if sensitivity and any(lay.tp == tp0 for lay in found):
        nominal = {k: v["nominal"] for k, v in stated_ranges().items()}
        for factor, r in stated_ranges().items():
            row = []
            for end in ("slow", "fast"):
                prof, roof = _with_factors(req["gpu"], {**nominal, factor: r[end]})
                row.append(_highest(req, pl, tp0, gpus, prof, roof, slo, top))
            out.sensitivity[factor] = tuple(row)
    return out


@dataclass
class Ship:
    layout: Layout
    per_instance_qps: float    # the rate sized on: the low end of the layout's range
    max_num_seqs: int
    commands: list[str]        # one launch command per replica of an instance
    fleet: cap.InstancePlan
    others: list[tuple[str, str]]   # (layout, why not)


def ship(plan: planner.DeploymentPlan, chk: CapacityCheck) -> Ship:
    """The layout to ship: the one whose range starts highest (ties: fewer GPUs per replica, the smaller failure
    unit); sized on that low end, so the fleet holds whatever the stated factors turn out to be within their
    ranges; ``--max-num-seqs`` from Little's law at that rate with the model's mean time
    in the system, rounded up to 16 and never below the plan's; one command per replica."""
    req, pl, c = plan.scenario["requirements"], plan.scenario["plan"], plan.scenario["capacity"]
    best = max(chk.layouts, key=lambda lay: (lay.low, -lay.tp))
    if best.low <= 0:
        raise CourseError("no layout holds the SLOs at any rate even at the slow corner: change the hardware or the SLO")
    per_replica = best.low / best.replicas
    prof, roof = _setting(req["gpu"], "nominal")
    p = _predict(req, {**pl, "max_num_seqs": None}, best.tp, best.tp, per_replica, prof, roof)   # one replica, uncapped
    in_flight = per_replica * p.e2e_ms / 1000                       # Little: L = lambda x mean W
    seqs = max(pl["max_num_seqs"], int(math.ceil(2 * in_flight / 16) * 16))   # twice the mean: room for bursts
    commands = []
    for r in range(best.replicas):
        lc = planner.launch_command(pl["checkpoint"], gpu=req["gpu"], tensor_parallel_size=best.tp,
                                    kv_cache_dtype=pl["kv_cache_dtype"],
                                    max_num_batched_tokens=pl.get("max_num_batched_tokens"), max_num_seqs=seqs,
                                    gpu_memory_utilization=pl["gpu_memory_utilization"], port=8000 + r)
        first = r * best.tp
        devices = ",".join(str(d) for d in range(first, first + best.tp))
        commands.append(f"CUDA_VISIBLE_DEVICES={devices} " + " ".join(lc.serve_argv))
    fleet = cap.plan_instances(c["target_qps"], best.low, surge_instances=c["surge_instances"],
                               redundancy=c["redundancy"], gpus_per_instance=chk.gpus)
    others = []
    for lay in chk.layouts:
        if lay is best:
            continue
        if lay.low == 0:
            why = "misses the SLOs at every rate somewhere in its range"
        elif lay.low < best.low:
            why = (f"its range starts at {lay.low:g} QPS against {best.low:g}; "
                   f"binding limit at {chk.rate:g} QPS: {lay.at_plan['limit']}")
        else:
            why = f"holds as much ({lay.low:g} QPS) with more GPUs per replica: a larger failure unit"
        others.append((lay.name, why))
    return Ship(best, best.low, seqs, commands, fleet, others)


def shipped_plan(plan: planner.DeploymentPlan, s: Ship) -> planner.DeploymentPlan:
    """The plan that ships, checked again by the planner: ``plan``'s scenario with the shipped layout's
    ``--tensor-parallel-size`` and ``--max-num-seqs`` and the per-instance rate the fleet was sized on. Its command is
    one replica's (an instance of the plan's GPUs runs ``s.layout.replicas`` of them: what
    :func:`inferopt.planning.k8s.replicas_per_instance` turns into pods); its fleet is ``s.fleet``, else CourseError."""
    sc = copy.deepcopy(plan.scenario)
    sc["plan"].update(tensor_parallel_size=s.layout.tp, max_num_seqs=s.max_num_seqs)
    sc["capacity"]["per_instance_qps"] = s.per_instance_qps
    out = planner.make_plan(sc)
    if (out.capacity.instances, out.capacity.gpus) != (s.fleet.instances, s.fleet.gpus):
        raise CourseError(f"the shipped plan's fleet ({out.capacity.instances} instances, {out.capacity.gpus} GPUs) "
                          f"is not the one ship() sized ({s.fleet.instances}, {s.fleet.gpus}): report this as a bug")
    return out
