"""The one place that asks this machine for a GPU, and picks the engine from the answer.

- :func:`gpus` runs ``nvidia-smi --query-gpu=name,memory.total`` once per process (cached) and
  answers ``[{"name": "NVIDIA H100 80GB HBM3", "memory_gib": 79.6}, ...]`` (GiB = 2^30 B, as the
  driver reports it); ``[]`` when there is no ``nvidia-smi``, it fails, or it lists nothing.
- :func:`gpu_present` is ``bool(gpus())``.
- :func:`engine_kind` answers ``'cpu'`` or ``'gpu'``: ``INFEROPT_ENGINE`` when set, else ``'gpu'``
  exactly when a GPU is present.

The engine, the environment check and the GPU banner all ask here (the Makefile keeps its own
shell probe, ``nvidia-smi -L``, to choose what ``make setup`` installs).
"""
from __future__ import annotations

import os
import shutil
import subprocess
from functools import lru_cache

from inferopt.errors import CourseError

QUERY = ["--query-gpu=name,memory.total", "--format=csv,noheader,nounits"]


def parse_query(out: str) -> list[dict]:
    """GPUs from the output of ``nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits``
    (one ``name, MiB`` line per GPU; lines that do not parse are skipped)."""
    found = []
    for line in out.strip().splitlines():
        name, _, mib = line.rpartition(",")
        try:
            found.append({"name": name.strip(), "memory_gib": round(float(mib) / 1024, 1)})
        except ValueError:
            continue
    return [g for g in found if g["name"]]


@lru_cache(maxsize=1)
def _probe() -> tuple:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return ()
    try:
        res = subprocess.run([exe, *QUERY], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ()
    if res.returncode != 0:
        return ()
    return tuple(tuple(sorted(g.items())) for g in parse_query(res.stdout))


def gpus() -> list[dict]:
    """The GPUs ``nvidia-smi`` lists (name, memory_gib); [] without one. Probed once per process."""
    return [dict(g) for g in _probe()]


def forget() -> None:
    """Probe again at the next call (after a driver was installed, or in tests)."""
    _probe.cache_clear()


def gpu_present() -> bool:
    """True when ``nvidia-smi`` lists at least one GPU."""
    return bool(gpus())


def engine_kind() -> str:
    """'cpu' or 'gpu': ``INFEROPT_ENGINE`` when set, else 'gpu' exactly when nvidia-smi sees a GPU."""
    forced = os.environ.get("INFEROPT_ENGINE", "").strip().lower()
    if forced in ("cpu", "gpu"):
        return forced
    if forced:
        raise CourseError(f"INFEROPT_ENGINE={forced!r} is not understood; use 'cpu' or 'gpu' (or unset it).")
    return "gpu" if gpu_present() else "cpu"


# ---------------------------------------------------------------- free memory (for the engines' shares)
MEMORY_QUERY = ["--query-gpu=memory.free,memory.total", "--format=csv,noheader,nounits"]
MiB = 1 << 20


def parse_memory_query(out: str) -> list[tuple[int, int]]:
    """(free_bytes, total_bytes) per GPU from ``nvidia-smi --query-gpu=memory.free,memory.total
    --format=csv,noheader,nounits`` (MiB per line; lines that do not parse are skipped)."""
    found = []
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        try:
            free, total = (int(float(p)) * MiB for p in parts[:2])
        except ValueError:
            continue
        if len(parts) >= 2 and 0 <= free <= total and total > 0:
            found.append((free, total))
    return found


def memory_info(device: int = 0) -> tuple[int, int] | None:
    """(free_bytes, total_bytes) of one GPU now, or None without a GPU. Not cached: free memory changes.

    PyTorch's ``torch.cuda.mem_get_info`` (``cudaMemGetInfo``, the figure vLLM budgets from:
    ``vllm/v1/worker/utils.py: request_memory`` compares ``free_memory`` with
    ``ceil(total_memory x gpu_memory_utilization)``) when this Python's torch sees CUDA, else
    ``nvidia-smi`` (whose MiB total is a little above cudaMemGetInfo's)."""
    try:
        import torch

        if torch.cuda.is_available() and device < torch.cuda.device_count():
            free, total = torch.cuda.mem_get_info(device)
            return int(free), int(total)
    except Exception:   # a CPU torch, a broken driver: fall back to nvidia-smi
        pass
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        res = subprocess.run([exe, *MEMORY_QUERY], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    found = parse_memory_query(res.stdout) if res.returncode == 0 else []
    return found[device] if device < len(found) else None


def nvidia_smi(*args: str, timeout: float = 20) -> str | None:
    """What ``nvidia-smi ARGS`` prints (stdout), or None when there is no nvidia-smi or it fails: the one
    place that runs it for the install choice (``gpu_install.probe``) and the hosted first cell."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        res = subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout if res.returncode == 0 else None


def driver_version() -> str | None:
    """The NVIDIA driver version ``nvidia-smi`` reports (None without one)."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=10).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[0].strip() if out else None
