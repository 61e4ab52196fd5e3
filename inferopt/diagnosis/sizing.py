"""Actions sized to the workload: the token budget, the KV budget, --max-num-seqs, the TP size,
and the flags a technique turns on here (inferopt.diagnosis.tree calls these for the branch taken)."""
from __future__ import annotations

import json
import math

from inferopt.diagnosis.inputs import Workload
from inferopt.errors import CourseError


def _pow2_floor(x: float) -> int:
    return 1 << max(0, math.floor(math.log2(max(1.0, x))))


def _size_action(kind: str, facts: dict, w: Workload, dep, mem: dict | None):
    """(flags_add, flags_remove, why) for an action sized to the workload; flags None when it cannot be sized."""
    if kind == "max_num_batched_tokens":
        cur = facts.get("max_num_batched_tokens")
        p = w.prompt_tokens
        if p is None:
            return None, [], "give the long prompt's length (--prompt-tokens) to size the budget"
        if cur is None:
            return None, [], "give the current --max-num-batched-tokens (or the GPU) to size the budget"
        floor = facts.get("max_num_seqs") or 256
        target = max(_pow2_floor(p / 4), floor)   # a long prompt split into about four chunks or more
        if target >= cur:
            target = cur // 2
        if target < floor or target >= cur or target >= p:
            why = (f"the budget ({int(cur)}) is already at the floor vLLM allows (>= max_num_seqs {int(floor)}) "
                   "or below the prompt; nothing left to lower")
            return None, [], why
        why = (f"the {int(p)}-token prompt now fits one step of {int(cur)} tokens and stalls every decode stream; "
               f"{int(target)} splits it into {math.ceil(p / target)} chunks (>= max_num_seqs {int(floor)}, as vLLM requires)")
        return ["--max-num-batched-tokens", str(int(target))], [], why
    if kind == "kv_budget":
        if mem is None or not mem.get("bytes_per_block"):
            return None, [], "give the deployment (--model, and --gpu or --kv-cache-memory-bytes) to size the KV memory"
        if mem["gpu"] != "cpu":
            util = mem["_kw"].get("gpu_memory_utilization", 0.92)
            if util >= 0.95:
                return None, [], "--gpu-memory-utilization is already 0.95 or more"
            return ["--gpu-memory-utilization", "0.95"], [], f"from {util:g}: more of the GPU for the KV cache"
        ctx = (w.prompt_tokens or 0) + (w.output_tokens or 0)
        if not ctx or not w.concurrency:
            return None, [], "give prompt/output tokens and concurrency to size the KV budget"
        per_req = math.ceil(ctx / mem["block_size"])
        need = max(int(w.concurrency) * per_req, math.ceil(mem["max_model_len"] / mem["block_size"]))
        blocks = math.ceil(need * 1.25) + 1
        nbytes = blocks * mem["bytes_per_block"]
        cur = mem["_kw"].get("kv_cache_memory_bytes") or 0
        if nbytes <= cur:
            return None, [], f"the KV budget ({cur:,} B) already holds {int(w.concurrency)} requests of {ctx} tokens"
        why = (f"{int(w.concurrency)} requests x {per_req} blocks of {mem['block_size']} tokens, +25 % headroom, +1 null "
               f"block = {blocks} blocks x {mem['bytes_per_block']:,} B (now {cur:,} B = {mem.get('num_blocks')} blocks)")
        return ["--kv-cache-memory-bytes", str(nbytes)], [], why
    if kind == "max_num_seqs_fit":
        if mem is None or not mem.get("max_concurrency_workload"):
            return None, [], "give the deployment and the request length to compute how many requests the KV cache holds"
        n = max(1, int(mem["max_concurrency_workload"]))
        if w.concurrency is not None and n >= w.concurrency:
            return None, [], f"the KV cache holds {n} requests, no fewer than the {int(w.concurrency)} in flight"
        return ["--max-num-seqs", str(n)], [], f"the KV cache holds {mem['max_concurrency_workload']} requests of this length"
    if kind == "max_num_seqs_raise":
        cur = facts.get("max_num_seqs") or 256
        want = max(int(cur) * 2, int(2 * (w.concurrency or 0)))
        return ["--max-num-seqs", str(want)], [], f"from {int(cur)} (vLLM's default here unless set)"
    if kind == "spec_off":
        return [], ["--speculative-config"], "drafts are mostly rejected"
    raise CourseError(f"assets/decision_tree.yaml: unknown sized action {kind!r}")


# The share of a GPU's usable memory that tensor-parallel sizing lets the weights take (the rest: KV cache, activations).
WEIGHTS_SHARE = 0.8
# The rule as _tp_size applies it, in the words every statement of it uses (tests/test_one_statement.py).
TP_RULE = (f"the smallest power of two whose GPUs hold the weights in at most {WEIGHTS_SHARE:.0%} of their usable "
           "memory, the rest left for the KV cache")


def _tp_size(w: Workload, facts: dict, thresholds: dict, mem: dict | None = None) -> int:
    """``TP_RULE``, capped at num_gpus (with the model and GPU known: the smallest TP with which the memory
    calculator says vLLM starts)."""
    gpus = int(w.num_gpus)
    if mem is not None and mem["_gpu"]:
        from inferopt.planning import memory as M

        tp = max(2, mem["tp"] * 2)
        while tp <= gpus:
            try:
                if M.start_verdict(mem["model"], mem["_gpu"], **{**mem["_kw"], "tp": tp}).will_start:
                    return tp
            except CourseError:
                pass
            tp *= 2
    if w.model_weights_gib is None or not facts["gpu_memory_gib"]:
        return max(2, min(gpus, 2))
    per_gpu = facts["gpu_memory_gib"] * thresholds["usable_memory_frac"]
    tp = 2
    while tp < gpus and w.model_weights_gib / tp > per_gpu * WEIGHTS_SHARE:
        tp *= 2
    return min(tp, gpus)


def _flags_for(tid: str, tech, w: Workload, facts: dict, thresholds: dict, on: set, mem=None):
    add = list(tech.enable_flags)
    remove = []
    if tid == "tensor_parallel":
        from inferopt.planning import topology

        tp = _tp_size(w, facts, thresholds, mem)
        per_node = int(w.gpus_per_node or w.num_gpus)
        add = topology.layout(tp, per_node).flags()  # TP within a node, PP across nodes
    if tid == "speculative_decoding" and w.draft_model:
        add = ["--speculative-config", json.dumps({"model": w.draft_model, "num_speculative_tokens": 4})]
    if tech.default_on and tid not in on and tech.disable_flags:
        remove = list(tech.disable_flags)  # it was turned off: drop the flag that did it
    return add, remove
