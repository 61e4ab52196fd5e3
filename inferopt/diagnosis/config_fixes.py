"""Free configuration fixes the decision tree's branches do not list (issue 19), each sized:

- ``bigger_token_budget`` (branch A, long prompts): vLLM's default per-step token budget is small on
  A100-class cards (2048; assets/hardware_rules.yaml, get_batch_defaults), so a 16k-token prompt is
  prefilled in 8 steps. A larger ``--max-num-batched-tokens`` prefills it in fewer steps (lower TTFT
  for the long prompt; the price is the decode gaps of the other streams, branch D's concern).
- ``idle_gpus_tp`` (branches A and C): GPUs already in the node and not used by the deployment:
  tensor parallelism over them (within one node, never across nodes; :mod:`inferopt.planning.topology`)
  before any accuracy-costing change.
- ``add_replicas`` / ``buy_replicas`` (branch B, throughput short at capacity): the GPU is busy, no
  request waits and speculation is off, so no per-GPU knob is left: serve more replicas (free on GPUs
  already in the box, else more GPUs).
"""
from __future__ import annotations

import math

from inferopt.planning import topology


def extra_actions(branch_id: str, facts: dict, w, dep, b, on: set, failing: list, thresholds: dict,
                  path: list) -> list:
    out = []
    tp_now = dep.tp if dep is not None else 1
    per_node = int(w.gpus_per_node) if w.gpus_per_node else int(w.num_gpus)
    in_node = min(int(w.num_gpus), per_node)
    metrics = {f["metric"] for f in failing}

    def add(aid, rank, flags, text, because, cond):
        out.append({"id": aid, "condition": cond, "text": text, "rank": rank, "flags_add": flags,
                    "flags_remove": [], "sized_because": because})

    if branch_id == "A" and "ttft_p95_ms" in metrics:
        p, budget = w.prompt_tokens, facts.get("max_num_batched_tokens")
        if p and budget and p > budget and "chunked_prefill" in on:
            target = min(topology.pow2_ceil(p), 16384)
            if target > budget:
                add("bigger_token_budget", 0, ["--max-num-batched-tokens", str(target)],
                    f"Raise the per-step token budget so the {int(p):,}-token prompt is prefilled in "
                    f"{math.ceil(p / target)} step(s) instead of {math.ceil(p / budget)}",
                    f"vLLM's default here is {int(budget)} (engine/arg_utils.py get_batch_defaults); watch the "
                    "other streams' ITL P99, which a bigger step lengthens", "A1")
    if ("A1" in path or "C1" in path) and in_node >= tp_now * 2:
        tp2 = topology.tp_within_node(tp_now * 2, per_node)
        if tp2 > tp_now and "tensor_parallel" not in {a["id"] for a in out}:
            why = ("prefill GEMMs split over more GPUs" if branch_id == "A"
                   else "weights split over more GPUs leave each more room for the KV cache")
            add("idle_gpus_tp", 1, ["--tensor-parallel-size", str(tp2)],
                f"Use the GPUs already in the node: tensor parallelism {tp_now} -> {tp2}", why,
                "A1" if branch_id == "A" else "C1")
    if branch_id == "B" and "throughput_tok_s" in metrics:
        busy = b.gpu_util is not None and b.gpu_util >= thresholds.get("busy_gpu_util", 0.9)
        no_queue = b.queue_len is not None and b.queue_len == 0
        if busy and no_queue and "speculative_decoding" not in on:
            gap = next(f for f in failing if f["metric"] == "throughput_tok_s")
            n = math.ceil(gap["slo"] / gap["value"]) if gap["value"] else 2
            used = tp_now
            free_gpus = int(w.num_gpus) - used
            total = n * used
            text = (f"The GPU is {b.gpu_util:.0%} busy with no request waiting and no speculation: serve "
                    f"{n} replicas of TP={used} ({total} GPUs) behind a router")
            because = (f"throughput {gap['value']:g} of {gap['slo']:g} tok/s needs x{gap['slo'] / gap['value']:.2f} "
                       "capacity; a busy GPU with no queue has no per-GPU knob left")
            add("add_replicas" if free_gpus >= total - used else "buy_replicas", 0, [], text, because, "B")
    return out
