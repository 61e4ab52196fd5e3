"""``INFEROPT_CPU_ISA=avx2`` (inferopt/serving/cpu_isa.py): the CPU engine runs vLLM's AVX2 kernels, the
stand-in for an AVX2-only machine that issue #33 measures the suite on. Checked on the engine's own processes:
which of vLLM's kernel libraries each has mapped."""
from __future__ import annotations

import os

import pytest
from kv_agreement import assert_kv_agrees

from inferopt.errors import CourseError
from inferopt.serving import cpu_isa
from inferopt.serving.engine import VLLMServer

kernel_libs = cpu_isa.kernel_libs


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
    # bfloat16: on an AMX machine vLLM would send its small bf16 GEMMs to an AMX kernel that only the AVX-512
    # library has (the limited engine crashed so on an AMX Xeon until the hook answered AMX as absent)
    # (its shape is one of the memory calculator's checks: tests/test_memory_engine_agreement.py)
    with VLLMServer(own=True, max_model_len=1000, kv_cache_gib=0.5, dtype="bfloat16") as srv:
        limited = kernel_libs(srv.pid)
        assert srv.chat("Hello", max_tokens=4)
        assert_kv_agrees(srv, 0.5, 1000, "bfloat16")
    assert limited == {"_C_AVX2.abi3.so"}, limited


def test_an_engines_own_setting_wins(monkeypatch):
    monkeypatch.setenv(cpu_isa.ENV, "avx2")
    assert cpu_isa.engine_env({cpu_isa.ENV: "native"}) == {cpu_isa.ENV: "native"}
    monkeypatch.delenv(cpu_isa.ENV)
    assert cpu_isa.engine_env({cpu_isa.ENV: "avx2"})["ONEDNN_MAX_CPU_ISA"] == "AVX2"


def test_isa_cost_summary(monkeypatch):
    from inferopt.serving import isa_cost

    row = {"kernels": [], "requests": 8}
    rows = [{**row, "isa": "native", "ready_s": 30, "ttft_ms": 100, "tpot_ms": 20},
            {**row, "isa": "avx2", "ready_s": 33, "ttft_ms": 160, "tpot_ms": 21},
            {**row, "isa": "native", "ready_s": 40, "ttft_ms": 120, "tpot_ms": 30},
            {**row, "isa": "avx2", "ready_s": 44, "ttft_ms": 200, "tpot_ms": 33}]
    out = isa_cost.summarize(rows)
    assert out["native"] == {"ready_s": 35, "ttft_ms": 110, "tpot_ms": 25}
    assert out["ratio"] == {"ready_s": 1.1, "ttft_ms": 1.64, "tpot_ms": 1.08}
    assert "1.64x" in isa_cost.report(out) and "ready s" in isa_cost.report(out)
    monkeypatch.setenv("INFEROPT_EDITION", "zh")
    zh = isa_cost.report(out)
    assert "就绪" in zh and "ready s" not in zh and "medians" not in zh and "1.64x" in zh
    with pytest.raises(CourseError, match="no avx2 round"):
        isa_cost.summarize(rows[::2])


def test_the_limited_processes_see_an_avx2_only_machine():
    """In a process started with the engine's environment, every torch.cpu probe above AVX2 answers False, and
    vLLM's own dispatch predicates take no AVX-512 or AMX path (asked of vLLM, for bf16 GEMMs of this model's
    shapes); without the limit the same process sees the machine as it is."""
    import subprocess
    import sys

    probe = ("import json, torch\n"
             "from vllm.model_executor.layers.utils import check_cpu_sgl_kernel\n"
             "c = torch.cpu\n"
             "print(json.dumps({'probes': {n: bool(getattr(c, n)()) for n in dir(c) if n.startswith('_is_') and "
             "n.endswith('_supported')}, 'caps': {k: v for k, v in c.get_capabilities().items() if v is True}, "
             "'sgl_bf16': check_cpu_sgl_kernel(576, 576, torch.bfloat16)}))")

    def run(env):
        out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        import json
        return json.loads(out.stdout.strip().splitlines()[-1])

    base = {k: v for k, v in os.environ.items() if k != cpu_isa.ENV}
    limited = run(cpu_isa.engine_env({**base, cpu_isa.ENV: "avx2"}))
    assert limited["probes"].pop("_is_avx2_supported") is True
    assert limited["probes"] and not any(limited["probes"].values()), limited["probes"]
    above = [k for k in limited["caps"] if k.startswith(("avx512", "avx10", "avx_vnni", "amx"))]
    assert not above and limited["caps"].get("avx2") is True, limited["caps"]
    assert limited["sgl_bf16"] is False
    native = run(base)
    assert native["probes"]["_is_avx512_supported"] == avx512()   # the hook acts only where the limit is asked
    if native["probes"].get("_is_amx_tile_supported"):
        assert native["sgl_bf16"] is True                          # the path the limited engine must not take
