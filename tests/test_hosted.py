"""The hosted-notebook first cell (serving/hosted.py) with the runtimes' answers faked: Colab (a CUDA 12 driver,
a T4) and Kaggle (T4 x2, L4) get vLLM's CUDA 12.9 build, the dtype their GPU has and an explicit memory share;
the real probe path reads a faked nvidia-smi process and the runtime's environment variable."""
import os
import subprocess
import sys

import pytest

from inferopt.errors import CourseError
from inferopt.paths import REPO_ROOT
from inferopt.serving import hosted

CU129 = "vllm==0.32.0+cu129 torch==2.13.0+cu129 --extra-index-url https://wheels.vllm.ai/0.32.0/cu129"


def _engine(plan):
    return next(c for c in plan.commands if "vllm.entrypoints.openai.api_server" in c).split()


def _value(argv, flag):
    return argv[argv.index(flag) + 1]


@pytest.mark.parametrize("example,dtype", [("colab-t4", "float16"), ("kaggle-t4x2", "float16"), ("kaggle-l4", "bfloat16")])
def test_first_cell_plan_for_faked_runtimes(example, dtype):
    p = hosted.plan_for(hosted.EXAMPLES[example])
    assert p.ok and p.install.build == "cu129" and any(CU129 in c for c in p.commands)
    argv = _engine(p)
    assert _value(argv, "--dtype") == dtype and "--kv-cache-dtype" not in argv
    assert "bfloat16" not in argv if dtype == "float16" else True
    util = float(_value(argv, "--gpu-memory-utilization"))
    assert util == pytest.approx(p.share_utilization) and 0 < util < 1
    assert dtype in p.start_line and "\n" not in p.start_line
    course = hosted.COURSE_DIRS[p.runtime]
    assert p.commands[1].endswith(f"-e {course}") and f"cd {course} && python -m inferopt prepare-model" in p.commands
    assert not any("cu128" in c or "jupyterlab" in c for c in p.commands)   # the runtime keeps its own Jupyter


def test_the_share_follows_the_free_memory():
    busy = dict(hosted.EXAMPLES["colab-t4"], memory="8000, 15360")
    assert hosted.plan_for(busy).share_utilization < hosted.plan_for(hosted.EXAMPLES["colab-t4"]).share_utilization
    with pytest.raises(CourseError):
        hosted.plan_for(dict(hosted.EXAMPLES["colab-t4"], memory="500, 15360"))      # no room: one-line refusal


def test_a_runtime_that_cannot_run_vllm_stops_before_installing_it():
    p100 = dict(hosted.EXAMPLES["kaggle-t4x2"], query="Tesla P100-PCIE-16GB, 550.163.01, 6.0")
    p = hosted.plan_for(p100)                  # below the builds' floor (hardware_rules.yaml platform.vllm_cuda)
    assert not p.ok and "INFEROPT_ENGINE=cpu" in p.note and not any("vllm" in c for c in p.commands)
    assert "compute capability 6.0" in p.note and "\n" not in p.note
    old_driver = dict(hosted.EXAMPLES["colab-t4"], query="Tesla T4, 470.82.01, 7.5", cuda="11.4")
    p = hosted.plan_for(old_driver)
    assert not p.ok and "driver >= 525" in p.note and not any("vllm" in c for c in p.commands)
    with pytest.raises(CourseError):
        hosted.plan_for(dict(hosted.EXAMPLES["colab-t4"], runtime="binder"))


def test_detect_runtime():
    assert hosted.detect_runtime({"COLAB_RELEASE_TAG": "release-colab-x"}) == "colab"
    assert hosted.detect_runtime({"KAGGLE_KERNEL_RUN_TYPE": "Interactive"}) == "kaggle"
    assert hosted.detect_runtime({}) is None


def test_the_first_cell_probes_a_faked_colab(tmp_path):
    exe = tmp_path / "nvidia-smi"
    exe.write_text("#!/bin/sh\ncase \"$*\" in\n"
                   "  *compute_cap*) echo 'Tesla T4, 550.54.15, 7.5' ;;\n"
                   "  *memory.free*) echo '15095, 15360' ;;\n"
                   "  *) echo '| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: 12.4 |' ;;\nesac\n")
    exe.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "COLAB_RELEASE_TAG": "fake"}
    code = "from inferopt.serving import hosted; p = hosted.first_cell(dry_run=True); print('OK', p.install.build)"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "OK cu129" in out.stdout and "$ python -m pip install -q vllm==0.32.0+cu129" in out.stdout
    assert "--dtype float16" in out.stdout
    env.pop("COLAB_RELEASE_TAG")
    out = subprocess.run([sys.executable, "-c", "from inferopt.serving import hosted; print(hosted.first_cell(dry_run=True))"],
                         cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "None"                 # not hosted: runs nothing


RUNTIME_ENV = {"colab": "COLAB_RELEASE_TAG", "kaggle": "KAGGLE_KERNEL_RUN_TYPE"}


def _fake_runtime(tmp_path, answers: dict) -> dict:
    """An nvidia-smi on PATH answering like this runtime's GPUs, and the runtime's own environment variable."""
    def lines(text):
        return "; ".join(f"echo '{ln}'" for ln in text.splitlines())

    exe = tmp_path / "nvidia-smi"
    exe.write_text("#!/bin/sh\ncase \"$*\" in\n"
                   f"  *compute_cap*) {lines(answers['query'])} ;;\n"
                   f"  *memory.free*) {lines(answers['memory'])} ;;\n"
                   "  -L) echo 'GPU 0: faked' ;;\n"
                   f"  *) echo '| NVIDIA-SMI x   Driver Version: x   CUDA Version: {answers['cuda']} |' ;;\nesac\n")
    exe.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in RUNTIME_ENV.values()}
    return {**env, "PATH": f"{tmp_path}:{os.environ['PATH']}", RUNTIME_ENV[answers["runtime"]]: "fake"}


@pytest.mark.parametrize("example,gpu,dtype", [("colab-t4", "Tesla T4", "float16"),
                                               ("kaggle-t4x2", "Tesla T4", "float16"),
                                               ("kaggle-l4", "NVIDIA L4", "bfloat16")])
def test_the_first_cell_on_each_faked_runtime(tmp_path, example, gpu, dtype):
    """The probe path the notebook's first cell takes (hosted.first_cell: the runtime's variable, nvidia-smi's
    answers), for Colab's T4 on a CUDA 12 driver and Kaggle's T4 x2 and L4: vLLM's CUDA 12.9 build, the engine
    with its GPU's --dtype (never bfloat16 or an FP8 KV cache on a T4) and an explicit memory share."""
    answers = hosted.EXAMPLES[example]
    code = ("from inferopt.serving import hosted; p = hosted.first_cell(dry_run=True); "
            "print('RUNTIME', p.runtime, p.install.build, p.share_utilization)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=_fake_runtime(tmp_path, answers),
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    runtime, build, share = out.stdout.split("RUNTIME ")[1].split()
    assert (runtime, build) == (answers["runtime"], "cu129") and gpu in out.stdout
    engine = next(ln for ln in out.stdout.splitlines() if "vllm.entrypoints.openai.api_server" in ln).split()
    assert _value(engine, "--dtype") == dtype and "--kv-cache-dtype" not in engine
    assert float(_value(engine, "--gpu-memory-utilization")) == pytest.approx(float(share), abs=1e-3)
    if dtype == "float16":
        assert "bfloat16" not in engine
    assert f"$ python -m pip install -q {CU129}" in out.stdout
