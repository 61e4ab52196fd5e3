"""Fit the performance model's factors on stored runs and measure its error on the runs not fitted.

CPU (``assets/results/perf_cpu_runs.yaml``, the course's own live runs): the same two cores run 2-3x
slower in some notebook sessions than in others, so each session's idle record (the lesson
calibration, one request at a time) fixes that session's two roofs, FLOP/s and bytes/s
(:func:`session_roof` solves the two equations idle TPOT and idle TTFT; on the CPU a kernel's compute
and memory time add up). The global factors, the per-sequence cost of a step and the front-end's cost
per request, are fitted on the runs marked ``fit: true`` (one session's sweeps); every other run is a
prediction from its own session's idle record.

GPU (``assets/results/perf_gpu_runs.yaml``, cited public runs): the efficiency of the memory roof and
the fixed step overhead are fitted on the runs marked ``fit: true``; the error is reported on the
others. The all-reduce's bandwidth per direction and latency per call are cited figures of
``assets/gpus.yaml`` ``links``, not fitted. Those runs are decode-bound bursts of 10 requests, so they
cannot pin the compute efficiency (prefill): :mod:`inferopt.performance.measured` fits it on measured
runs at load (``assets/performance/measured_runs_h200.csv``) and reports the error on the rows it did
not fit.

:func:`fit_cpu` / :func:`fit_gpu` answer a :class:`Calibration` (the fitted profile, one
:class:`RunError` per run, and the median / worst relative error per metric on the runs not fitted).
``python -m inferopt.performance.calibration [--write]`` prints both and, with ``--write``, stores the
factors and errors in ``assets/performance/profiles.yaml``.
"""
from __future__ import annotations

import argparse
import itertools
import math
import statistics
import sys
from dataclasses import dataclass, field

from inferopt import assets
from inferopt.errors import CourseError
from inferopt.performance import profiles as P
from inferopt.performance.predict import predict
from inferopt.planning import platform_defaults
from inferopt.planning import roofline as R
from inferopt.planning.model_specs import load_spec

CPU_MODEL = "smollm2-135m-instruct"
CPU_KV_BYTES = 1 << 30           # the course engine's --kv-cache-memory-bytes (1 GiB)
CPU_MAX_MODEL_LEN = 2048
METRICS = {"ttft": ("ttft", "ttft_ms"), "ttft_p95": ("ttft", "ttft_p95_ms"), "tpot": ("tpot", "tpot_ms"),
           "tpot_p50": ("tpot", "tpot_p50_ms"), "tpot_p95": ("tpot", "tpot_p95_ms"),
           "throughput": ("throughput", "throughput_tok_s")}


@dataclass
class RunError:
    run: str
    fit: bool
    measured: dict
    predicted: dict
    rel_error: dict                   # metric -> |predicted - measured| / measured
    binding_limit: str = ""


@dataclass
class Calibration:
    profile: P.Profile
    runs: list = field(default_factory=list)
    error: dict = field(default_factory=dict)     # "tpot"/"ttft"/"throughput" -> {median, worst, n}

    def table(self) -> str:
        lines = [f"{'run':24s} {'fit':4s} " + "  ".join(f"{m:>22s}" for m in METRICS) + "  limit"]
        for r in self.runs:
            cells = []
            for m in METRICS:
                if m in r.measured:
                    cells.append(f"{r.measured[m]:8.1f}/{r.predicted[m]:8.1f} {r.rel_error[m]:4.0%}")
                else:
                    cells.append(" " * 22)
            lines.append(f"{r.run:24s} {'yes' if r.fit else 'no':4s} " + "  ".join(cells) + f"  {r.binding_limit}")
        for m, e in self.error.items():
            lines.append(f"{m}: median {e['median']:.0%}, worst {e['worst']:.0%} over {e['n']} predicted values")
        return "\n".join(lines)


def _summary(runs: list) -> dict:
    out = {}
    for group in ("tpot", "ttft", "throughput"):
        errs = [e for r in runs if not r.fit for m, e in r.rel_error.items() if METRICS[m][0] == group]
        if errs:
            out[group] = {"median": round(statistics.median(errs), 3), "worst": round(max(errs), 3), "n": len(errs)}
    return out


def _score(runs: list) -> float:
    logs = [abs(math.log(r.predicted[m] / r.measured[m])) for r in runs for m in r.measured
            if r.predicted.get(m) and r.predicted[m] > 0]
    return statistics.mean(logs) if logs else math.inf


def _compare(run_id: str, fit: bool, rec: dict, pred) -> RunError:
    d = pred.as_dict()
    measured = {m: float(rec[m]) for m in METRICS if m in rec}
    predicted = {m: float(d[METRICS[m][1]]) for m in measured}
    rel = {m: abs(predicted[m] - measured[m]) / measured[m] for m in measured}
    return RunError(run_id, fit, measured, predicted, rel, pred.binding_limit)


# ---------------------------------------------------------------------------------------------- CPU
def session_roof(profile: P.Profile, idle: dict) -> R.Roof:
    """The CPU's roofs in one session, from its idle TTFT and TPOT (see the module docstring)."""
    spec = load_spec(CPU_MODEL)
    unit = R.custom_roof("unit", 1.0, 1.0)
    kw = dict(weights="fp32", kv_dtype_bytes=4.0, act_bytes=4.0, overlap=False)
    i, o = idle["input_tokens"], idle["output_tokens"]
    dec = R.step_roofline(spec, unit, decode_batch=1, context_tokens=i + o / 2, **kw)
    pre = R.step_roofline(spec, unit, prefill_tokens=i, prefill_requests=1, **kw)
    fixed = profile.step_overhead_ms * 1e-3 + profile.per_seq_step_us * 1e-6
    df, db = sum(k.flops for k in dec.kernels), sum(k.bytes for k in dec.kernels)
    pf, pb = sum(k.flops for k in pre.kernels), sum(k.bytes for k in pre.kernels)
    t_dec = idle["tpot_p50"] * 1e-3 - fixed
    t_pre = idle["ttft_p50"] * 1e-3 - fixed - profile.frontend_per_request_ms * 1e-3
    det = df * pb - pf * db
    x = (t_dec * pb - t_pre * db) / det          # seconds per FLOP
    y = (df * t_pre - pf * t_dec) / det          # seconds per byte
    if not (x > 0 and y > 0):
        raise CourseError(f"idle TTFT {idle['ttft_p50']} ms and TPOT {idle['tpot_p50']} ms leave no positive "
                          "FLOP/s and bytes/s with these overheads: the profile's fixed costs are too large")
    return R.custom_roof("cpu", 1 / x, 1 / y, "fp32")


def _cpu_runs(profile: P.Profile, sessions: list, only_fit: bool = False) -> list:
    out = []
    for s in sessions:
        roof = session_roof(profile, s["idle"])
        for rec in s["runs"]:
            if only_fit and not rec["fit"]:
                continue
            pred = predict(CPU_MODEL, "cpu", input_tokens=rec["input_tokens"], output_tokens=rec["output_tokens"],
                           concurrency=rec.get("concurrency"), request_rate=rec.get("request_rate"),
                           num_requests=rec["requests"], dtype=platform_defaults.CPU.dtype, kv_cache_memory_bytes=CPU_KV_BYTES,
                           max_model_len=CPU_MAX_MODEL_LEN, profile=profile, roof=roof)
            out.append(_compare(rec["id"], rec["fit"], rec, pred))
    return out


CPU_GRID = {"per_seq_step_us": [500, 1000, 1500, 2000, 2500, 3000, 3500],
            "frontend_per_request_ms": [0.0, 10.0, 20.0, 40.0]}


def fit_cpu(records: dict | None = None, start: P.Profile | None = None) -> Calibration:
    """Fit the CPU profile's per-sequence and per-request costs on the ``fit: true`` runs; errors on the rest."""
    sessions = (records or assets.load("results/perf_cpu_runs.yaml"))["sessions"]
    base = start or P.profile("cpu")
    best, best_score = None, math.inf
    for s_us, fe in itertools.product(CPU_GRID["per_seq_step_us"], CPU_GRID["frontend_per_request_ms"]):
        cand = base.with_(per_seq_step_us=float(s_us), frontend_per_request_ms=float(fe))
        try:
            score = _score(_cpu_runs(cand, sessions, only_fit=True))
        except CourseError:
            continue
        if score < best_score:
            best, best_score = cand, score
    if best is None:
        raise CourseError("no CPU factors on the grid reproduce the idle runs; widen CPU_GRID")
    runs = _cpu_runs(best, sessions)
    roofs = [session_roof(best, s["idle"]) for s in sessions]
    med = {"peak_flops": statistics.median(r.peak["fp32"] for r in roofs),
           "bandwidth": statistics.median(r.bandwidth for r in roofs)}
    n_fit = sum(r.fit for r in runs)
    prof = best.with_(roof={k: float(f"{v:.3g}") for k, v in med.items()},
                      fitted_on=f"{n_fit} runs of assets/results/perf_cpu_runs.yaml (fit: true); "
                                "each session's roofs from its idle record")
    cal = Calibration(prof, runs, _summary(runs))
    cal.profile = prof.with_(error=cal.error)
    return cal


# ---------------------------------------------------------------------------------------------- GPU
def _gpu_runs(profile: P.Profile, data: dict, only_fit: bool = False) -> list:
    out = []
    for rec in data["runs"]:
        if only_fit and not rec["fit"]:
            continue
        ins = rec.get("inputs") or data["llama3_inputs"]
        if len(ins) != len(rec["outputs"]):
            raise CourseError(f"{rec['id']}: {len(ins)} prompt lengths but {len(rec['outputs'])} output lengths")
        pairs = [(i, o) for i, o in zip(ins, rec["outputs"], strict=True) if o > 0]
        pred = predict(rec["model"], rec["gpu"], input_tokens=max(i for i, _ in pairs),
                       output_tokens=max(o for _, o in pairs), concurrency=len(pairs), num_requests=len(pairs),
                       lengths=pairs, tp=rec["tp"], weights=rec["weights"], kv_dtype=rec.get("kv_dtype", "auto"),
                       max_num_seqs=rec.get("max_num_seqs", 256), max_model_len=rec["max_model_len"],
                       num_scheduler_steps=rec.get("num_scheduler_steps", 1), profile=profile)
        out.append(_compare(rec["id"], rec["fit"], rec["measured"], pred))
    return out


GPU_GRID = {"memory": [0.65, 0.75, 0.85], "step_overhead_ms": [0.5, 1.5, 3.0]}


def fit_gpu(records: dict | None = None, start: P.Profile | None = None) -> Calibration:
    """Fit the GPU profile (roof efficiencies, step overhead, per-sequence cost) on the ``fit: true`` runs."""
    runs = records or assets.load("results/perf_gpu_runs.yaml")
    base = start or P.profile("gpu")
    best, best_score = None, math.inf
    for mem, ov in itertools.product(*GPU_GRID.values()):
        cand = base.with_(efficiency={**base.efficiency, "memory": mem}, step_overhead_ms=ov)
        score = _score(_gpu_runs(cand, runs, only_fit=True))
        if score < best_score:
            best, best_score = cand, score
    out = _gpu_runs(best, runs)
    prof = best.with_(fitted_on=f"{sum(r.fit for r in out)} runs of assets/results/perf_gpu_runs.yaml (fit: true)")
    cal = Calibration(prof, out, _summary(out))
    cal.profile = prof.with_(error=cal.error)
    return cal


# ----------------------------------------------------------------------------------------- storing
def _entry(p: P.Profile) -> str:
    e = p.efficiency
    lines = [f"  {p.kind}:", f"    fitted_on: \"{p.fitted_on}\""]
    if p.roof:
        lines.append(f"    roof: {{peak_flops: {p.roof['peak_flops']:.3e}, bandwidth: {p.roof['bandwidth']:.3e}}}")
    lines += [f"    efficiency: {{compute: {e['compute']}, memory: {e['memory']}, network: {e['network']}}}",
              f"    step_overhead_ms: {p.step_overhead_ms}", f"    eager_launch_us_per_layer: {p.eager_launch_us_per_layer}",
              f"    per_seq_step_us: {p.per_seq_step_us}", f"    allreduce_latency_us: {p.allreduce_latency_us}",
              f"    overlap: {'true' if p.overlap else 'false'}",
              f"    closed_loop_spread: {'true' if p.closed_loop_spread else 'false'}",
              *([f"    tp_sync_us_per_doubling: {p.tp_sync_us_per_doubling}"] if p.tp_sync_us_per_doubling else []),
              f"    frontend: {{per_request_ms: {p.frontend_per_request_ms}, per_token_us: {p.frontend_per_token_us}}}"]
    err = ", ".join(f"{m}: {{median: {v['median']}, worst: {v['worst']}, n: {v['n']}}}" for m, v in p.error.items())
    lines.append(f"    error: {{{err}}}")
    return "\n".join(lines)


HEADER = """# The performance model's factors (inferopt/performance/profiles.py reads them; schema beside this file).
# Written by `python -m inferopt.performance.calibration --write`, which fits them on the runs marked
# `fit: true` in assets/results/perf_gpu_runs.yaml (GPU) and assets/results/perf_cpu_runs.yaml (CPU), and
# stores the relative error on the other runs; tests/test_performance_calibration.py re-fits and compares.
# The GPU's compute efficiency is fitted on measured runs at load (python -m inferopt.performance.measured --fit:
# Llama-3.1-70B at TP 2 and 8 of assets/performance/measured_runs_h200.csv; tests/test_performance_measured.py).
# Stated, not fitted: the GPU's per-sequence cost, eager_launch_us_per_layer (~12 kernel launches of ~5 us per
# layer without CUDA graphs) and the front-end's per-token cost. A GPU of the catalog takes its all-reduce's
# bandwidth per direction, latency per call and efficiency from assets/gpus.yaml `links` (cited); the profile's
# allreduce_latency_us and network efficiency serve only a device outside the catalog. The GPU's
# tp_sync_us_per_doubling (per step, x log2(tp): the executor keeping its TP workers in lockstep) is fitted on the
# measured TP 2 and TP 8 runs with the run length (python -m inferopt.performance.measured --fit); TP 4 is held out.
profiles:
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m inferopt.performance.calibration")
    ap.add_argument("--write", action="store_true", help="store the fitted factors in assets/performance/profiles.yaml")
    ap.add_argument("--only", choices=["cpu", "gpu"], default=None)
    a = ap.parse_args(argv)
    cals = {}
    for kind, fn in (("gpu", fit_gpu), ("cpu", fit_cpu)):
        if a.only in (None, kind):
            cals[kind] = fn()
            print(f"== {kind}\n{cals[kind].table()}\n")
    if a.write:
        profs = {k: cals[k].profile if k in cals else P.profile(k) for k in ("gpu", "cpu")}
        assets.path("performance/profiles.yaml").write_text(HEADER + "\n".join(_entry(p) for p in profs.values()) + "\n")
        assets.clear_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
