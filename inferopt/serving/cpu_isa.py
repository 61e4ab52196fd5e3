"""The CPU engine limited to an older instruction set: a stand-in for a slower machine kind (issue #33).

``INFEROPT_CPU_ISA=avx2`` makes every CPU engine the course starts run the code an AVX2-only x86 machine runs,
on a machine that has AVX-512:

- vLLM's own kernels: ``vllm/platforms/cpu.py`` (``CpuPlatform.import_kernels``) loads ``vllm._C_AVX2`` when
  ``torch.cpu._is_avx512_supported()`` is false, else ``_C``/``_C_AVX512``. ``isa_limit/sitecustomize.py``,
  put on the engine's ``PYTHONPATH``, answers false in each of the engine's processes (the API server, the
  engine core and the worker: they inherit the environment), and so for every other probe above AVX2 (AVX-512
  BF16 and VNNI, AMX: vLLM's AMX GEMM path for bf16 exists only in its AVX-512 library);
- PyTorch's own kernels: ``ATEN_CPU_CAPABILITY=avx2`` (ATen's CPU dispatch, torch/_C DispatchStub);
- oneDNN's: ``ONEDNN_MAX_CPU_ISA=AVX2``.

It changes which code runs, not the machine: a real AVX2-only machine can also be slower for other reasons
(older cores, lower clocks, its neighbours). Unset or ``native``: the engine runs what the machine has.
"""
from __future__ import annotations

import os
from pathlib import Path

from inferopt.errors import CourseError

ENV = "INFEROPT_CPU_ISA"
LIMITS = {"avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}}
HOOK_DIR = Path(__file__).with_name("isa_limit")


KERNEL_LIBS = ("_C.abi3.so", "_C_AVX2.abi3.so", "_C_AVX512.abi3.so")   # vLLM CPU's kernel libraries


def limit(value: str | None = None) -> str | None:
    """``avx2`` when ``value`` (default: ``INFEROPT_CPU_ISA``) asks for it, ``None`` for native (unset, empty or
    ``native``)."""
    value = (os.environ.get(ENV, "") if value is None else value).strip().lower()
    if value in ("", "native"):
        return None
    if value not in LIMITS:
        raise CourseError(f"{ENV}={value!r} is not an instruction-set limit the course knows; use "
                          f"{', '.join(LIMITS)} or native (unset)")
    return value


def engine_env(env: dict) -> dict:
    """``env`` with the CPU engine limited as its ``INFEROPT_CPU_ISA`` says (unchanged for native): an engine's
    own ``env={"INFEROPT_CPU_ISA": ...}`` wins over the notebook's environment."""
    isa = limit(env.get(ENV))
    if isa is None:
        return env
    out = {**env, **LIMITS[isa], ENV: isa}
    out["PYTHONPATH"] = os.pathsep.join(p for p in (str(HOOK_DIR), env.get("PYTHONPATH", "")) if p)
    return out


def kernel_libs(pgid: int) -> set[str]:
    """vLLM's kernel libraries mapped by any process of the process group ``pgid`` (an engine's: the API
    server, its engine core and its worker), read from ``/proc/<pid>/maps``."""
    found = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if os.getpgid(int(proc.name)) != pgid:
                continue
            maps = (proc / "maps").read_text()
        except (OSError, ProcessLookupError):
            continue
        found |= {lib for lib in KERNEL_LIBS if f"/vllm/{lib}" in maps}
    return found
