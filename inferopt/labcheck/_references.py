"""The checks' own answers: independent formulas the lab checks compare the learner's work with.

Kept out of the lab modules a learner imports (``from inferopt.labcheck.lab2 import ref_...`` finds
nothing), and any call from a learner's function into this file (or any file of ``inferopt.labcheck``)
is caught at run time by ``labcheck.call`` as a shortcut, however it was reached.
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction

DROP = {"--tensor-parallel-size", "--gpu-memory-utilization", "--port", "--kv-cache-dtype", "--dtype"}
SCALE = {"--max-num-batched-tokens": "2048", "--max-num-seqs": "16"}


# ---- lab2 ----


def ref_bytes_per_token(cfg: dict, kv_bytes: int) -> int:
    head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
    return 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * head_dim * kv_bytes


def ref_prediction(cfg: dict, dtype_bytes: int, budget_bytes: int, max_model_len: int, block_size: int):
    head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
    block = 2 * block_size * cfg["num_key_value_heads"] * head_dim * dtype_bytes * cfg["num_hidden_layers"]
    blocks = budget_bytes // block
    per_request = math.ceil(max_model_len / block_size)
    conc = blocks / per_request
    return int(conc * max_model_len), conc


# ---- lab3 ----


def ref_cpu_flags(flags):
    out, i = [], 0
    while i < len(flags):
        f = flags[i]
        has_value = i + 1 < len(flags) and not flags[i + 1].startswith("--")
        value = flags[i + 1] if has_value else None
        i += 2 if has_value else 1
        if f in DROP:
            continue
        out.append(f)
        if has_value:
            out.append(SCALE.get(f, value))
    return out


def ref_live_stats(t0, stamps, n_tokens):
    return 1000 * (stamps[0] - t0), 1000 * (stamps[-1] - stamps[0]) / (n_tokens - 1)


def ref_metric_value(text, name):
    total = 0.0
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        if head.split("{", 1)[0] == name:
            total += float(value)
    return total


@functools.lru_cache(maxsize=8192)
def ref_ranks(n: int, q: int, level: float) -> tuple[int | None, int | None]:
    """(s, r): the largest rank whose value is a ``level`` lower bound of the true P_q, the smallest whose value
    is an upper bound (None when no rank is), from the exact binomial in integers (no rounding):
    P(Binomial(n, q/100) <= k) = sum_i<=k C(n, i) q^i (100 - q)^(n - i) / 100^n."""
    lv = Fraction(str(level))
    whole = 100**n
    cdf, c = [], 0
    for i in range(n + 1):
        c += math.comb(n, i) * q**i * (100 - q) ** (n - i)
        cdf.append(c)  # cdf[k] / 100^n = P(Binomial(n, p) <= k)
    s = next((k for k in range(n, 0, -1) if (whole - cdf[k - 1]) * lv.denominator >= lv.numerator * whole), None)
    r = next((k for k in range(1, n + 1) if cdf[k - 1] * lv.denominator >= lv.numerator * whole), None)
    return s, r


def ref_verdict_values(records, *, with_failed=False):
    """{'ttft': [ms...], 'tpot': [ms...]} of the requests that completed (all of them with ``with_failed``; only
    for the TPOT with ``with_failed='tpot'``)."""
    done = [d for d in records if with_failed is True or d.get("error") is None]
    every = [d for d in records if with_failed or d.get("error") is None]
    return {"ttft": [1000 * d["ttft_s"] for d in done],
            "tpot": [1000 * (d["e2e_s"] - d["ttft_s"]) / (d["output_tokens"] - 1) for d in every
                     if d["output_tokens"] >= 2]}


def ref_one_verdict(values, limit, q, level, *, always_max=False, no_lower=False, sample=False, strict=False,
                    shift=0, undecided=None):
    """(ok, basis, value_ms) of lab 3's task 4; the keyword flags give the usual mistakes (for the hints)."""
    v, n = sorted(values), len(values)
    le = (lambda a, b: a < b) if strict else (lambda a, b: a <= b)
    if sample:  # the sample percentile taken as the truth
        rank = (n - 1) * q / 100
        lo, hi = math.floor(rank), math.ceil(rank)
        est = v[lo] + (v[hi] - v[lo]) * (rank - lo)
        return le(est, limit), "upper bound", est
    s, r = ref_ranks(n, q, level)
    if always_max:
        s, r = None, None
    if no_lower:
        s = None
    if s is not None and v[s - 1] > limit:
        return False, "lower bound", v[s - 1]
    if r is not None:
        x = v[min(n - 1, max(0, r - 1 + shift))]   # shift: the upper rank off by one
        return (True if le(x, limit) else undecided), "upper bound", x
    return le(v[-1], limit), "maximum", v[-1]


def ref_slo_verdict(records, slo, level=0.9, *, with_failed=False, q=None, ttft_scale=1, **mistake):
    """Lab 3's task 4: {'ttft': (ok, basis, value_ms), 'tpot': ...}; the keywords give the usual mistakes."""
    q = slo.percentile if q is None else q
    vals = ref_verdict_values(records, with_failed=with_failed)
    vals["ttft"] = [ttft_scale * x for x in vals["ttft"]]
    return {m: ref_one_verdict(vals[m], getattr(slo, f"{m}_ms"), q, level, **mistake) for m in ("ttft", "tpot")}


# ---- lab4 ----


def ref_tpot_ms(d):
    n = d["output_tokens"]
    if d.get("error") is not None or n < 2:
        return None
    return 1000.0 * (d["e2e_s"] - d["ttft_s"]) / (n - 1)


def ref_ttft_p95_ms(rows):
    import numpy as np

    ok = [1000 * d["ttft_s"] for d in rows if d.get("error") is None]
    return float(np.percentile(ok, 95)) if ok else float("nan")


def ref_goodput(rows, slo, duration_s):
    good = 0
    for d in rows:
        if d.get("error") is not None:
            continue
        t = ref_tpot_ms(d)
        if 1000 * d["ttft_s"] <= slo.ttft_ms and (t is None or t <= slo.tpot_ms):
            good += 1
    return good / duration_s


def ref_tail_need(q=95, level=0.9):
    """The fewest requests whose slowest bounds the true P_q at ``level``: 1 - (q/100)^n >= level."""
    n = 1
    while 1 - (q / 100) ** n < level - 1e-12:
        n += 1
    return n


def ref_summary_ok(s, metric, limit, q=95):
    """A summary's verdict on one objective: its slowest request below the requests a P_q needs, its bound from
    there on, its sample P_q when it says neither its sample size nor a bound (a tool's or a model's row)."""
    n = s.get(f"{metric}_count", s.get("completed"))
    if n is not None and n < ref_tail_need(q):
        return s[f"{metric}_max_ms"] <= limit
    bound = s.get(f"{metric}_p{q}_bound_ms")
    return (bound if bound is not None else s[f"{metric}_p{q}_ms"]) <= limit


def ref_max_concurrency(summaries, slo):
    """The level ``latency_vs_concurrency`` marks when left alone: the summaries' own verdicts, level by level."""
    best = None
    for s in sorted(summaries, key=lambda s: s["concurrency"]):
        if ref_summary_ok(s, "ttft", slo.ttft_ms, slo.percentile) and ref_summary_ok(s, "tpot", slo.tpot_ms,
                                                                                       slo.percentile):
            best = s["concurrency"]
        else:
            break
    return best


def ref_frontier(by_level, slo, level=0.9, *, no_stop=False, unsorted=False, undecided_passes=False,
                 failed_counted=False, failed_level_ok=False, sample=False):
    """Lab 4's task 3: (best, basis) of a sweep judged level by level with lab 3's verdict; the keywords give the
    usual mistakes (for the hints)."""
    best, basis, on_max = None, None, False
    levels = list(by_level) if unsorted else sorted(by_level)
    for c in levels:
        rows = by_level[c]
        failed = any(d.get("error") is not None for d in rows)
        vals = ref_verdict_values(rows, with_failed=failed_counted)
        verdicts = [ref_one_verdict(vals[m], getattr(slo, f"{m}_ms"), slo.percentile, level, sample=sample)
                    for m in ("ttft", "tpot")]
        ok = (not failed or failed_level_ok or failed_counted) and all(
            v[0] is True or (undecided_passes and v[0] is None) for v in verdicts)
        if ok:
            best = c
            on_max = on_max or any(v[1] == "maximum" for v in verdicts)
            basis = "maximum" if on_max else "bound"
        elif not no_stop:
            break
    return best, basis


# ---- lab5 ----


def ref_in_flight(qps, ttft_ms, tpot_ms, output_tokens):
    return qps * (ttft_ms + (output_tokens - 1) * tpot_ms) / 1000


def ref_impossible(table, output_tokens, tolerance):
    return [row["concurrency"] for row in table
            if abs(ref_in_flight(row["qps"], row["ttft_mean_ms"], row["tpot_mean_ms"], output_tokens)
                   / row["concurrency"] - 1) > tolerance]


def ref_min_requests(level, q=95):
    """The smallest n with 1 - (q/100)^n >= level, in exact arithmetic (the slowest of n bounds the P_q)."""
    p, miss, n = Fraction(q) / 100, 1 - Fraction(level).limit_denominator(10**6), 1
    while p**n > miss:
        n += 1
    return n


def ref_best_qps(table, ttft_slo, tpot_slo, level=0.9, *, enough=None, strict_n=False):
    """The best qps inside both SLOs among the rows with enough requests; ``enough`` / ``strict_n`` give the
    usual mistakes (another bound, ``>`` for ``>=``; ``enough=0``: n ignored), for the hints."""
    need_n = ref_min_requests(level) if enough is None else enough
    inside = [row["qps"] for row in table if (row["requests"] > need_n if strict_n else row["requests"] >= need_n)
              and row["ttft_p95_ms"] < ttft_slo and row["tpot_p95_ms"] < tpot_slo]
    return max(inside) if inside else None


def ref_instances(target, per_instance, surge, spares, gpus_per_instance):
    base = max(1, math.ceil(round(target / per_instance, 9)))
    instances = base + surge + spares
    return base, instances, instances * gpus_per_instance


def ref_step_decision(readings, last_step, *, no_data_passes=False, at_or_below=False, exact=False, done=True):
    """The rollout's next move; the keyword flags give the usual mistakes (for the hints)."""
    for g in readings:
        v = g["value"]
        if v is None or math.isnan(v):
            if no_data_passes:
                continue
            return "roll back"
        if g["pass_if"] == "below":
            ok = v <= g["threshold"] if at_or_below else v < g["threshold"]
        else:
            ok = v == g["threshold"] if exact else round(v, 6) == g["threshold"]
        if not ok:
            return "roll back"
    return "done" if last_step and done else "promote"


def ref_course_frontier(by_level, slo, level: float = 0.9):
    """(best, basis) from the course's verdict (``inferopt.bench.stats.slo_verdict``), level by level."""
    from inferopt.bench import stats
    from inferopt.bench.metrics import RequestRecord

    best, on_max = None, False
    for c in sorted(by_level):
        done = [RequestRecord.from_dict(d) for d in by_level[c] if d.get("error") is None]
        if len(done) < len(by_level[c]):
            break
        verdicts = [stats.slo_verdict(m, [1000 * getattr(x, f"{m}_s") for x in done if getattr(x, f"{m}_s") is not None],
                                      getattr(slo, f"{m}_ms"), slo.percentile, level=level) for m in ("ttft", "tpot")]
        if not all(v.passed is True for v in verdicts):
            break
        best, on_max = c, on_max or any(v.basis.startswith("maximum") for v in verdicts)
    return best, (None if best is None else "maximum" if on_max else "bound")
