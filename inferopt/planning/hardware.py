"""The hardware table: which GPU generation runs which vLLM 0.32 kernel, and vLLM's default token
budget per GPU, read from ``assets/hardware_rules.yaml`` (every rule cites the vLLM file and
function its number comes from).

This is the one place a compute-capability threshold lives: the technique map (its
``hardware_needs`` name a rule here), the decision engine, the pitfalls and the memory candidates
ask these functions; ``tests/test_hardware_rules.py`` fails on a stray copy elsewhere.

    from inferopt.planning import hardware
    hardware.min_capability("fp8_w8a16")     # Fp8Config.get_min_capability(), as major.minor
    hardware.supports("T4", "int4_marlin")   # True (marlin_utils.query_marlin_supported_quant_types)
    hardware.fp8_mode("A100")                # "w8a16": FP8 weights run weight-only (FP8 Marlin)
    hardware.batch_defaults("A100")          # (2048, 256): get_batch_defaults for the server
    hardware.int4_kernel("H100", "gptq")     # "MacheteLinearKernel": vLLM's choose_mp_linear_kernel there
    hardware.fp8_kv_backend("H100")          # "not determinable on the CPU build: ..." (FlashAttention's extension)
"""
from __future__ import annotations

from functools import cache

from inferopt import assets
from inferopt.errors import CourseError
from inferopt.planning import gpu_catalog


@cache
def table() -> dict:
    """The parsed, schema-checked hardware table."""
    return assets.load("hardware_rules.yaml")


@cache
def rules() -> dict:
    """{rule id: rule} over the quantization and KV-cache sections."""
    t = table()
    out = {**t["quantization"], **t["kv_cache"]}
    if len(out) != len(t["quantization"]) + len(t["kv_cache"]):
        raise CourseError("assets/hardware_rules.yaml: a rule id appears in both quantization and kv_cache")
    return out


def rule(rule_id: str) -> dict:
    r = rules().get(rule_id)
    if r is None:
        raise CourseError(f"hardware rule {rule_id!r} is not in assets/hardware_rules.yaml; "
                          f"known: {', '.join(rules())}")
    return r


def min_capability(rule_id: str) -> float:
    """The lowest CUDA compute capability (major.minor) on which vLLM 0.32 runs this kernel."""
    return float(rule(rule_id)["min_capability"])


def cite(rule_id: str) -> str:
    """'vllm/<file>: <function>' for each source of a rule, joined by '; '."""
    return "; ".join(f"vllm/{s['file']}: {s['function']}" for s in rule(rule_id)["source"])


def capability(gpu) -> float | None:
    """The compute capability of a GPU name/alias (None for None; 0.0 for CPU), or a number as it is."""
    if gpu is None:
        return None
    if isinstance(gpu, (int, float)) and not isinstance(gpu, bool):
        return float(gpu)
    g = gpu_catalog.gpu_class(str(gpu), field="gpu")
    return None if g is None else float(g["compute_capability"])


def supports(gpu, rule_id: str) -> bool | None:
    """Whether vLLM 0.32 runs ``rule_id`` on ``gpu`` (name, alias or compute capability); None if unknown.
    The CPU build runs none of the CUDA kernels (its FP8 KV cache depends on the CPU: see decision.py)."""
    cc = capability(gpu)
    if cc is None:
        return None
    if cc == 0.0:
        return False
    return cc >= min_capability(rule_id)


def fp8_mode(gpu) -> str | None:
    """How vLLM runs ``--quantization fp8`` here: "w8a8" (FP8 tensor cores), "w8a16" (weight-only
    through FP8 Marlin: memory saved, GEMMs in 16-bit), or None (not at all / unknown GPU)."""
    if supports(gpu, "fp8_w8a8"):
        return "w8a8"
    if supports(gpu, "fp8_w8a16"):
        return "w8a16"
    return None


def batch_defaults(gpu=None, memory_gib: float | None = None, *, on_cpu: bool = False) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) vLLM 0.32's OpenAI server uses without the flags
    (engine/arg_utils.py ``EngineArgs.get_batch_defaults``). ``gpu``: a catalog name/alias, for its
    memory and name (the A100 exception); ``memory_gib`` overrides the catalog's figure."""
    rows = table()["token_budget_defaults"]["rows"]
    name = ""
    if gpu is not None and str(gpu).upper() != "CPU":
        gid = gpu_catalog.resolve(str(gpu), "gpu")
        name = gid.lower()
        if memory_gib is None:
            memory_gib = gpu_catalog.memory_gib(gid)
    elif gpu is not None:
        on_cpu = True
    for r in rows:
        if r["when"] == "cpu":
            if on_cpu:
                return r["max_num_batched_tokens"], r["max_num_seqs"]
            continue
        if memory_gib is None:
            continue
        if memory_gib >= r.get("min_memory_gib", 0) and not (r.get("not_name") and r["not_name"] in name):
            return r["max_num_batched_tokens"], r["max_num_seqs"]
    last = rows[-1]
    return last["max_num_batched_tokens"], last["max_num_seqs"]


def gpu_rows() -> list[dict]:
    """One row per GPU of the catalog: which of the table's kernels vLLM 0.32 runs on it, and the
    server's default token budget there (what chapter 01 and the technique-map widget show)."""
    out = []
    for gid in gpu_catalog.ids():
        g = gpu_catalog.catalog()[gid]
        cc = float(g["compute_capability"])
        row = {"gpu": gpu_catalog.class_name(gid), "arch": g["arch"], "compute_capability": cc,
               "fp8": fp8_mode(cc) or "no"}
        for rid in rules():
            row[rid] = cc >= min_capability(rid)
        row["max_num_batched_tokens"], row["max_num_seqs"] = batch_defaults(gid)
        out.append(row)
    return out


def _flags_in(needle: list, hay: list) -> bool:
    """Whether ``needle`` appears as a contiguous run in ``hay`` (a rule's flags inside a technique's)."""
    n = len(needle)
    return n > 0 and any(list(hay[i:i + n]) == list(needle) for i in range(len(hay) - n + 1))


def technique_verdict(enable_flags, gpu) -> dict:
    """What the hardware table says about a technique's vLLM flags on one GPU (a catalog name/alias).

    Returns ``{"ruled_out": bool, "why": str, "rules": [rule ids matched]}``, read only from
    ``assets/hardware_rules.yaml``: the floor of the course's CUDA builds (``platform.vllm_cuda``, when
    the table has it), the rules whose ``flags`` appear in ``enable_flags`` (the technique runs when at
    least one of them holds on this GPU: FP8 weights run weight-only below the W8A8 floor), and for
    ``--attention-backend X`` the backend vLLM itself picks on that GPU (the ``attention`` section)."""
    flags = [str(f) for f in enable_flags]
    cc = capability(gpu)
    if cc is None:
        raise CourseError(f"unknown GPU {gpu!r}: give a name or alias of assets/gpus.yaml")
    gid = gpu_catalog.resolve(str(gpu), "gpu")
    floor = table().get("platform", {}).get("vllm_cuda")
    if floor is not None and cc < float(floor["min_capability"]):
        return {"ruled_out": True, "rules": ["vllm_cuda"],
                "why": f"vLLM 0.32's CUDA builds need compute capability >= {floor['min_capability']} "
                       f"(this GPU: {cc}); nothing of vLLM's GPU engine runs here"}
    matched = [rid for rid, r in rules().items() if _flags_in(r.get("flags", []), flags)]
    if matched:
        ok = [rid for rid in matched if cc >= min_capability(rid)]
        if not ok:
            need = min(min_capability(rid) for rid in matched)
            return {"ruled_out": True, "rules": matched,
                    "why": f"needs compute capability >= {need} ({', '.join(matched)}); this GPU: {cc}"}
        return {"ruled_out": False, "rules": matched, "why": f"runs as {', '.join(ok)}"}
    if "--attention-backend" in flags:
        want = flags[flags.index("--attention-backend") + 1]
        row = table().get("attention", {}).get(gid, {})
        pick = row.get("auto")
        if pick is None and row.get("auto_not_determinable"):
            return {"ruled_out": False, "rules": ["attention"], "why": row["auto_not_determinable"]}
        if pick is not None and pick != want:
            return {"ruled_out": True, "rules": ["attention"],
                    "why": f"vLLM picks {pick} on this GPU, not {want}"}
        return {"ruled_out": False, "rules": ["attention"], "why": f"vLLM picks {pick} here"}
    return {"ruled_out": False, "rules": [], "why": "no hardware rule in the table"}


# What vLLM 0.32 names each checkpoint / --quantization method in its capability refusal
# (vllm/config/vllm.py: VllmConfig._get_quantization_config: "The quantization method {name} is not supported
# for the current GPU. Minimum capability: {min}. Current capability: {cc}."), with the table's rule for its
# floor. tests/test_vllm_oracle_refusal_first.py holds each line equal to the one vLLM raises.
QUANT_REFUSAL_NAMES = {"awq": ("auto_awq", "int4_marlin"), "awq_marlin": ("auto_awq", "int4_marlin"),
                       "fp8": ("fp8", "fp8_w8a16")}


def quantization_refusal(method: str, gpu) -> str | None:
    """vLLM 0.32's refusal of quantization ``method`` on ``gpu`` (its VllmConfig line), or None where it loads
    (or where the method is not one of :data:`QUANT_REFUSAL_NAMES`)."""
    entry = QUANT_REFUSAL_NAMES.get(str(method).lower())
    cc = capability(gpu)
    if entry is None or cc is None or cc == 0.0:
        return None
    name, rid = entry
    floor = round(min_capability(rid) * 10)
    have = round(cc * 10)
    if have >= floor:
        return None
    return (f"VllmConfig: The quantization method {name} is not supported for the current GPU. "
            f"Minimum capability: {floor}. Current capability: {have}.")


def fp8_kv_refusal(gpu) -> str | None:
    """vLLM 0.32's refusal of ``--kv-cache-dtype fp8`` on ``gpu``: the attention backend's constructor line the
    table recorded by calling it under that GPU (``attention.<gpu>.fp8_refusal``), or None where a backend
    holds FP8 KV."""
    cc = capability(gpu)
    if cc is None or cc == 0.0:
        return None
    row = table().get("attention", {}).get(gpu_catalog.resolve(str(gpu), "gpu"), {})
    return row.get("fp8_refusal") if row.get("fp8") is None else None


def fp8_kv_backend(gpu) -> str | None:
    """The attention backend vLLM 0.32 picks for ``--kv-cache-dtype fp8`` on ``gpu`` (the table's ``attention`` row),
    the row's "not determinable on the CPU build: ..." line where the answer turns on what the CPU build lacks (the
    FlashAttention extension on Hopper), or None where vLLM refuses (:func:`fp8_kv_refusal` says why)."""
    row = table().get("attention", {}).get(gpu_catalog.resolve(str(gpu), "gpu"), {})
    return row.get("fp8") or row.get("fp8_not_determinable")


def int4_kernel(gpu, rule_id: str = "int4_marlin") -> str | None:
    """The kernel class vLLM 0.32's ``choose_mp_linear_kernel`` picks for the INT4 checkpoint of ``rule_id``
    (int4_marlin: AWQ; gptq) when the engine builds the model's linear layers on ``gpu`` (the ``int4_kernels``
    section: MacheteLinearKernel on Hopper, MarlinLinearKernel elsewhere from Turing); None where it does not load."""
    row = table().get("int4_kernels", {}).get(gpu_catalog.resolve(str(gpu), "gpu"))
    if row is None or rule_id not in row:
        raise CourseError(f"no INT4 kernel for {gpu!r} / {rule_id!r} in assets/hardware_rules.yaml; "
                          "regenerate it with `python -m inferopt hardware-table` or name a catalog GPU")
    return row[rule_id]


def model_dtype(gpu, checkpoint_dtype: str = "bfloat16") -> str | None:
    """The model dtype vLLM 0.32's ``--dtype auto`` resolves to on ``gpu`` for a checkpoint saved in
    ``checkpoint_dtype`` (its config.json ``torch_dtype``): :func:`auto_dtype` over the table's ``platform.bf16_dtype``
    floor. None for an unknown GPU, the CPU, or a table without that rule. The one place the course's GPU commands
    (the planner's, the engine's through :func:`inferopt.serving.gpu_flags.for_gpu`) take their ``--dtype`` from."""
    cc = capability(gpu)
    ok = None if cc is None or cc == 0.0 else has_bf16(cc)
    return None if ok is None else auto_dtype(ok, checkpoint_dtype)


# the 16-bit names a config.json or --dtype may use for the two dtypes (vllm/config/model.py _STR_DTYPE_TO_TORCH_DTYPE)
_ALIASES = {"half": "float16", "bf16": "bfloat16", "fp16": "float16"}


def auto_dtype(bf16: bool, checkpoint_dtype: str = "bfloat16") -> str:
    """What ``--dtype auto`` resolves to (vllm/config/model.py: _resolve_auto_dtype) on a CUDA GPU with or without
    bfloat16: a 16-bit checkpoint keeps its own dtype where the GPU runs it, a float32 one (or one the GPU cannot
    run) takes the platform's first, bfloat16 where the GPU has it, else float16. Every quantization method the
    course names (fp8, awq/awq_marlin, gptq, compressed-tensors) accepts both 16-bit activation dtypes
    (get_supported_act_dtypes; tests/test_vllm_oracle_commands.py checks it against the installed vLLM)."""
    # CudaPlatformBase.supported_dtypes (platforms/cuda.py) without its last entry: bfloat16 first where the GPU has it
    supported = ["bfloat16", "float16"] if bf16 else ["float16"]
    want = _ALIASES.get(str(checkpoint_dtype).lower(), str(checkpoint_dtype).lower())
    return want if want in supported else supported[0]


def has_bf16(cap: float) -> bool | None:
    """Whether vLLM 0.32 runs bfloat16 at compute capability ``cap``: the table's ``platform.bf16_dtype`` floor
    (vLLM's check_if_supports_dtype); None when the table has no such rule."""
    rule_ = table().get("platform", {}).get("bf16_dtype")
    return None if rule_ is None else cap >= float(rule_["min_capability"])
