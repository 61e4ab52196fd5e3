"""The performance model's view of a diagnosis: which limit binds, whether the model reproduces what
was measured, and what each candidate change would do before it is made.

``model_view(b, s, w, dep, mem)`` runs :func:`inferopt.performance.steady.steady_state` (a few
per-kernel roofline evaluations, well under a millisecond each) for the deployment as measured and
for each candidate change, and answers a dict (``Diagnosis.model``):

- ``predicted`` (TTFT, TPOT, throughput, running, queue, KV use) and ``binding_limit`` / ``why``;
- ``explains``: whether the measured TPOT, throughput and TTFT lie within the model's band of the
  prediction (P95s sit above means, so a measured P95 may exceed the predicted mean by up to 80 %); when only
  the TTFT is off, the measured P95s are judged against the P95s of :func:`inferopt.performance.predict.predict`
  (the same model, its scheduler simulated request by request: the wait for a slot is in the TTFT), so
  ``diagnose`` and ``predict`` agree on the same workload;
  when they do not, ``summary`` says "the model cannot explain this: measure" (profile a step) and
  no candidate is ranked by it;
- ``candidates``: the changes that act on the binding limit, each with its flags, its cost kind
  (free -> accuracy -> hardware, the course's order) and its predicted after-metrics, ordered by
  cost and then by the predicted effect on the worst failing metric.

It needs ``deployment.model`` and a GPU (``deployment.gpu`` or ``workload.gpu_type``) and the
workload's ``prompt_tokens``, ``output_tokens`` and ``concurrency``; without them it answers
``{"ran": False, "why": ...}``. Uses :mod:`inferopt.performance` (never the other way round).
"""
from __future__ import annotations

import math

from inferopt.errors import CourseError
from inferopt.performance import profiles as P
from inferopt.performance.scheduler import SchedulerConfig
from inferopt.performance.steady import steady_state
from inferopt.performance.steptime import Engine
from inferopt.planning import gpu_catalog, hardware, memory
from inferopt.planning import roofline as R
from inferopt.planning.model_specs import load_spec

BAND = {"tpot": (0.75, 1.8), "throughput": (0.6, 1.4), "ttft": (0.4, 2.5)}
# a measured P95 against predict's P95 (the same statistic): the band of the model's calibration, either side
BAND_P95 = {"tpot": (0.6, 1.6), "ttft": (0.4, 2.5)}
COST_ORDER = {"free": 0, "accuracy": 1, "hardware": 2}


def _needs(w, dep) -> str | None:
    missing = [f"deployment.{k}" for k in ("model",) if dep is None or getattr(dep, k) is None]
    if dep is not None and dep.on_cpu:
        return "the model's CPU profile is calibrated on the course's engine only; diagnose runs it for GPUs"
    if dep is None or not (dep.gpu or w.gpu_type):
        missing.append("deployment.gpu (or workload.gpu_type)")
    missing += [f"workload.{k}" for k in ("prompt_tokens", "output_tokens", "concurrency") if getattr(w, k) is None]
    return f"the performance model needs {', '.join(missing)}" if missing else None


def _setup(dep, w, mem, *, spec=None, tp=None, weights=None, kv_dtype=None, eager=None, seqs=None, api=None):
    spec = spec or load_spec(dep.model)
    gid = gpu_catalog.resolve(dep.gpu or w.gpu_type)
    tp = tp or dep.tp
    fmt = memory.resolve_weight_format(spec, weights or dep.weight_format or "auto")
    kv = kv_dtype or dep.kv_dtype
    budget_d, seqs_d = hardware.batch_defaults(gid)
    budget = dep.max_num_batched_tokens or budget_d
    n_seqs = seqs or dep.max_num_seqs or seqs_d
    same = tp == dep.tp and fmt == memory.resolve_weight_format(spec, dep.weight_format or "auto") and kv == dep.kv_dtype
    if same and mem and mem.get("kv_cache_tokens"):
        kv_tokens = int(mem["kv_cache_tokens"])
    else:
        kv_tokens = memory.calculate(spec, gid, tp=tp, weight_format=fmt, kv_dtype=kv,
                                     max_model_len=dep.max_model_len, max_num_seqs=n_seqs,
                                     gpu_memory_utilization=dep.gpu_memory_utilization or
                                     memory.DEFAULT_GPU_MEMORY_UTILIZATION).kv_cache_tokens
    eng = Engine(spec, R.device_roof(gid), P.profile("gpu"), tp=tp, weights=fmt,
                 kv_dtype_bytes=memory.kv_dtype_bytes(kv, dep.dtype or "bfloat16"),
                 enforce_eager=dep.enforce_eager if eager is None else eager)
    cfg = SchedulerConfig(n_seqs, budget, int(kv_tokens), 16, True, float(w.shared_prefix_frac or 0.0) * 0.9,
                          api or dep.api_server_count)
    return eng, cfg, gid, spec


def _run(eng, cfg, w, replicas: int = 1) -> dict:
    conc = max(1, math.ceil(int(w.concurrency) / replicas))
    st = steady_state(eng, cfg, int(w.prompt_tokens), int(w.output_tokens), conc)
    d = st.as_dict()
    d["throughput_tok_s"] *= replicas
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in d.items()}


def _predict_p95(dep, w, cfg, gid, spec) -> dict | None:
    """TTFT and TPOT P95 of the model `predict` runs (:func:`inferopt.performance.predict.predict`: the scheduler
    simulated request by request, so the queue a request waits in is in its TTFT), for the deployment as
    measured; None when predict refuses it."""
    from inferopt.performance.predict import predict

    try:
        p = predict(dep.model, gid, input_tokens=int(w.prompt_tokens), output_tokens=int(w.output_tokens),
                    concurrency=int(w.concurrency), tp=dep.tp, weights=memory.resolve_weight_format(
                        spec, dep.weight_format or "auto"), kv_dtype=dep.kv_dtype, dtype=dep.dtype or "bfloat16",
                    max_num_seqs=cfg.max_num_seqs, max_num_batched_tokens=cfg.max_num_batched_tokens,
                    prefix_hit_fraction=min(0.99, float(w.shared_prefix_frac or 0.0) * 0.9),
                    enforce_eager=dep.enforce_eager, max_model_len=dep.max_model_len,
                    gpu_memory_utilization=dep.gpu_memory_utilization or memory.DEFAULT_GPU_MEMORY_UTILIZATION,
                    api_server_count=dep.api_server_count)
    except CourseError:
        return None
    return {"ttft_p95_ms": p.ttft_p95_ms, "tpot_p95_ms": p.tpot_p95_ms}


def _explains(b, pred, p95: dict | None = None) -> tuple[bool, list]:
    """Whether the measured figures lie within the model's band of its prediction. ``p95``: predict's own P95s;
    a measured P95 is then judged against the predicted P95 (the same statistic, the queue included)."""
    checks = []
    for metric, observed, predicted in (("tpot", b.tpot_p95_ms, pred["tpot_ms"]),
                                        ("throughput", b.throughput_tok_s, pred["throughput_tok_s"]),
                                        ("ttft", b.ttft_p95_ms, pred["ttft_ms"])):
        if observed is None or not predicted:
            continue
        lo, hi = BAND[metric]
        source = "steady state (mean)"
        if p95 is not None and metric in ("ttft", "tpot") and p95.get(f"{metric}_p95_ms"):
            predicted, source = p95[f"{metric}_p95_ms"], "predict (P95, queue simulated)"
            lo, hi = BAND_P95[metric]
        r = observed / predicted
        checks.append({"metric": metric, "observed": observed, "predicted": round(predicted, 2),
                       "ratio": round(r, 2), "within_band": lo <= r <= hi, "source": source})
    return all(c["within_band"] for c in checks), checks


def _candidates(dep, w, mem, base, gid, spec) -> list:
    g = gpu_catalog.entry(gid)
    limit, out = base["binding_limit"], []

    def add(cid, name, kind, flags, **kw):
        try:
            eng, cfg, *_ = _setup(dep, w, mem, spec=spec, **{k: v for k, v in kw.items() if k != "replicas"})
            after = _run(eng, cfg, w, kw.get("replicas", 1))
        except CourseError:
            return
        out.append({"id": cid, "name": name, "cost_kind": kind, "flags": flags, "predicted": after})

    conc = int(w.concurrency)
    if limit == "max_num_seqs":
        n = 1 << max(0, math.ceil(math.log2(conc)))
        add("raise_max_num_seqs", f"raise --max-num-seqs to {n}", "free", ["--max-num-seqs", str(n)], seqs=n)
    if limit == "frontend":
        add("api_servers", "more API server processes", "free", ["--api-server-count", "4"], api=4)
    if dep.enforce_eager:
        add("cuda_graphs", "remove --enforce-eager (CUDA graphs)", "free", [], eager=False)
    tp = dep.tp
    while tp > 1:
        tp //= 2
        try:
            memory.calculate(spec, gid, tp=tp, weight_format=memory.resolve_weight_format(spec, dep.weight_format or "auto"),
                             kv_dtype=dep.kv_dtype, max_model_len=dep.max_model_len)
        except CourseError:
            break
        add(f"replicas_tp{tp}", f"{dep.tp // tp} replicas of TP={tp} instead of one TP={dep.tp}", "free",
            ["--tensor-parallel-size", str(tp)], tp=tp, replicas=dep.tp // tp)
    if limit in ("kv_bandwidth", "kv_cache") and not str(dep.kv_dtype).startswith("fp8"):
        add("fp8_kv", "FP8 KV cache", "accuracy", ["--kv-cache-dtype", "fp8"], kv_dtype="fp8")
    fmt = memory.resolve_weight_format(spec, dep.weight_format or "auto")
    if limit in ("compute", "weights_bandwidth") and fmt in ("bf16", "fp16"):
        if g.get("fp8_dense_tflops"):
            add("fp8_w8a8", "FP8 W8A8 weights (FP8 tensor cores)", "accuracy", ["--quantization", "fp8"], weights="fp8")
        elif g.get("int8_dense_tops") and limit == "compute":
            # another checkpoint, not a flag: the catalog's INT8 W8A8 checkpoint of this model where it ships one
            from inferopt.vllm_oracle.runtime import checkpoint_change, checkpoint_text

            ck = checkpoint_change(dep.model, "int8")
            add("int8_w8a8", f"INT8 W8A8 weights (INT8 tensor cores; {checkpoint_text(ck)})", "accuracy",
                [], weights="int8")
            if out and out[-1]["id"] == "int8_w8a8":
                out[-1]["checkpoint"] = ck
    add("add_replica", "a second replica (twice the GPUs)", "hardware", [], replicas=2)
    return out


def _order(cands, worst: str | None) -> list:
    key = {"ttft_p95_ms": "ttft_ms", "ttft_p99_ms": "ttft_ms", "tpot_p95_ms": "tpot_ms", "tpot_p99_ms": "tpot_ms"}.get(
        worst or "", "tpot_ms")
    sign = -1 if worst == "throughput_tok_s" else 1
    metric = "throughput_tok_s" if worst == "throughput_tok_s" else key
    return sorted(cands, key=lambda c: (COST_ORDER[c["cost_kind"]], sign * c["predicted"][metric]))


def model_view(b, s, w, dep, mem, worst: str | None = None) -> dict:
    """See the module docstring."""
    why = _needs(w, dep)
    if why:
        return {"ran": False, "why": why}
    try:
        eng, cfg, gid, spec = _setup(dep, w, mem)
        base = _run(eng, cfg, w)
    except CourseError as exc:           # the plan does not start (weights do not fit, ...): nothing to time
        return {"ran": False, "why": f"the performance model cannot run this deployment: {exc}"}
    explains, checks = _explains(b, base)
    if not explains and all(c["within_band"] for c in checks if c["metric"] != "ttft"):
        # only the TTFT is off (the steps agree): the steady state has no queue, so judge the measured P95 with
        # the model `predict` runs, which simulates the requests waiting for a slot (issue 50)
        p95 = _predict_p95(dep, w, cfg, gid, spec)
        if p95 is not None:
            explains, checks = _explains(b, base, p95)
    out = {"ran": True, "predicted": base, "binding_limit": base["binding_limit"], "why": base["why"],
           "explains": explains, "checks": checks, "candidates": []}
    if not explains:
        off = "; ".join(f"{c['metric']} measured {c['observed']:g} vs predicted {c['predicted']:g}"
                        for c in checks if not c["within_band"])
        out["summary"] = (f"the model cannot explain this ({off}): measure where the time goes (profile a step, "
                          "e.g. vLLM's torch profiler or nsys) before changing flags")
        return out
    cands = _order(_candidates(dep, w, mem, base, gid, spec), worst)
    out["candidates"] = cands
    first = f"; first change by the model: {cands[0]['name']}" if cands else ""
    out["summary"] = f"binding limit: {base['binding_limit']} ({base['why']}){first}"
    return out
