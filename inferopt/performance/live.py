"""The performance model on the course's live CPU engine: calibrated from a notebook's own idle run,
predicting each branch of chapter 2b before it runs, and compared with what the branch measured.

    roof = session_roof_from(cal)                   # cal: inferopt.bench.lesson.Calibration of this engine
    before = cpu_predict(roof, input_tokens=100, output_tokens=32, concurrency=1, num_requests=2)
    rows = [effect_row("B", "concurrency 1 -> 8", "throughput_tok_s", p1, p8, m1, m8), ...]

The session's two roofs (FLOP/s, bytes/s) come from :func:`inferopt.performance.calibration.session_roof`,
the same path the CPU calibration takes for every stored session: the idle TTFT and TPOT of this
notebook's baseline engine fix them; the per-sequence and front-end costs are the stored CPU profile's
(fitted on the runs of ``assets/results/perf_cpu_runs.yaml`` marked ``fit: true``).

:func:`effect_row` compares an *effect*: the predicted after/before ratio of one metric against the
measured one, and each level's relative error. The model's error on one level can be large while the
effect is right (the session's speed cancels in a ratio), and the other way round.
"""
from __future__ import annotations

import math

from inferopt.errors import CourseError
from inferopt.performance import profiles as P
from inferopt.performance.calibration import CPU_KV_BYTES, CPU_MAX_MODEL_LEN, CPU_MODEL, session_roof
from inferopt.performance.predict import LIMITS, Prediction, predict
from inferopt.planning import platform_defaults
from inferopt.planning import roofline as R


def session_roof_from(cal) -> R.Roof:
    """This engine's roofs from its idle calibration (``ttft_ms``/``tpot_ms`` P50, ``input_tokens``, ``output_tokens``)."""
    idle = {"input_tokens": cal.input_tokens, "output_tokens": cal.output_tokens,
            "ttft_p50": cal.ttft_ms, "tpot_p50": cal.tpot_ms}
    return session_roof(P.profile("cpu"), idle)


def cpu_predict(roof: R.Roof, **kw) -> Prediction:
    """:func:`predict` for the course's CPU engine (SmolLM2-135M, float32, a 1 GiB KV cache by default)."""
    kw.setdefault("kv_cache_memory_bytes", CPU_KV_BYTES)
    kw.setdefault("max_model_len", CPU_MAX_MODEL_LEN)
    return predict(CPU_MODEL, "cpu", dtype=platform_defaults.CPU.dtype, roof=roof, **kw)


def sweep(roof: R.Roof, concurrencies, *, input_tokens: int, output_tokens: int, rounds: int = 2) -> dict:
    """One prediction per concurrency, ``rounds`` x concurrency requests each (as ``concurrency_sweep`` sends)."""
    return {c: cpu_predict(roof, input_tokens=input_tokens, output_tokens=output_tokens, concurrency=c,
                           num_requests=rounds * c) for c in concurrencies}


def interference(roof: R.Roof, *, budget: int, streams: int = 4, stream_input_tokens: int = 100,
                 stream_output_tokens: int = 64, long_prompt_tokens: int = 1500, long_output_tokens: int = 8,
                 arrive_after_tokens: int = 16) -> dict:
    """Branch D's scene (``prefill_interference_run``): ``streams`` decode streams from t=0, one long prompt
    sent once every stream has ``arrive_after_tokens`` tokens, under the token budget ``budget``. The send time
    is the model's own: the streams alone, predicted first, give the time of their ``arrive_after_tokens``-th
    token (TTFT + (k - 1) x TPOT, the latest stream's). The ITL percentiles are over every decoding request's
    gaps (the long request's few included); ``long_ttft_ms`` is the long prompt's own TTFT, ``long_sent_ms``
    when it was sent."""
    if not 1 <= arrive_after_tokens < stream_output_tokens:
        raise CourseError(f"arrive_after_tokens={arrive_after_tokens}: give 1 to {stream_output_tokens - 1}")
    alone = cpu_predict(roof, input_tokens=stream_input_tokens, output_tokens=stream_output_tokens,
                        lengths=[(stream_input_tokens, stream_output_tokens)] * streams, arrivals=[0.0] * streams,
                        max_num_batched_tokens=int(budget))
    sent_ms = max(r["ttft_ms"] + (arrive_after_tokens - 1) * (r["tpot_ms"] or 0.0) for r in alone.requests)
    lengths = [(stream_input_tokens, stream_output_tokens)] * streams + [(long_prompt_tokens, long_output_tokens)]
    p = cpu_predict(roof, input_tokens=long_prompt_tokens, output_tokens=stream_output_tokens, lengths=lengths,
                    arrivals=[0.0] * streams + [sent_ms / 1000], max_num_batched_tokens=int(budget))
    return {"itl_p50_ms": p.itl_p50_ms, "itl_p99_ms": p.itl_p99_ms, "long_ttft_ms": p.requests[-1]["ttft_ms"],
            "long_sent_ms": sent_ms, "binding_limit": p.binding_limit, "why": p.why, "prediction": p}


def tuning_metrics(roof: R.Roof, start, args, kv_cache_bytes: int) -> dict:
    """What :func:`inferopt.diagnosis.tuning.measure` would read for a starting point's workload (``start``:
    a ``tuning.Start``) under ``args`` and a KV budget, predicted: the slowest request's TTFT and TPOT in the
    P95 keys (the loop's runs have fewer than 45 requests), preemptions, the queue, the KV use and, with
    prefix caching on, the share of prompt tokens found cached (every run is primed with the shared prompt)."""
    args = list(args)
    r = start.run
    prefix_on = "--no-enable-prefix-caching" not in args
    kw = {}
    for flag, key in (("--max-num-batched-tokens", "max_num_batched_tokens"), ("--max-num-seqs", "max_num_seqs")):
        if flag in args:
            kw[key] = int(args[args.index(flag) + 1])
    hit = r["shared_prefix"] / r["prompt"] if prefix_on and r["shared_prefix"] else 0.0
    p = cpu_predict(roof, input_tokens=r["prompt"], output_tokens=r["output"], concurrency=r["concurrency"],
                    num_requests=r["n"], kv_cache_memory_bytes=int(kv_cache_bytes), max_model_len=start.max_model_len,
                    prefix_hit_fraction=hit, **kw)
    m = {"ttft_p95_ms": p.ttft_max_ms, "tpot_p95_ms": p.tpot_max_ms, "n": r["n"], "preemptions": p.preemptions,
         "queue_len": math.ceil(p.queue_len), "kv_cache_usage": min(1.0, p.kv_usage_max),
         "binding_limit": p.binding_limit, "why": p.why}
    if prefix_on:
        m["prefix_cache_hit_rate"] = hit
    return m


# ---------------------------------------------------------------- relations a prediction must satisfy
# What chapter 2b asserts about the model's own answers before a branch runs: relations that hold for
# any session's roofs (never a time against a fixed number). Each raises CourseError naming the relation.
def _limit(what: str, limit: str) -> None:
    if limit not in LIMITS:
        raise CourseError(f"{what}: binding limit {limit!r} is not one the model names ({', '.join(LIMITS)})")


def check_idle(pred: Prediction, cal, rel: float = 0.05) -> None:
    """The roofs solved from the idle run give that idle run back (TTFT and TPOT within ``rel``)."""
    for name, got, want in (("TTFT", pred.ttft_ms, cal.ttft_ms), ("TPOT", pred.tpot_ms, cal.tpot_ms)):
        if not (math.isfinite(got) and abs(got / want - 1) <= rel):
            raise CourseError(f"the calibrated model gives idle {name} {got:.4g} ms for a measured {want:.4g} ms: "
                              f"not within {rel:.0%} of the run it was solved from")
    _limit("idle", pred.binding_limit)


def check_sweep(preds: dict) -> None:
    """Continuous batching in the model: from each concurrency to the next, throughput rises but by less
    than the concurrency ratio, and the mean TPOT does not fall."""
    cs = sorted(preds)
    if len(cs) < 2:
        raise CourseError(f"a sweep needs two concurrencies or more, got {cs}")
    for a, b in zip(cs[:-1], cs[1:], strict=True):
        pa, pb = preds[a], preds[b]
        if not pa.throughput_tok_s < pb.throughput_tok_s < pa.throughput_tok_s * b / a:
            raise CourseError(f"predicted throughput {pa.throughput_tok_s:.4g} -> {pb.throughput_tok_s:.4g} tok/s "
                              f"from concurrency {a} to {b}: must rise, by less than x{b / a:g}")
        if pb.tpot_ms < pa.tpot_ms:
            raise CourseError(f"predicted mean TPOT falls from concurrency {a} to {b} ({pa.tpot_ms:.4g} -> "
                              f"{pb.tpot_ms:.4g} ms): a step that carries more requests is never shorter")
    for c in cs:
        _limit(f"concurrency {c}", preds[c].binding_limit)


def check_interference(preds: dict, big: int, small: int) -> bool:
    """Branch D in the model. Always: a smaller budget does not make the long prompt's own TTFT shorter (every
    chunk re-reads the weights). Where the model's own scene has the streams still decoding when the long prompt's
    prefill ends (it is sent after their first tokens, so on any session's speed unless the prefill outlasts
    them): under the large budget the prefill stalls them (ITL P99 > 3 x P50, as the live cell asserts of the
    measurement) and the smaller budget lowers their ITL P99. Returns whether the scene overlapped."""
    b, s = preds[big], preds[small]
    streams = b["prediction"].requests[:-1]
    overlap = bool(streams) and min(r["e2e_ms"] for r in streams) > b["long_sent_ms"] + b["long_ttft_ms"]
    if overlap and not b["itl_p99_ms"] > 3 * b["itl_p50_ms"]:
        raise CourseError(f"budget {big}: predicted ITL P99 {b['itl_p99_ms']:.4g} ms is not above 3 x its P50 "
                          f"{b['itl_p50_ms']:.4g} ms: no stall behind the long prefill")
    if overlap and not s["itl_p99_ms"] < b["itl_p99_ms"]:
        raise CourseError(f"budget {big} -> {small}: predicted decode ITL P99 {b['itl_p99_ms']:.4g} -> "
                          f"{s['itl_p99_ms']:.4g} ms: must fall")
    if s["long_ttft_ms"] < b["long_ttft_ms"]:
        raise CourseError(f"budget {big} -> {small}: predicted long-prompt TTFT {b['long_ttft_ms']:.4g} -> "
                          f"{s['long_ttft_ms']:.4g} ms falls: chunking cannot make its prefill shorter in the model")
    _limit(f"budget {big}", b["binding_limit"])
    _limit(f"budget {small}", s["binding_limit"])
    return overlap


def check_dry_run(q: dict, branch: str) -> None:
    """A dry run of the tuning loop (``tuning.predicted_step``): the predicted start misses the SLOs, the
    decision engine takes ``branch`` and names a change, and the model predicts that change lowers the metric."""
    name = q.get("start", "?")
    if q.get("branch") != branch or not q.get("change"):
        raise CourseError(f"[{name}] dry run: branch {q.get('branch')}, change {q.get('change')}: expected branch "
                          f"{branch} and a change to try")
    before, after = q["before"][q["metric"]], q["after"][q["metric"]]
    if not after < before:
        raise CourseError(f"[{name}] dry run: {q['change']} predicted {q['metric']} {before:.4g} -> {after:.4g}: "
                          "the change the loop will try must lower it")
    _limit(f"[{name}] predicted start", q["before"]["binding_limit"])
    _limit(f"[{name}] predicted after", q["after"]["binding_limit"])


def check_same_change(q: dict, step: dict) -> None:
    """The live loop's first step (``Trace.to_dict()['steps'][0]``) chose the dry run's change, on its metric."""
    got = (step.get("branch"), step.get("change"), step.get("metric"))
    want = (q.get("branch"), q.get("change"), q.get("metric"))
    if got != want:
        raise CourseError(f"[{q.get('start', '?')}] the live loop's first step was branch {got[0]}, {got[1]} "
                          f"({got[2]}); the dry run predicted branch {want[0]}, {want[1]} ({want[2]})")


def effect_row(branch: str, change: str, metric: str, pred_before: float, pred_after: float,
               meas_before: float, meas_after: float, binding_limit: str = "") -> dict:
    """One line of the predicted-vs-measured table: both levels, both effects (after / before) and the errors."""
    vals = (pred_before, pred_after, meas_before, meas_after)
    if not all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in vals):
        raise CourseError(f"{branch} {metric}: predicted and measured levels must be positive numbers, got {vals}")
    pr, mr = pred_after / pred_before, meas_after / meas_before
    return {"branch": branch, "change": change, "metric": metric,
            "predicted": f"{pred_before:.4g} -> {pred_after:.4g}", "measured": f"{meas_before:.4g} -> {meas_after:.4g}",
            "predicted_effect": pr, "measured_effect": mr, "effect_error": pr / mr - 1,
            "before_error": pred_before / meas_before - 1, "after_error": pred_after / meas_after - 1,
            "same_direction": (pr > 1) == (mr > 1), "binding_limit": binding_limit}


COLUMNS = ("branch", "change", "metric", "predicted", "measured", "predicted_effect", "measured_effect", "effect_error",
           "before_error", "after_error", "binding_limit")


def table(rows: list) -> str:
    """The rows as a fixed-width text table: effects as x-ratios, errors as signed percentages."""
    def cell(k, v):
        if k.endswith("_effect"):
            return f"x{v:.2f}"
        if k.endswith("_error"):
            return f"{v:+.0%}"
        return str(v)
    body = [[cell(k, r[k]) for k in COLUMNS] for r in rows]
    widths = [max(len(k), *(len(b[i]) for b in body)) if body else len(k) for i, k in enumerate(COLUMNS)]
    lines = ["  ".join(k.ljust(w) for k, w in zip(COLUMNS, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(b, widths, strict=True)) for b in body]
    return "\n".join(lines)


def figure(rows: list, title: str = "The model's predicted effect against the measured one"):
    """Predicted against measured after/before ratio per row, on log axes, with the line of perfect agreement."""
    import plotly.graph_objects as go

    xs = [r["measured_effect"] for r in rows]
    ys = [r["predicted_effect"] for r in rows]
    lo, hi = min(xs + ys) / 1.3, max(xs + ys) * 1.3
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="predicted = measured",
                             line={"dash": "dot", "color": "grey"}))
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers+text", name="branch",
                             text=[f"{r['branch']}: {r['metric']}" for r in rows], textposition="top center",
                             marker={"size": 10}))
    fig.update_xaxes(type="log", title="measured effect (after / before)")
    fig.update_yaxes(type="log", title="predicted effect (after / before)")
    fig.update_layout(title=title, height=480)
    return fig
