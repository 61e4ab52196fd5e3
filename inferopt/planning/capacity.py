"""Capacity planning: how many instances for a target load, how available they are, how to roll out.

Seed §6.3 and the canary step of §5.3, as three pure functions that chapter 05 and chapter 06
call (and the ``capacity`` CLI command):

``plan_instances(target_qps, per_instance_qps, surge_instances=1, redundancy="N+1", gpus_per_instance=8)``
    -> :class:`InstancePlan` (``instances``, ``gpus`` and the ``working`` as text lines).
    The §6.3 example: 200 QPS / 50 QPS per instance = 4, + 1 surge, + 1 for N+1 = 6 instances = 48 GPUs.

``availability(instance_availability, instances, required_instances, target=None)``
    -> :class:`Availability`: the probability that at least ``required_instances`` of ``instances``
    independent instances are up (binomial sum), with the downtime it allows per 30-day month and
    per 365-day year, and whether it meets ``target`` (e.g. 0.999).

``allowed_downtime(target)``
    -> dict: minutes per 30-day month and hours per 365-day year that an availability target allows.

``canary_steps(fractions=(0.05, 0.5, 1.0), total_qps=..., ttft_p95_ms=..., tpot_p95_ms=...)``
    -> list of :class:`CanaryStep`: traffic share, QPS the new version takes, how long to hold,
    what to watch (vLLM metric names) and when to roll back.

Units: QPS = requests per second; availability is a fraction in (0, 1); times in minutes/hours
as the field names say. Bad input raises :class:`inferopt.errors.CourseError`.
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
from dataclasses import asdict, dataclass, field

from inferopt.errors import CourseError

MINUTES_PER_MONTH = 30 * 24 * 60      # a 30-day month, the usual SLA convention
HOURS_PER_YEAR = 365 * 24

REDUNDANCY_SPARES = {"none": 0, "N": 0, "N+1": 1, "N+2": 2}


@dataclass(frozen=True)
class InstancePlan:
    """Instances for a target load. ``instances`` = base + surge + redundancy spares."""

    target_qps: float
    per_instance_qps: float
    base_instances: int          # ceil(target_qps / per_instance_qps)
    surge_instances: int         # extra instances held for peaks above the target
    redundancy: str              # "none", "N+1" or "N+2"
    redundancy_instances: int    # spares so that losing that many instances still serves the peak
    instances: int
    gpus_per_instance: int
    gpus: int
    working: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def plan_instances(target_qps: float, per_instance_qps: float, surge_instances: int = 1,
                   redundancy: str = "N+1", gpus_per_instance: int = 8) -> InstancePlan:
    """Answer "how many instances (and GPUs) do I deploy?" for a target QPS.

    ``per_instance_qps`` must be *measured* on one instance at the SLO (a load test that keeps
    TTFT/TPOT P95 under their limits), not read off a datasheet. ``redundancy`` is "none", "N",
    "N+1" or "N+2" (spares added so that that many instances can fail while the rest still carry
    the peak load). Returns an :class:`InstancePlan` whose ``working`` lists each step.
    """
    if not (isinstance(target_qps, (int, float)) and target_qps > 0):
        raise CourseError(f"target_qps must be a positive number of requests/s, got {target_qps!r}.")
    if not (isinstance(per_instance_qps, (int, float)) and per_instance_qps > 0):
        raise CourseError(f"per_instance_qps must be a positive number of requests/s measured on one "
                          f"instance at the SLO, got {per_instance_qps!r}. Run a load test first.")
    if not (isinstance(surge_instances, int) and surge_instances >= 0):
        raise CourseError(f"surge_instances must be a whole number >= 0, got {surge_instances!r}.")
    if redundancy not in REDUNDANCY_SPARES:
        raise CourseError(f"redundancy must be one of {sorted(REDUNDANCY_SPARES)}, got {redundancy!r}.")
    if not (isinstance(gpus_per_instance, int) and gpus_per_instance >= 1):
        raise CourseError(f"gpus_per_instance must be a whole number >= 1, got {gpus_per_instance!r}.")

    ratio = target_qps / per_instance_qps
    # tolerate float noise such as 200/50.000000001
    base = max(1, math.ceil(round(ratio, 9)))
    spares = REDUNDANCY_SPARES[redundancy]
    instances = base + surge_instances + spares
    gpus = instances * gpus_per_instance
    working = [
        f"base: ceil({_num(target_qps)} QPS / {_num(per_instance_qps)} QPS per instance) "
        f"= ceil({ratio:.2f}) = {base} instances",
        f"surge: + {surge_instances} instance(s) for peaks above {_num(target_qps)} QPS",
        f"redundancy {redundancy}: + {spares} instance(s) so that {spares} can fail at peak",
        f"total: {base} + {surge_instances} + {spares} = {instances} instances "
        f"x {gpus_per_instance} GPUs = {gpus} GPUs",
    ]
    return InstancePlan(target_qps=target_qps, per_instance_qps=per_instance_qps,
                        base_instances=base, surge_instances=surge_instances,
                        redundancy=redundancy, redundancy_instances=spares,
                        instances=instances, gpus_per_instance=gpus_per_instance,
                        gpus=gpus, working=working)


def _num(x: float) -> str:
    return f"{x:g}"


def allowed_downtime(target: float) -> dict:
    """Downtime an availability ``target`` (e.g. 0.999) allows: minutes per 30-day month, hours per year."""
    _check_fraction("target", target)
    return {
        "target": target,
        "downtime_minutes_per_month": round((1 - target) * MINUTES_PER_MONTH, 2),
        "downtime_hours_per_year": round((1 - target) * HOURS_PER_YEAR, 2),
    }


@dataclass(frozen=True)
class Availability:
    """Probability that at least ``required_instances`` of ``instances`` are up (independent failures)."""

    instance_availability: float
    instances: int
    required_instances: int
    service_availability: float          # fraction, not rounded
    downtime_minutes_per_month: float    # 30-day month
    downtime_hours_per_year: float
    target: float | None
    meets_target: bool | None
    working: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def availability(instance_availability: float, instances: int, required_instances: int,
                 target: float | None = None) -> Availability:
    """Answer "what availability does this fleet give?".

    Each instance is up with probability ``instance_availability`` (a fraction, e.g. 0.99 = down
    ~7.2 h a month), independently of the others; the service is up while at least
    ``required_instances`` are up. P(up) = sum over k >= required of C(n, k) a^k (1-a)^(n-k).
    Independence is optimistic (one rack, one region, one bad deploy take several down at once);
    the chapter says so.
    """
    _check_fraction("instance_availability", instance_availability)
    if not (isinstance(instances, int) and instances >= 1):
        raise CourseError(f"instances must be a whole number >= 1, got {instances!r}.")
    if not (isinstance(required_instances, int) and 1 <= required_instances <= instances):
        raise CourseError(f"required_instances must be between 1 and instances ({instances}), "
                          f"got {required_instances!r}: you cannot need more instances than you run.")
    if target is not None:
        _check_fraction("target", target)
    a, n, r = instance_availability, instances, required_instances
    terms = [math.comb(n, k) * a**k * (1 - a) ** (n - k) for k in range(r, n + 1)]
    p = sum(terms)
    working = [
        f"P(at least {r} of {n} up) = sum_(k={r}..{n}) C({n},k) x {a:g}^k x {1 - a:.4g}^({n}-k)",
        " + ".join(f"{t:.6f}" for t in terms) + f" = {p:.6f}",
        f"downtime: (1 - {p:.6f}) x {MINUTES_PER_MONTH} min = "
        f"{(1 - p) * MINUTES_PER_MONTH:.1f} min per 30-day month",
    ]
    meets = None if target is None else p >= target
    if target is not None:
        working.append(f"target {target:g}: {'met' if meets else 'NOT met'}")
    return Availability(instance_availability=a, instances=n, required_instances=r,
                        service_availability=p,
                        downtime_minutes_per_month=round((1 - p) * MINUTES_PER_MONTH, 2),
                        downtime_hours_per_year=round((1 - p) * HOURS_PER_YEAR, 2),
                        target=target, meets_target=meets, working=working)


def _check_fraction(name: str, value) -> None:
    if not (isinstance(value, (int, float)) and 0 < value < 1):
        raise CourseError(f"{name} must be a fraction strictly between 0 and 1 (0.999 = 99.9%), got {value!r}.")


@dataclass(frozen=True)
class CanaryStep:
    """One canary stage: share of traffic on the new version and the gate to pass before the next."""

    step: int
    traffic_fraction: float
    qps_on_new_version: float
    hold_minutes: int
    watch: list[str]
    rollback_if: list[str]

    def as_dict(self) -> dict:
        return asdict(self)


def canary_steps(fractions=(0.05, 0.5, 1.0), total_qps: float = 50.0,
                 ttft_p95_ms: float = 500.0, tpot_p95_ms: float = 50.0,
                 hold_minutes=(30, 60, 0), max_error_rate: float = 0.001) -> list[CanaryStep]:
    """Answer "how do I roll the new deployment out?": the canary (灰度发布) stages with their gates.

    ``fractions`` are the traffic shares of the new version (seed: 5% -> 50% -> 100%), strictly
    increasing and ending at 1.0. ``hold_minutes`` is how long each stage runs before the gate is
    read (a course default: long enough for P95 over a few thousand requests at these rates; the
    last stage, 100%, holds until the next release). The watch list names the vLLM metrics that
    show each SLO; ``max_error_rate`` is the failed-request share that triggers a rollback.
    """
    fractions = tuple(fractions)
    hold_minutes = tuple(hold_minutes)
    if not fractions or any(not (0 < f <= 1) for f in fractions):
        raise CourseError(f"fractions must be traffic shares in (0, 1], got {fractions!r}.")
    if any(b <= a for a, b in itertools.pairwise(fractions)) or fractions[-1] != 1.0:
        raise CourseError(f"fractions must increase strictly and end at 1.0 (all traffic), got {fractions!r}.")
    if len(hold_minutes) != len(fractions):
        raise CourseError(f"hold_minutes needs one entry per step ({len(fractions)}), got {hold_minutes!r}.")
    if total_qps <= 0 or ttft_p95_ms <= 0 or tpot_p95_ms <= 0:
        raise CourseError("total_qps, ttft_p95_ms and tpot_p95_ms must be positive.")
    watch = [
        f"TTFT P95 < {_num(ttft_p95_ms)} ms  (vllm:time_to_first_token_seconds, histogram_quantile 0.95)",
        f"TPOT P95 < {_num(tpot_p95_ms)} ms  (vllm:request_time_per_output_token_seconds)",
        f"error rate < {max_error_rate:.1%}  (HTTP 5xx / all requests, from the gateway)",
        "queue: vllm:num_requests_waiting stays near 0; KV use vllm:kv_cache_usage_perc < 0.9",
        "vllm:num_preemptions_total does not grow (KV pressure)",
        "business: success rate and sampled answer quality equal to the old version",
    ]
    rollback = [
        f"TTFT P95 > {_num(ttft_p95_ms)} ms or TPOT P95 > {_num(tpot_p95_ms)} ms for 5 min",
        f"error rate > {max_error_rate:.1%}",
        "any OOM or engine restart",
    ]
    steps = []
    for i, (f, h) in enumerate(zip(fractions, hold_minutes, strict=True), start=1):
        steps.append(CanaryStep(step=i, traffic_fraction=f, qps_on_new_version=round(f * total_qps, 3),
                                hold_minutes=int(h), watch=list(watch), rollback_if=list(rollback)))
    return steps


# ---------------------------------------------------------------- CLI: python -m inferopt capacity
def add_subcommand(subparsers) -> None:
    p = subparsers.add_parser("capacity", help="instances and GPUs for a target QPS, availability, canary steps",
                              description=plan_instances.__doc__)
    p.add_argument("--target-qps", type=float, required=True, help="peak requests/s to serve (e.g. 200)")
    p.add_argument("--per-instance-qps", type=float, required=True,
                   help="requests/s one instance sustains at the SLO, measured (e.g. 50)")
    p.add_argument("--surge", type=int, default=1, help="extra instances for peaks (default 1)")
    p.add_argument("--redundancy", default="N+1", choices=sorted(REDUNDANCY_SPARES))
    p.add_argument("--gpus-per-instance", type=int, default=8)
    p.add_argument("--instance-availability", type=float, default=None,
                   help="fraction of time one instance is up (e.g. 0.99); adds the availability arithmetic")
    p.add_argument("--target-availability", type=float, default=0.999)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cli)


def _cli(args: argparse.Namespace) -> int:
    plan = plan_instances(args.target_qps, args.per_instance_qps, args.surge, args.redundancy,
                          args.gpus_per_instance)
    out = plan.as_dict()
    if args.instance_availability is not None:
        av = availability(args.instance_availability, plan.instances,
                          plan.base_instances, target=args.target_availability)
        out["availability"] = av.as_dict()
    if args.json:
        print(json.dumps(out, indent=2, sort_keys=True))
    else:
        print("\n".join(plan.working))
        if "availability" in out:
            print("\n".join(out["availability"]["working"]))
    return 0


def check_canary_weight(weight) -> float:
    """A canary weight in percent, 0..100 inclusive; CourseError otherwise."""
    try:
        w = float(weight)
    except (TypeError, ValueError):
        raise CourseError(f"canary weight {weight!r}: give a percentage between 0 and 100, e.g. 5") from None
    if not 0.0 <= w <= 100.0:  # NaN fails this too
        raise CourseError(f"canary weight {weight!r} is outside 0-100: give the percentage of traffic for "
                          "the new version, e.g. 5, 50 or 100")
    return w


def check_instances(instances: int, needed: int) -> int:
    """An instance count must be at least N+1 (``needed`` serving the load, plus one spare)."""
    if int(instances) < int(needed) + 1:
        raise CourseError(f"{instances} instance(s) cannot survive losing one: the load needs {needed}, so N+1 "
                          f"means at least {int(needed) + 1}. Raise the instance count.")
    return int(instances)
