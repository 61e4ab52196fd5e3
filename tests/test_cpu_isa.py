"""``INFEROPT_CPU_ISA=avx2`` (inferopt/serving/cpu_isa.py): the CPU engine runs vLLM's AVX2 kernels, the
stand-in for an AVX2-only machine that issue #33 measures the suite on. Checked on the engine's own processes:
which of vLLM's kernel libraries each has mapped."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from inferopt.errors import CourseError
from inferopt.serving import cpu_isa
from inferopt.serving.engine import VLLMServer

KERNEL_LIBS = ("_C.abi3.so", "_C_AVX2.abi3.so", "_C_AVX512.abi3.so")


def kernel_libs(pgid: int) -> set[str]:
    """vLLM's kernel libraries mapped by any process of the process group ``pgid`` (an engine's)."""
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


def avx512() -> bool:
    import torch

    return bool(torch.cpu._is_avx512_supported())


def test_native_and_bad_values(monkeypatch):
    monkeypatch.delenv(cpu_isa.ENV, raising=False)
    assert cpu_isa.limit() is None and cpu_isa.engine_env({"A": "1"}) == {"A": "1"}
    monkeypatch.setenv(cpu_isa.ENV, "native")
    assert cpu_isa.limit() is None
    monkeypatch.setenv(cpu_isa.ENV, "AVX2")
    env = cpu_isa.engine_env({"PYTHONPATH": "/x"})
    assert env["ATEN_CPU_CAPABILITY"] == "avx2" and env["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert env["PYTHONPATH"].split(os.pathsep) == [str(cpu_isa.HOOK_DIR), "/x"]
    assert (cpu_isa.HOOK_DIR / "sitecustomize.py").exists()
    for bad in ("sse2", "avx-2", "512"):
        monkeypatch.setenv(cpu_isa.ENV, bad)
        with pytest.raises(CourseError) as e:
            VLLMServer(own=True).start()          # refused before anything starts
        assert "\n" not in str(e.value) and cpu_isa.ENV in str(e.value) and "avx2" in str(e.value)


@pytest.mark.engine
def test_the_limited_engine_runs_vllms_avx2_kernels(monkeypatch, live_server):
    # the session engine, started under this run's INFEROPT_CPU_ISA: native in a plain run, where on an AVX-512
    # machine it maps another library than the limited engine below (the check's other side)
    session_avx2 = not avx512() or cpu_isa.limit() == "avx2"
    native = kernel_libs(live_server.pid) if live_server.pid else None
    if native is not None:
        assert native, "no vLLM kernel library found in the session engine's processes"
        assert (native == {"_C_AVX2.abi3.so"}) == session_avx2, native
    monkeypatch.setenv(cpu_isa.ENV, "avx2")
    with VLLMServer(own=True, max_model_len=256, kv_cache_gib=0.25) as srv:
        limited = kernel_libs(srv.pid)
        assert srv.chat("Hello", max_tokens=4)
    assert limited == {"_C_AVX2.abi3.so"}, limited
