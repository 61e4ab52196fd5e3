"""The GPU engine's flags for one GPU generation: the model dtype it has, and no KV dtype or quantization it
cannot run. Pure: a GPU (catalog name, alias or compute capability) and the flags asked for in; a
:class:`GpuFlags` (the dtype, the reasons, one line for the engine's start) out, or a one-line
:class:`~inferopt.errors.CourseError` for a flag this GPU cannot run.

    from inferopt.serving.gpu_flags import for_gpu
    f = for_gpu("T4")                       # dtype 'float16': no bfloat16 below the table's bf16 rule
    f.dtype, f.line                          # 'float16', 'GPU T4 (...): dtype float16: no bfloat16 (...)'
    for_gpu("T4", extra_args=["--kv-cache-dtype", "fp8"])   # CourseError: FP8 KV cache needs ...

Every threshold is a rule of ``assets/hardware_rules.yaml`` (read through :mod:`inferopt.planning.hardware`):
``bf16_dtype`` (the model dtype), the ``kv_cache`` rules for ``--kv-cache-dtype`` and the ``quantization``
rules for ``--quantization``, matched by the flags each rule lists. :class:`~inferopt.serving.engine.VLLMServer`
(``kind='gpu'``) asks here when it builds its command, for the GPU it is given (``gpu=``) or the one this
machine's nvidia-smi lists; the chapters' GPU commands are built through the same path
(:func:`inferopt.serving.gpu_commands.gpu_command`).
"""
from __future__ import annotations

from dataclasses import dataclass

from inferopt.errors import CourseError

BF16_RULE = "bf16_dtype"


def find_rule(rule_id: str) -> dict | None:
    """A rule of assets/hardware_rules.yaml by id, in whichever section of the table holds it; None if absent."""
    from inferopt.planning import hardware

    for section in hardware.table().values():
        if isinstance(section, dict) and isinstance(section.get(rule_id), dict) and "min_capability" in section[rule_id]:
            return section[rule_id]
    return None


def rule(rule_id: str) -> dict:
    found = find_rule(rule_id)
    if found is None:
        raise CourseError(f"assets/hardware_rules.yaml has no rule {rule_id!r}: regenerate it from vLLM "
                          "(the #28 generator) or restore it from git")
    return found


def cite(rule_id: str) -> str:
    """'vllm/<file>: <function>' (or 'torch/...' for a source in the installed torch) per source, joined by '; '."""
    return "; ".join(f"{s.get('package', 'vllm')}/{s['file']}: {s['function']}" for s in rule(rule_id)["source"])


def supports(capability: float, rule_id: str) -> bool:
    return float(capability) >= float(rule(rule_id)["min_capability"])


@dataclass(frozen=True)
class GpuFlags:
    gpu: str                 # what was asked for (a name or the capability)
    capability: float
    dtype: str               # the --dtype the engine runs with
    reasons: tuple           # why (the rule and its vLLM source)
    line: str                # the engine's start line says this

    def args(self) -> list[str]:
        return ["--dtype", self.dtype]


def catalog_id(name: str) -> str | None:
    """The GPU catalog id for a name as nvidia-smi prints it ('Tesla T4', 'NVIDIA H100 80GB HBM3',
    'NVIDIA A100-SXM4-80GB') or as a learner types it ('T4', 'H100'); None when the catalog has no such GPU."""
    from inferopt.planning import gpu_catalog

    rest = str(name).strip()
    for prefix in ("NVIDIA ", "Tesla "):
        rest = rest.removeprefix(prefix)
    first = rest.split()[0] if rest.split() else rest
    for cand in (str(name).strip(), rest, first, first.split("-")[0]):
        try:
            return gpu_catalog.resolve(cand)
        except CourseError:
            continue
    return None


def _capability(gpu) -> tuple[str, float, str | None]:
    from inferopt.planning import hardware

    if isinstance(gpu, (int, float)) and not isinstance(gpu, bool):
        return "this GPU", float(gpu), None
    gid = catalog_id(str(gpu))
    cap = hardware.capability(gid) if gid else None
    if cap is None or cap == 0.0:
        raise CourseError(f"gpu={gpu!r}: give a CUDA GPU of the catalog (T4, L4, A100, H100, ...) or its compute "
                          "capability, e.g. 7.5")
    return str(gpu), cap, gid


def _bf16(cap: float, gid: str | None) -> tuple[bool | None, str]:
    """(has bfloat16, source): the table's bf16_dtype rule; without it the catalog's bf16_support of a catalog
    GPU (assets/gpus.yaml); None when neither answers (a bare capability and no rule)."""
    from inferopt.planning import hardware

    ok = hardware.has_bf16(cap)
    if ok is not None:
        floor = rule(BF16_RULE)["min_capability"]
        return ok, f"compute capability {cap} {'>=' if ok else '<'} {floor}, {cite(BF16_RULE)}"
    if gid is not None:
        from inferopt.planning import gpu_catalog

        ok = bool(gpu_catalog.entry(gid)["bf16_support"])
        return ok, f"the GPU catalog's bf16_support for {gid}, assets/gpus.yaml"
    return None, "no bfloat16 rule in assets/hardware_rules.yaml and not a catalog GPU"


def _values(args: list[str], flag: str) -> list[str]:
    out = []
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            out.append(args[i + 1])
        elif a.startswith(flag + "="):
            out.append(a.split("=", 1)[1])
    return out


def _rules_for(section: str, flag: str, value: str) -> list[str]:
    """Ids of the table's rules in ``section`` whose flags are ``flag value`` (fp8 matches fp8_e4m3 too)."""
    from inferopt.planning import hardware

    ids = []
    for rid, r in hardware.table().get(section, {}).items():
        f = r.get("flags", [])
        if len(f) >= 2 and f[0] == flag and (value == f[1] or value.startswith(f[1] + "_")):
            ids.append(rid)
    return ids


def for_gpu(gpu, dtype: str | None = None, extra_args=(), checkpoint_dtype: str = "bfloat16") -> GpuFlags:
    """The dtype for ``gpu`` and a check of the KV dtype / quantization flags in ``extra_args``.
    ``checkpoint_dtype``: the model's config.json ``torch_dtype``; without an explicit ``dtype`` the command states
    what vLLM's ``--dtype auto`` resolves to on this GPU (:func:`inferopt.planning.hardware.auto_dtype`)."""
    from inferopt.planning import hardware

    name, cap, gid = _capability(gpu)
    bf16, src = _bf16(cap, gid)
    if bf16 is None:
        raise CourseError(f"gpu={gpu!r}: {src}, so the course cannot say which --dtype it runs; regenerate "
                          "assets/hardware_rules.yaml (python -m inferopt hardware-table) or name a catalog GPU")
    if dtype in (None, "auto"):
        chosen = hardware.auto_dtype(bf16, checkpoint_dtype)
        if chosen == "bfloat16":
            why = f"bfloat16: the GPU has it ({src})"
        elif bf16:
            why = f"float16: the checkpoint's own dtype, which the GPU runs ({src})"
        else:
            why = f"float16: no bfloat16 ({src})"
    else:
        chosen = {"half": "float16", "bf16": "bfloat16"}.get(dtype, dtype)
        if chosen == "bfloat16" and bf16 is False:
            raise CourseError(f"dtype bfloat16 on {name} (compute capability {cap}): vLLM runs bfloat16 only where "
                              f"the GPU has it ({src}); use dtype='float16'")
        why = f"{chosen}: asked for"
    reasons = [why]
    args = [str(a) for a in extra_args]
    for flag, section, what in (("--kv-cache-dtype", "kv_cache", "KV cache"), ("--quantization", "quantization",
                                                                               "quantization")):
        for value in _values(args, flag):
            if value in ("auto", "none"):
                continue
            ids = _rules_for(section, flag, value)
            if not ids:
                continue                        # a method the table does not cover: vLLM's own check decides
            if not any(supports(cap, rid) for rid in ids):
                need = min(float(rule(rid)["min_capability"]) for rid in ids)
                raise CourseError(f"{flag} {value} on {name} (compute capability {cap}): vLLM runs this {what} "
                                  f"only from compute capability {need} ({'; '.join(cite(r) for r in ids)}); "
                                  f"drop the flag for this GPU")
            reasons.append(f"{flag} {value}: runs from {min(float(rule(r)['min_capability']) for r in ids)} "
                           f"({'; '.join(cite(r) for r in ids)})")
    line = f"GPU {'' if gid is None and name == 'this GPU' else name + ' '}(compute capability {cap}): dtype {why}"
    return GpuFlags(name, cap, chosen, tuple(reasons), line)
