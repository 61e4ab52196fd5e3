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
