"""Ranking by cost (issue 19): free configuration fixes first, accuracy-costing changes next, buying
hardware last; each recommendation says which kind it is (assets/cost_ranking.yaml).

Every change that moves memory (TP, weight format, KV dtype, --gpu-memory-utilization,
--max-model-len, --kv-cache-memory-bytes) is re-checked with the memory calculator
(:func:`inferopt.planning.memory.start_verdict`) and carries its after-figures; a change after which
vLLM still would not start is dropped (listed as skipped with the calculator's reason).
"""
from __future__ import annotations

from functools import cache

from inferopt import assets
from inferopt.errors import CourseError

START_GROUP = ("start_max_model_len", "start_kv_dtype", "start_tp")   # vLLM's own remedy order


@cache
def table() -> dict:
    return assets.load("cost_ranking.yaml")


@cache
def _order() -> dict:
    return {k["id"]: i for i, k in enumerate(table()["kinds"])}


def kind_of(item_id: str, what: str = "action") -> str:
    """The cost kind (free / accuracy / hardware / investigate) of a technique or an action."""
    section = table()["techniques" if what == "technique" else "actions"]
    if item_id not in section:
        raise CourseError(f"assets/cost_ranking.yaml: no cost kind for {what} {item_id!r}; add it under {what}s")
    return section[item_id]


def label(kind: str) -> str:
    return next(k["label"] for k in table()["kinds"] if k["id"] == kind)


def is_change_without_flags(item_id: str) -> bool:
    return item_id in table()["changes_without_flags"]


def sort_key(kind: str, rank: float, item_id: str = "", weak: bool = False) -> tuple:
    """Start remedies in vLLM's order first; then free < accuracy < hardware < investigate; then rank.
    ``weak``: a free change the calculator says frees little (concurrency x < 1.25) is no fix on its
    own, so it comes after the accuracy-costing changes that do fix it."""
    group = START_GROUP.index(item_id) if item_id in START_GROUP else len(START_GROUP)
    order = _order()[kind] + (1.5 if weak and kind == "free" else 0)
    return (group, order, rank)


# ------------------------------------------------------------------ re-check with the calculator
_FLAG_CHANGES = {"--tensor-parallel-size": ("tp", int), "--gpu-memory-utilization": ("gpu_memory_utilization", float),
                 "--max-model-len": ("max_model_len", int), "--kv-cache-memory-bytes": ("kv_cache_memory_bytes", int),
                 "--kv-cache-dtype": ("kv_dtype", str), "--quantization": ("weight_format", str)}
_QUANT_FORMAT = {"fp8": "fp8", "awq_marlin": "int4", "gptq_marlin": "int4", "awq": "int4", "gptq": "int4"}


def memory_change(flags: list) -> dict:
    """The calculator keywords a list of vLLM argv tokens changes ({} when it moves no memory)."""
    out = {}
    for i, tok in enumerate(flags[:-1]):
        if tok in _FLAG_CHANGES:
            key, typ = _FLAG_CHANGES[tok]
            val = flags[i + 1]
            if key == "weight_format":
                if val not in _QUANT_FORMAT:
                    continue
                val = _QUANT_FORMAT[val]
            out[key] = typ(val)
    return out


def recheck(view: dict, change: dict) -> dict:
    """After-figures of one change: {will_start, kv_cache_tokens, max_concurrency_workload, text}."""
    from inferopt.planning import memory as M

    try:
        v = M.start_verdict(view["model"], view["_gpu"], **{**view["_kw"], **change})
    except CourseError as exc:
        return {"will_start": False, "text": f"the calculator refuses it: {exc}"}
    if not v.will_start:
        return {"will_start": False, "text": v.reason.split(";")[0][:200]}
    r = v.result
    before = view.get("kv_cache_tokens")
    text = f"vLLM starts; KV cache {r.kv_cache_tokens:,} tokens"
    if before:
        text += f" (was {before:,})"
    if r.max_concurrency_workload:
        text += f", {r.max_concurrency_workload:.1f} requests of the workload's length at once"
    text += f", weights {r.weights_gib_per_gpu:.2f} GiB per GPU"
    return {"will_start": True, "kv_cache_tokens": r.kv_cache_tokens,
            "max_concurrency_workload": None if r.max_concurrency_workload is None else round(r.max_concurrency_workload, 2),
            "weights_gib_per_gpu": round(r.weights_gib_per_gpu, 3), "text": text}


def annotate(recs: list, actions: list, view: dict | None) -> list:
    """Label each item with its cost kind; re-check memory changes (``after``); answer the items to
    drop (a change after which vLLM still would not start) as skipped entries."""
    dropped = []
    for what, items in (("technique", recs), ("action", actions)):
        keep = []
        for it in items:
            kind = kind_of(it["id"], what)
            it["cost_kind"], it["cost_label"] = kind, label(kind)
            change = memory_change(it.get("flags_add") or [])
            if it.get("checkpoint"):      # another checkpoint (INT4 AWQ/GPTQ): its weight format, no flag
                change["weight_format"] = it["checkpoint"]["weight_format"]
            if view is not None and view.get("_gpu") and change and "after" not in it:
                it["after"] = recheck(view, change)
            if it.get("after") and not it["after"]["will_start"]:
                dropped.append({"id": it["id"], "condition": it.get("condition", ""),
                                "reason": "the memory calculator says vLLM still would not start with "
                                          f"{' '.join(it['flags_add']) or it['id']}: {it['after']['text']}"})
                continue
            keep.append(it)
        items[:] = keep
    return dropped
