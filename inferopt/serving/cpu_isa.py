"""The CPU engine limited to an older instruction set: a stand-in for a slower machine kind (issue #33).

``INFEROPT_CPU_ISA=avx2`` makes every CPU engine the course starts run the code an AVX2-only x86 machine runs,
on a machine that has AVX-512:

- vLLM's own kernels: ``vllm/platforms/cpu.py`` (``CpuPlatform.import_kernels``) loads ``vllm._C_AVX2`` when
  ``torch.cpu._is_avx512_supported()`` is false, else ``_C``/``_C_AVX512``. ``isa_limit/sitecustomize.py``,
  put on the engine's ``PYTHONPATH``, answers false in each of the engine's processes (the API server, the
  engine core and the worker: they inherit the environment);
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


def limit() -> str | None:
    """``avx2`` when ``INFEROPT_CPU_ISA`` asks for it, ``None`` for native (unset, empty or ``native``)."""
    value = os.environ.get(ENV, "").strip().lower()
    if value in ("", "native"):
        return None
    if value not in LIMITS:
        raise CourseError(f"{ENV}={value!r} is not an instruction-set limit the course knows; use "
                          f"{', '.join(LIMITS)} or native (unset)")
    return value


def engine_env(env: dict) -> dict:
    """``env`` with the CPU engine limited as ``INFEROPT_CPU_ISA`` says (unchanged for native)."""
    isa = limit()
    if isa is None:
        return env
    out = {**env, **LIMITS[isa], ENV: isa}
    out["PYTHONPATH"] = os.pathsep.join(p for p in (str(HOOK_DIR), env.get("PYTHONPATH", "")) if p)
    return out
