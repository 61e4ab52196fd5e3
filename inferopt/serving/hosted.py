"""The course on a hosted notebook (Google Colab, Kaggle): the first cell's plan, from the runtime's own answers.

    from inferopt.serving import hosted
    p = hosted.plan_for(hosted.EXAMPLES["colab-t4"])     # pure: faked nvidia-smi answers in, commands out
    p.commands        # [install the course, install vLLM's build for this driver, prepare the model, start the engine]
    p.start_line      # 'GPU engine: GPU T4 (...): dtype float16: no bfloat16 (...)'
    hosted.first_cell()   # on Colab/Kaggle: probes nvidia-smi, runs the plan; elsewhere: None (runs nothing)

The plan is built from the same pure functions as ``make setup`` and the chapters: the builds from
:func:`inferopt.serving.gpu_install.choose`, the engine's memory share from
:func:`inferopt.serving.gpu_share.engine_share` (an explicit ``--gpu-memory-utilization`` computed from the
GPU's free memory), and the engine command from :class:`~inferopt.serving.engine.VLLMServer` for that GPU
(its dtype: :mod:`inferopt.serving.gpu_flags`). Which runtime this is: Colab sets ``COLAB_RELEASE_TAG``,
Kaggle ``KAGGLE_KERNEL_RUN_TYPE`` (``assets/gpu_builds.yaml`` runtimes).

:data:`EXAMPLES` are faked answers for the runtimes' GPUs (each line cites where its driver comes from); CI
runs chapter 00b and tests/test_hosted.py with them, since no hosted GPU is reachable from CI.
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass

from inferopt import assets
from inferopt.errors import CourseError
from inferopt.serving import gpu_install

COURSE_DIRS = {"colab": "/content/inference-course", "kaggle": "/kaggle/working/inference-course"}
KV_CACHE_GIB = 1.0          # the course's default KV budget (as on the CPU engine): the same lessons' sizes
MiB = 1 << 20
# Faked runtime answers (nvidia-smi query, CUDA header, memory.free/total in MiB, Python). Totals are the GPU
# catalog's memory_mib_reported; the free figures are examples (a fresh runtime with a few hundred MiB in use).
EXAMPLES = {
    # Colab's T4 driver 550.54.15 / CUDA 12.4: googlecolab/colabtools#5416, #5081
    "colab-t4": {"runtime": "colab", "query": "Tesla T4, 550.54.15, 7.5", "cuda": "12.4",
                 "memory": "15095, 15360", "python": "3.12"},
    # Kaggle's "GPU T4 x2" (Kaggle/kaggle-cli#490); its driver is not published: an R550 driver as an example
    "kaggle-t4x2": {"runtime": "kaggle", "query": "Tesla T4, 550.163.01, 7.5\nTesla T4, 550.163.01, 7.5",
                    "cuda": "12.4", "memory": "15095, 15360\n15095, 15360", "python": "3.11"},
    # an L4 runtime (named in issue #31; not confirmed by a public Kaggle page): an R570 driver as an example
    "kaggle-l4": {"runtime": "kaggle", "query": "NVIDIA L4, 570.133.20, 8.9", "cuda": "12.8",
                  "memory": "22300, 23034", "python": "3.11"},
}


def runtimes() -> dict:
    return assets.load("gpu_builds.yaml")["runtimes"]


def detect_runtime(env=None) -> str | None:
    """'colab', 'kaggle' or None, from the variables each runtime sets."""
    env = os.environ if env is None else env
    for rid, r in runtimes().items():
        if r["detect_env"] in env:
            return rid
    return None


@dataclass(frozen=True)
class HostedPlan:
    runtime: str
    install: gpu_install.InstallPlan
    share_utilization: float | None
    commands: list            # shell lines, in order
    start_line: str           # what the engine's start line will say
    note: str                 # one line: what was chosen, or why nothing runs

    @property
    def ok(self) -> bool:
        return self.install.ok


HOSTED_PACKAGES = ("pyyaml", "jsonschema", "requests", "prometheus_client", "aiohttp", "tqdm", "numpy", "plotly",
                   "ipywidgets", "anywidget")


def course_requirements() -> list[str]:
    """The course's requirement lines (``requirements.in``, the ranges the locks are compiled from) a hosted
    runtime needs beside its own Jupyter (not JupyterLab, the book or the browser tests: Colab and Kaggle bring
    their notebook server)."""
    from inferopt.paths import REPO_ROOT

    src = next((p for p in (REPO_ROOT / "requirements.in", REPO_ROOT / "requirements.txt") if p.is_file()), None)
    if src is None:
        raise CourseError("the course's requirements.in is missing: restore it from git")
    out = []
    for line in src.read_text().splitlines():
        spec = line.split("#")[0].strip()
        name = spec.split("==")[0].strip().lower().replace("-", "_")
        if spec and name in HOSTED_PACKAGES:
            out.append(spec)
    return out


def plan_for(answers: dict, course_dir: str | None = None) -> HostedPlan:
    """The first cell's commands for a runtime that answers ``answers`` (see :data:`EXAMPLES`). Pure."""
    from inferopt.serving.engine import SERVER_MODULE, VLLMServer
    from inferopt.serving.gpu import parse_memory_query
    from inferopt.serving.gpu_share import engine_share

    runtime = answers["runtime"]
    if runtime not in runtimes():
        raise CourseError(f"runtime {runtime!r}: the course knows {', '.join(runtimes())}")
    course = course_dir or COURSE_DIRS[runtime]
    m = gpu_install.machine_from(answers["query"], f"CUDA Version: {answers['cuda']}", answers["python"])
    install = gpu_install.choose(m)
    cmds = ["python -m pip install -q " + " ".join(f"'{r}'" for r in course_requirements()),
            f"python -m pip install -q --no-deps -e {course}"]
    if not install.ok:
        return HostedPlan(runtime, install, None, cmds, "", install.message)
    cmds.append(install.pip_command("python").replace(" install ", " install -q ", 1))
    cmds.append(f"cd {course} && python -m inferopt prepare-model")
    memory = parse_memory_query(answers["memory"])
    if not memory:
        raise CourseError(f"memory answer {answers['memory']!r}: expected 'free, total' in MiB per GPU")
    free, total = memory[0]
    from inferopt.serving.gpu_flags import catalog_id

    gpu = catalog_id(m.gpus[0]) or m.capability
    probe = VLLMServer(kind="gpu", gpu=gpu,
                       kv_cache_gib=KV_CACHE_GIB, gpu_memory_utilization=0.5, quiet=True)
    flags = probe.gpu_flags()
    two_bytes = "float16" if flags.dtype in ("float16", "auto") else flags.dtype   # auto: 16-bit on every CUDA GPU
    share = engine_share(1, free_bytes=free, total_bytes=total, kv_cache_gib=KV_CACHE_GIB,
                         dtype=two_bytes, weight_format="fp16" if two_bytes == "float16" else "bf16")
    srv = VLLMServer(kind="gpu", gpu=probe.gpu, kv_cache_gib=KV_CACHE_GIB,
                     gpu_memory_utilization=share.gpu_memory_utilization, quiet=True)
    argv = srv.command()
    argv[argv.index("--model") + 1] = f"{course}/.cache/models/SmolLM2-135M-Instruct"
    cmds.append(" ".join(["python", "-m", SERVER_MODULE, *argv[argv.index(SERVER_MODULE) + 1:]]))
    return HostedPlan(runtime, install, share.gpu_memory_utilization, cmds, srv.start_line(), install.message)


def here() -> dict | None:
    """This runtime's answers (nvidia-smi query, CUDA header, memory), None when not on a hosted GPU runtime."""
    import platform

    from inferopt.serving.gpu import MEMORY_QUERY, nvidia_smi  # the one place that runs nvidia-smi

    rid = detect_runtime()
    if rid is None or nvidia_smi("-L") is None:
        return None

    def ask(*args):
        return nvidia_smi(*args) or ""

    return {"runtime": rid, "query": ask(*gpu_install.QUERY), "cuda": gpu_install.parse_cuda_line(ask()) or "",
            "memory": ask(*MEMORY_QUERY), "python": platform.python_version()}


def first_cell(dry_run: bool = False, course_dir: str | None = None) -> HostedPlan | None:
    """On Colab or Kaggle: print and run the plan for this runtime (``dry_run``: print only). Elsewhere None."""
    answers = here()
    if answers is None:
        return None
    p = plan_for(answers, course_dir)
    print(p.note)
    for c in p.commands:
        print("$", c)
        if not dry_run:
            if subprocess.run(c, shell=True).returncode != 0:
                raise CourseError(f"the first cell's step failed: {c} (its output is above)")
    return p


def start_engine(plan: HostedPlan, model: str | None = None):
    """Start the planned engine here (a hosted GPU runtime, after :func:`first_cell`): the GPU's dtype and the
    plan's explicit memory share. Returns the running server; stop it with ``.stop()``."""
    from inferopt.serving.engine import VLLMServer

    if not plan.ok or plan.share_utilization is None:
        raise CourseError(f"nothing to start: {plan.note}")
    answers = here()
    if answers is None:
        raise CourseError("start_engine runs on a hosted GPU runtime (Colab, Kaggle); elsewhere use VLLMServer")
    m = gpu_install.machine_from(answers["query"], "", answers["python"])
    from inferopt.serving.gpu_flags import catalog_id

    return VLLMServer(model, kind="gpu", gpu=catalog_id(m.gpus[0]) or m.capability, kv_cache_gib=KV_CACHE_GIB,
                      gpu_memory_utilization=plan.share_utilization).start()
