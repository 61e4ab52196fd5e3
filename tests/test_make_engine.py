"""The Makefile's engine choice: `make test` pins the CPU engine unless a GPU run is asked for, and says so;
`make setup` prepares the default model on every engine (the load tests' tokenizer). Run with `make -n`
(nothing is executed) and a stand-in `nvidia-smi` on PATH that lists a GPU, as on a GPU machine."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def gpu_path(tmp_path):
    exe = tmp_path / "nvidia-smi"
    exe.write_text('#!/bin/sh\necho "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000)"\n')
    exe.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("INFEROPT_ENGINE", "ENGINE", "MAKEFLAGS", "MAKELEVEL")}
    env["PATH"] = f"{tmp_path}:{env['PATH']}"
    return env


def make_n(env, *args):
    assert shutil.which("make"), "make is needed for this test (apt-get install make)"
    res = subprocess.run(["make", "-n", "--no-print-directory", *args], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60)
    return res.stdout + res.stderr


def test_fake_gpu_makes_setup_choose_the_gpu_build(gpu_path):
    out = make_n(gpu_path, "setup", "STAMP=/nonexistent/.installed-probe")
    assert "requirements-gpu.txt" in out          # the probe sees the stand-in GPU: the test is not blind


def test_make_test_pins_the_cpu_engine_on_a_gpu_machine_and_says_so(gpu_path):
    out = make_n(gpu_path, "test")
    assert "make test: the cpu engine" in out and "INFEROPT_ENGINE=gpu" in out
    assert "requirements-gpu.txt" not in out


@pytest.mark.parametrize("ask", [["INFEROPT_ENGINE=gpu"], ["ENGINE=gpu"]])
def test_a_gpu_test_run_is_asked_explicitly(gpu_path, ask):
    out = make_n(gpu_path, "test", *ask)
    assert "make test: the gpu engine" in out


def test_an_environment_request_counts_too(gpu_path):
    out = make_n({**gpu_path, "INFEROPT_ENGINE": "gpu"}, "test")
    assert "make test: the gpu engine" in out


def test_setup_prepares_the_default_model_on_every_engine():
    text = (ROOT / "Makefile").read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("setup:"))
    assert "$(MODEL_STAMP)" in line and "filter cpu" not in line
