"""Does a deployment plan meet its own SLOs in the performance model? What ``python -m inferopt plan`` flags.

The planner (:mod:`inferopt.planning.planner`) sits below this package: :mod:`inferopt.performance` reads the
memory calculator and the roofline of :mod:`inferopt.planning`, so the planner cannot call the model without
an upward import. This module does the check and registers the ``plan`` command: the planner's own output,
then one line with the model's TTFT / TPOT P95 at the load each instance carries (the target QPS over the
plan's base instances, spares idle; the scenario's QPS on one instance without a capacity block), the binding
limit and the model's error band. A plan its own model says misses the SLOs gets a ``WARNING`` line (and
``performance_model.meets_slo: false`` in ``--json``).
"""
from __future__ import annotations

import contextlib
import io
import json
from dataclasses import asdict, dataclass

from inferopt.performance.predict import predict
from inferopt.planning import planner


@dataclass
class PlanCheck:
    qps_per_instance: float
    gpus_per_instance: int
    ttft_p95_ms: float
    tpot_p95_ms: float
    ttft_slo_ms: float
    tpot_slo_ms: float
    binding_limit: str
    why: str
    saturated: bool
    meets_slo: bool
    error_band: dict

    def as_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        band = "; ".join(f"{k.upper()} median {self.error_band[k]['median_rel']:.0%}, worst "
                         f"{self.error_band[k]['worst_rel']:.0%}" for k in ("ttft", "tpot") if k in self.error_band)
        head = ("the performance model: this plan meets its SLOs" if self.meets_slo else
                "WARNING: the performance model says this plan misses its SLOs")
        return (f"{head} at {self.qps_per_instance:g} QPS per instance of {self.gpus_per_instance} GPUs: "
                f"TTFT P95 {self.ttft_p95_ms:,.0f} ms (SLO {self.ttft_slo_ms:g}), TPOT P95 {self.tpot_p95_ms:.1f} ms "
                f"(SLO {self.tpot_slo_ms:g}){', the queue grows' if self.saturated else ''}; binding limit: "
                f"{self.binding_limit} ({self.why}); model error on runs not fitted: {band}; a load test decides")


def check_plan(plan: planner.DeploymentPlan) -> PlanCheck:
    """The model's TTFT / TPOT P95 for ``plan`` at the load one instance carries, against the plan's SLOs."""
    req, pl = plan.scenario["requirements"], plan.scenario["plan"]
    tp, pp = pl["tensor_parallel_size"], pl.get("pipeline_parallel_size", 1)
    gpus = req["gpus"] if req["gpus"] % (tp * pp) == 0 else tp * pp
    qps = plan.capacity.target_qps / plan.capacity.base_instances if plan.capacity else req["qps"]
    p = predict(req["model"], req["gpu"], tp=tp, pp=pp, num_gpus=gpus, weights=pl["weight_format"],
                kv_dtype=pl["kv_cache_dtype"], input_tokens=req["input_tokens"], output_tokens=req["output_tokens"],
                request_rate=qps, max_num_seqs=pl["max_num_seqs"],
                max_num_batched_tokens=pl.get("max_num_batched_tokens"),
                enable_chunked_prefill=pl.get("chunked_prefill", True),
                gpu_memory_utilization=pl["gpu_memory_utilization"], max_model_len=plan.memory.max_model_len)
    meets = p.ttft_p95_ms < req["ttft_p95_ms"] and p.tpot_p95_ms < req["tpot_p95_ms"] and not p.saturated
    band = {k: v for k, v in p.error_band.items() if isinstance(v, dict)}
    return PlanCheck(qps, gpus, p.ttft_p95_ms, p.tpot_p95_ms, req["ttft_p95_ms"], req["tpot_p95_ms"],
                     p.binding_limit, p.why, p.saturated, meets, band)


# ---------------------------------------------------------------- CLI: python -m inferopt plan (with the check)
def add_subcommand(subparsers) -> None:
    planner.add_subcommand(subparsers)
    parser = subparsers.choices["plan"]
    inner = parser.get_default("func")
    parser.set_defaults(func=lambda args: _cli(inner, args))


def _cli(inner, args) -> int:
    if not args.json:
        rc = inner(args)
        print()
        from inferopt.i18n import localize
        print(localize(check_plan(planner.make_plan(_scenario(args))).line()))
        return rc
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = inner(args)
    summary = json.loads(out.getvalue())
    summary["performance_model"] = {k: (round(v, 1) if isinstance(v, float) else v)
                                    for k, v in check_plan(planner.make_plan(_scenario(args))).as_dict().items()}
    print(json.dumps(summary, indent=2, sort_keys=True))
    return rc


def _scenario(args):
    sc = args.scenario
    if getattr(args, "gpus_per_node", None) is not None:
        import copy

        sc = copy.deepcopy(planner.load_scenario(sc))
        sc["requirements"]["gpus_per_node"] = args.gpus_per_node
    return sc
