"""Start failures answered the way vLLM 0.32 answers them (issue 19).

When the KV budget cannot hold one request of ``--max-model-len``, vLLM's own error
(v1/core/kv_cache_utils.py ``check_enough_kv_cache_memory``) names the fix: "the estimated maximum
model length is N ... try increasing gpu_memory_utilization or decreasing max_model_len". So the
remedies, in this order, each re-checked with the memory calculator and shown with its numbers:

1. ``--max-model-len`` at the calculator's estimate (free: the requests this workload sends still fit);
2. ``--kv-cache-dtype fp8`` at the same length (halves the KV bytes; costs a little accuracy);
3. ``--tensor-parallel-size`` doubled on GPUs already in the box, within one node.

A remedy after which vLLM still would not start is not offered.
"""
from __future__ import annotations

from inferopt.diagnosis import cost


def remedies(view: dict | None, workload, gpus_free_for_tp: int) -> list:
    """Action dicts (decision-engine format) for a deployment the calculator says will not start."""
    if view is None or view["will_start"] or not view.get("_gpu"):
        return []
    from inferopt.planning import hardware

    out = []
    ctx = None
    if workload.prompt_tokens or workload.output_tokens:
        ctx = int((workload.prompt_tokens or 0) + (workload.output_tokens or 0))
    est = view.get("max_model_len_estimate")
    mml = view.get("max_model_len")

    def item(aid, rank, flags, text, because):
        after = cost.recheck(view, cost.memory_change(flags))
        if not after["will_start"]:
            return
        out.append({"id": aid, "condition": "start", "text": text, "rank": rank, "flags_add": flags,
                    "flags_remove": [], "sized_because": because, "after": after})

    if view["weights_fit"] and est:
        fits = "" if ctx is None else (f"; the workload's {ctx:,}-token requests still fit" if ctx <= est
                                      else f"; but the workload's {ctx:,}-token requests do not: use a remedy below")
        if ctx is None or ctx <= est:
            item("start_max_model_len", -3, ["--max-model-len", str(est)],
                 f"vLLM's own remedy: lower --max-model-len from {mml:,} to the estimated maximum {est:,}",
                 f"the KV budget holds {est:,} tokens for one request (v1/core/kv_cache_utils.py "
                 f"check_enough_kv_cache_memory prints this estimate){fits}")
    kw = view["_kw"]
    from inferopt.planning import memory as M

    if M.kv_dtype_bytes(kw["kv_dtype"], kw["dtype"]) > 1 and hardware.supports(view["_gpu"], "fp8_kv"):
        item("start_kv_dtype", -2, ["--kv-cache-dtype", "fp8"],
             f"FP8 KV cache at --max-model-len {mml:,}: half the KV bytes per token",
             f"rule fp8_kv ({hardware.cite('fp8_kv')})")
    tp2 = kw.get("tp", 1) * 2
    if gpus_free_for_tp >= tp2:
        item("start_tp", -1, ["--tensor-parallel-size", str(tp2)],
             f"tensor parallelism {kw.get('tp', 1)} -> {tp2} on GPUs already in the node",
             "weights and KV heads split over more GPUs")
    return out
