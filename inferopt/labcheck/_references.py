"""The checks' own answers: independent formulas the lab checks compare the learner's work with.

Kept out of the lab modules a learner imports (``from inferopt.labcheck.lab2 import ref_...`` finds
nothing), and any call from a learner's function into this file (or any file of ``inferopt.labcheck``)
is caught at run time by ``labcheck.call`` as a shortcut, however it was reached.
"""
from __future__ import annotations

import math

DROP = {"--tensor-parallel-size", "--gpu-memory-utilization", "--port", "--kv-cache-dtype"}
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


def ref_max_concurrency(summaries, slo):
    best = None
    for s in sorted(summaries, key=lambda s: s["concurrency"]):
        if s["ttft_p95_ms"] <= slo.ttft_ms and s["tpot_p95_ms"] <= slo.tpot_ms:
            best = s["concurrency"]
        else:
            break
    return best


# ---- lab5 ----


def ref_in_flight(qps, ttft_ms, tpot_ms, output_tokens):
    return qps * (ttft_ms + (output_tokens - 1) * tpot_ms) / 1000


def ref_impossible(table, output_tokens, tolerance):
    return [row["concurrency"] for row in table
            if abs(ref_in_flight(row["qps"], row["ttft_mean_ms"], row["tpot_mean_ms"], output_tokens)
                   / row["concurrency"] - 1) > tolerance]


def ref_best_qps(table, ttft_slo, tpot_slo):
    inside = [row["qps"] for row in table if row["ttft_p95_ms"] < ttft_slo and row["tpot_p95_ms"] < tpot_slo]
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
