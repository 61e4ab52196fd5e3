"""The memory calculator's view of a deployment, as the diagnosis uses it: will vLLM start, do the
weights fit, does KV or the weights dominate, and what each candidate change frees
(``Diagnosis.memory["candidates"]``: "FP8 KV: +N tokens of KV, concurrency x2"), ranked
(inferopt.planning.memory does the sizing)."""
from __future__ import annotations

from inferopt.diagnosis.facts import _this_cpu_fp8_kv, reason_head, vllm_defaults
from inferopt.diagnosis.inputs import Deployment, Workload
from inferopt.errors import CourseError


def _memory_view(dep: Deployment, w: Workload) -> dict | None:
    """The memory calculator's answers for this deployment and workload (None without a model)."""
    if dep is None or dep.model is None:
        return None
    from inferopt.planning import memory as M

    gpu = None if dep.on_cpu else (dep.gpu or w.gpu_type)
    if gpu is not None and str(gpu).upper() == "CPU":
        gpu = None
    if gpu is None and dep.kv_cache_memory_bytes is None:
        raise CourseError("deployment: give a GPU (--gpu H100) or, for the CPU engine, the KV budget "
                          "(--kv-cache-memory-bytes)")
    on_cpu = gpu is None
    from inferopt.planning.model_specs import load_spec

    # the checkpoint's own format (its config.json quantization_config, as vLLM's ModelConfig reads it)
    wf = dep.weight_format or ("fp32" if on_cpu else M.resolve_weight_format(load_spec(dep.model), "auto"))
    dtype = dep.dtype or ("float32" if wf == "fp32" else "bfloat16")
    kw = {"tp": dep.tp, "weight_format": wf, "kv_dtype": dep.kv_dtype, "dtype": dtype,
          "max_model_len": dep.max_model_len, "kv_cache_memory_bytes": dep.kv_cache_memory_bytes,
          "input_tokens": int(w.prompt_tokens) if w.prompt_tokens else None,
          "output_tokens": int(w.output_tokens) if w.output_tokens else None}
    if not on_cpu:
        kw["gpu_memory_utilization"] = dep.gpu_memory_utilization or M.DEFAULT_GPU_MEMORY_UTILIZATION
        if dep.runtime_buffer_gib is not None:
            kw["runtime_buffer_gib"] = dep.runtime_buffer_gib
    v = M.start_verdict(dep.model, gpu, **kw)
    gpu_mem = M.gpu_memory_gib(gpu) if gpu else None
    d_batched, d_seqs = vllm_defaults(dep, gpu_mem, gpu)
    out = {"model": dep.model, "gpu": gpu or "cpu", "tp": dep.tp, "weight_format": wf, "kv_dtype": dep.kv_dtype,
           "will_start": v.will_start, "start_reason": v.reason if not v.will_start else "",
           "max_model_len_estimate": v.max_model_len_estimate, "weights_fit": v.weights_fit,
           "weights_gib_per_gpu": round(v.weights_gib_per_gpu, 3), "dominates": None,
           "default_max_num_batched_tokens": d_batched, "default_max_num_seqs": d_seqs,
           "kv_cache_tokens": None, "max_concurrency_workload": None, "kv_needed_gib_per_gpu": None,
           "kv_budget_gib_per_gpu": None, "candidates": [], "_kw": kw, "_gpu": gpu}
    from inferopt.planning.model_specs import load_spec

    spec = load_spec(dep.model)
    bs = M.GPU_BLOCK_SIZE if gpu else M.CPU_BLOCK_SIZE
    heads = max(1, spec.num_kv_heads // dep.tp)
    out.update(block_size=bs, max_model_len=dep.max_model_len or spec.max_position_embeddings or 2048,
               bytes_per_block=2 * bs * heads * spec.head_dim * M.kv_dtype_bytes(dep.kv_dtype, dtype) * spec.num_layers,
               num_blocks=v.num_blocks)
    r = v.result
    ctx = (w.prompt_tokens or 0) + (w.output_tokens or 0) if (w.prompt_tokens or w.output_tokens) else None
    if r is not None:
        out.update(kv_cache_tokens=r.kv_cache_tokens, kv_budget_gib_per_gpu=round(r.kv_budget_gib_per_gpu, 3),
                   max_concurrency_workload=None if r.max_concurrency_workload is None else round(r.max_concurrency_workload, 2),
                   block_size=r.block_size, bytes_per_block=r.bytes_per_block, num_blocks=r.num_blocks,
                   max_model_len=r.max_model_len, kv_bytes_per_token_per_gpu=r.kv_bytes_per_token_per_gpu)
    if ctx and w.concurrency:
        _, per_tok = M.kv_bytes_per_token(spec, M.kv_dtype_bytes(dep.kv_dtype, dtype), dep.tp)
        need = per_tok * ctx * w.concurrency / M.GiB
        out["kv_needed_gib_per_gpu"] = round(need, 3)
        out["dominates"] = "kv" if need > v.weights_gib_per_gpu else "weights"
    out["candidates"] = _memory_candidates(out, dep, w)
    return out


def _memory_candidates(view: dict, dep: Deployment, w: Workload) -> list:
    """Each candidate change with what it frees, ranked: no accuracy cost first (TP, more KV memory),
    then FP8 (weights or KV, on FP8 hardware), then INT4 - the original chapter's OOM order, corrected."""
    from inferopt.planning import memory as M

    kw, gpu = view["_kw"], view["_gpu"]
    from inferopt.planning import hardware

    fp8_mode = hardware.fp8_mode(gpu) if gpu else None
    before_tokens = view["kv_cache_tokens"] or 0
    before_conc = view["max_concurrency_workload"]
    cands = []

    def add(cid, rank, flags, text, checkpoint=None, **change):
        v = M.start_verdict(dep.model, gpu, **{**kw, **change})
        c = {"id": cid, "rank": rank, "flags": flags, "will_start": v.will_start, "kv_tokens_after": None,
             "kv_tokens_gain": None, "concurrency_factor": None}
        if checkpoint is not None:         # another checkpoint, not a flag: what to serve
            c["checkpoint"] = checkpoint
        if v.result is not None:
            after = v.result.kv_cache_tokens
            c.update(kv_tokens_after=after, kv_tokens_gain=after - before_tokens)
            if before_conc and v.result.max_concurrency_workload:
                c["concurrency_factor"] = round(v.result.max_concurrency_workload / before_conc, 2)
            elif before_tokens:
                c["concurrency_factor"] = round(after / before_tokens, 2)
            gain = f"{c['kv_tokens_gain']:+,} tokens of KV ({before_tokens:,} -> {after:,})"
            conc = f", concurrency x{c['concurrency_factor']:.2f}" if c["concurrency_factor"] else ""
            c["text"] = f"{text}: {gain}{conc}" + ("" if view["will_start"] else "; vLLM starts")
        else:
            c["text"] = f"{text}: still does not start ({reason_head(v.reason)})"
        cands.append(c)

    if gpu:
        tp2 = dep.tp * 2
        if min(w.num_gpus, w.gpus_per_node or w.num_gpus) >= tp2:  # TP never spans nodes
            try:
                from inferopt.planning.model_specs import load_spec

                M.check_tp(load_spec(dep.model), tp2)
                add("tensor_parallel", 0, ["--tensor-parallel-size", str(tp2)], f"TP {dep.tp} -> {tp2}", tp=tp2)
            except CourseError:
                pass
        util = kw.get("gpu_memory_utilization", M.DEFAULT_GPU_MEMORY_UTILIZATION)
        if util < 0.95:
            add("more_kv_memory", 0, ["--gpu-memory-utilization", "0.95"], f"--gpu-memory-utilization {util:g} -> 0.95",
                gpu_memory_utilization=0.95)
        if fp8_mode and kw["weight_format"] in ("bf16", "fp16", "fp32"):
            add("fp8", 1, ["--quantization", "fp8"],
                "FP8 weights" + (" (weight-only W8A16 through FP8 Marlin: memory, not speed)" if fp8_mode == "w8a16" else ""),
                weight_format="fp8")
    fp8_kv_here = hardware.supports(gpu, "fp8_kv") if gpu else _this_cpu_fp8_kv()   # vLLM refuses it below Ampere
    if M.kv_dtype_bytes(kw["kv_dtype"], kw["dtype"]) > 1 and fp8_kv_here:
        add("kv_cache_quant", 1, ["--kv-cache-dtype", "fp8"], "FP8 KV", kv_dtype="fp8")
    if gpu and kw["weight_format"] not in ("int4",) and hardware.supports(gpu, "int4_marlin"):
        # INT4 AWQ/GPTQ is another checkpoint of the model, not a flag on this one (vLLM refuses --quantization
        # awq_marlin on a BF16 checkpoint): the candidate carries no flag and names the checkpoint to serve
        from inferopt.vllm_oracle.runtime import checkpoint_change, checkpoint_text

        ck = checkpoint_change(dep.model, "int4")
        add("int4_awq_marlin", 2, [], f"INT4 weights (AWQ + Marlin; {checkpoint_text(ck)})", checkpoint=ck,
            weight_format="int4")
    cands.sort(key=lambda c: (not c["will_start"], c["rank"], -(c["kv_tokens_gain"] or 0)))
    return cands
