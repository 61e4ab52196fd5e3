"""One GPU probe (inferopt.serving.gpu): the engine, the environment check and the banner all ask it.

This machine kind has no GPU, so the GPU answers come from a stand-in ``nvidia-smi`` on PATH that
prints what the real one prints for ``--query-gpu=name,memory.total --format=csv,noheader,nounits``
(one ``name, MiB`` line per GPU); the no-GPU answers come from the real machine.
"""
from __future__ import annotations

import ast

import pytest

from inferopt.errors import CourseError
from inferopt.paths import REPO_ROOT
from inferopt.serving import banner, engine, envcheck, gpu

H100_X2 = "NVIDIA H100 80GB HBM3, 81559\nNVIDIA H100 80GB HBM3, 81559\n"


@pytest.fixture
def fresh_probe(monkeypatch):
    monkeypatch.delenv("INFEROPT_ENGINE", raising=False)
    gpu.forget()
    yield
    gpu.forget()


def fake_nvidia_smi(tmp_path, monkeypatch, out: str, code: int = 0):
    """Make PATH hold only an ``nvidia-smi`` that checks its arguments and prints ``out``."""
    exe = tmp_path / "bin" / "nvidia-smi"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n"
                   f'[ "$1 $2" = "{" ".join(gpu.QUERY)}" ] || {{ echo "bad args: $*" >&2; exit 64; }}\n'
                   f"printf '%s' '{out}'\nexit {code}\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(exe.parent))


def test_parse_query():
    assert gpu.parse_query(H100_X2) == [{"name": "NVIDIA H100 80GB HBM3", "memory_gib": 79.6}] * 2
    assert gpu.parse_query("") == []
    assert gpu.parse_query("No devices were found\n") == []
    assert gpu.parse_query("NVIDIA A100-SXM4-40GB, [N/A]\nTesla T4, 15360\n") == \
        [{"name": "Tesla T4", "memory_gib": 15.0}]


def test_a_machine_without_nvidia_smi_is_cpu(fresh_probe, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert gpu.gpus() == [] and not gpu.gpu_present() and gpu.engine_kind() == "cpu"


def test_every_caller_sees_the_same_gpus(fresh_probe, tmp_path, monkeypatch):
    fake_nvidia_smi(tmp_path, monkeypatch, H100_X2)
    assert gpu.gpus() == gpu.parse_query(H100_X2)
    assert gpu.gpu_present() and gpu.engine_kind() == "gpu" and engine.engine_kind() == "gpu"
    env = envcheck.check_environment()
    assert env["gpus"] == gpu.gpus() and env["engine"] == "gpu"
    assert "**GPU** engine" in banner.gpu_banner(display=False)
    monkeypatch.setenv("INFEROPT_ENGINE", "cpu")          # the setting wins over the probe
    assert engine.engine_kind() == "cpu" and "**CPU** engine" in banner.gpu_banner(display=False)
    monkeypatch.setenv("INFEROPT_ENGINE", "tpu")
    with pytest.raises(CourseError, match="INFEROPT_ENGINE='tpu' is not understood; use 'cpu' or 'gpu'"):
        gpu.engine_kind()


def test_a_failing_nvidia_smi_means_no_gpu(fresh_probe, tmp_path, monkeypatch):
    fake_nvidia_smi(tmp_path, monkeypatch, "NVIDIA-SMI has failed because it couldn't communicate with the driver", 9)
    assert gpu.gpus() == [] and gpu.engine_kind() == "cpu"


def test_probed_once_per_process(fresh_probe, tmp_path, monkeypatch):
    fake_nvidia_smi(tmp_path, monkeypatch, H100_X2)
    assert gpu.gpu_present()
    (tmp_path / "bin" / "nvidia-smi").unlink()
    assert gpu.gpu_present()                  # cached
    gpu.forget()
    assert gpu.engine_kind() == "cpu"


def test_only_the_probe_runs_nvidia_smi():
    callers = []
    for f in sorted((REPO_ROOT / "inferopt").rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value == "nvidia-smi":   # the executable's name
                callers.append(str(f.relative_to(REPO_ROOT)))
    assert sorted(set(callers)) == ["inferopt/serving/gpu.py"], callers


def test_memory_query_parses_free_and_total_per_gpu():
    from inferopt.serving.gpu import parse_memory_query

    assert parse_memory_query("23012, 24564\n81000, 81559\n") == [(23012 << 20, 24564 << 20), (81000 << 20, 81559 << 20)]
    assert parse_memory_query("[N/A], 24564\n") == []          # a line that does not parse is skipped
    assert parse_memory_query("30000, 24564\n") == []          # free above total is not believed
    assert parse_memory_query("") == []
