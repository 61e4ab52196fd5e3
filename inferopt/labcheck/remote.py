"""The checker's side of a graded task: the copy of the package the submission runs from, the
submission's process (``sandbox.py``), and stand-ins for the learner's functions.

A ``Proxy`` looks like the learner's function to a check (``labcheck.lab2.task1(ns)`` calls it as
usual); each call sends the arguments to the submission's process as data (``wire``), runs the
learner's function there, and brings the result back. The references the check compares with stay
in this process: the submission's process has neither them nor the checks on its import path, and
may not open their files.
"""
from __future__ import annotations

import builtins
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from inferopt.errors import CourseError
from inferopt.labcheck import (
    _ACTIVE_TARGETS,
    CheckFailed,
    Copied,
    Escaped,
    Probed,
    Shortcut,
    wire,
)
from inferopt.paths import ASSETS, REPO_ROOT

PACKAGE = Path(__file__).resolve().parent.parent
# what the submission's process may import from inferopt/labcheck: the public helpers and its own code
SHIM_LABCHECK = ("__init__.py", "cells.py", "honesty.py", "sandbox.py", "verdicts.py", "watch.py", "wire.py")
ALLOW = (".venv", "assets", ".cache", "inferopt" + os.sep)

BOOT = """import os, sys
shim, repo = sys.argv[1], sys.argv[2]
ed = lambda f: str(getattr(f, '__module__', '') or type(f).__module__).startswith('__editable__')
sys.meta_path[:] = [f for f in sys.meta_path if not ed(f)]
sys.path_hooks[:] = [h for h in sys.path_hooks if not ed(h)]
sys.path_importer_cache.clear()
for m in [m for m in sys.modules if m.startswith(('__editable__', 'inferopt'))]:
    del sys.modules[m]
keep = lambda p: p and not (os.path.realpath(p) + os.sep).startswith(repo + os.sep) or '.venv' in p
sys.path[:] = [shim] + [p for p in sys.path if keep(p)]
import inferopt
if not inferopt.__file__.startswith(shim):
    raise SystemExit('the course package did not load from the copy made for grading')
import runpy
runpy.run_module('inferopt.labcheck.sandbox', run_name='__main__')
"""


# with user namespaces (``unshare -r -m``), the submission's process also gets a mount namespace in which
# these folders of the course are empty: not only closed by the audit hook, but not on disk for it
HIDE = ("solutions", ".git", "book", "build", "tests", "inferopt/labcheck")
MOUNT = 'for d in "$@"; do [ "$d" = -- ] && break; mount -t tmpfs none "$d"; shift; done; shift; exec "$@"'


def hidden_prefix() -> list[str]:
    """``unshare ... sh -c MOUNT`` with the folders to hide, or [] where user namespaces are not allowed."""
    dirs = [str(REPO_ROOT / d) for d in HIDE if (REPO_ROOT / d).is_dir()]
    prefix = ["unshare", "-r", "-m", "sh", "-c", MOUNT, "sh", *dirs, "--"]
    if _CAN_UNSHARE["v"] is None:  # tried once per process, with the real folders
        try:
            _CAN_UNSHARE["v"] = shutil.which("unshare") is not None and subprocess.run(
                [*prefix, "true"], capture_output=True, timeout=20, check=False).returncode == 0
        except (OSError, subprocess.SubprocessError):
            _CAN_UNSHARE["v"] = False
    return prefix if _CAN_UNSHARE["v"] else []


_CAN_UNSHARE: dict = {"v": None}


def shim(root: Path) -> Path:
    """Copy the package (without the checks, their references and the grader) and the assets under root."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    dst = root / "shim"
    shutil.copytree(PACKAGE, dst / "inferopt", ignore=ignore)
    lc = dst / "inferopt" / "labcheck"
    for p in lc.iterdir():
        if p.name not in SHIM_LABCHECK:
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    shutil.copytree(ASSETS, dst / "assets", ignore=ignore)
    return dst


def _exception(info: dict) -> BaseException:
    name, msg, where = info.get("type", "Exception"), info.get("msg", ""), info.get("where", "")
    if name == "NotImplementedError":
        return NotImplementedError(msg)
    if name == "CourseError":
        return CourseError(msg)
    base = getattr(builtins, info.get("base", ""), Exception)
    if not (isinstance(base, type) and issubclass(base, Exception)) or base.__name__ != name:
        base = type(name, (base if isinstance(base, type) and issubclass(base, Exception) else Exception,), {})
    try:
        exc = base(msg + where)
    except TypeError:
        exc = type(name, (Exception,), {})(msg + where)
    return exc


class Proxy:
    """Stands for one of the learner's functions; calling it runs the function in the submission's process."""

    def __init__(self, client, name: str, info: dict):
        self._client, self._name = client, name
        self.__name__ = self.__qualname__ = info.get("function", name)
        self.__never_returns__ = bool(info.get("never_returns"))

    def __call__(self, *args, **kwargs):
        return self._client.call(self._name, args, kwargs)


class Client:
    def __init__(self, task: str, ns: dict):
        self.task, self.ns, self.proc, self.sync = task, ns, None, []
        self.tmp = tempfile.TemporaryDirectory(prefix="inferopt-submission-")

    def start(self, job: dict, targets: list) -> dict:
        root = Path(self.tmp.name)
        shim_dir = shim(root)
        work = root / "work"
        work.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "INFEROPT"))}
        env.update(INFEROPT_CACHE=str(root / "cache"), INFEROPT_RESULTS=str(root / "results"))
        self.hidden = hidden_prefix()
        self.proc = subprocess.Popen([*self.hidden, sys.executable, "-I", "-B", "-c", BOOT, str(shim_dir), str(REPO_ROOT)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     cwd=work, env=env, text=True, encoding="utf-8")
        self._send({"release_cells": job["release_cells"], "required": job["required"],
                    "submission_cells": job["submission_cells"], "targets": [list(t) for t in targets],
                    "repo": str(REPO_ROOT), "shim": str(shim_dir), "allow": list(ALLOW)})
        ready = self._read()
        if "error" in ready:
            raise CheckFailed(f"{self.task}: your cells could not be loaded for grading ({ready['error']})")
        return ready

    def _send(self, obj) -> None:
        try:
            self.proc.stdin.write(wire.dumps(obj) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise CheckFailed(f"{self.task}: your code ended the process it was graded in") from None

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise CheckFailed(f"{self.task}: your code ended the process it was graded in (exit, os._exit or a crash)")
        return wire.loads(line)

    def flags(self, flags: dict, where: str) -> None:
        """Raise the verdict for what the submission's process recorded (files, checks, programs)."""
        if flags.get("copied"):
            raise Copied(f"{self.task}: {where} reads {flags['copied']} while it is graded: no points for work taken "
                         "from there; write it yourself")
        if flags.get("probed"):
            raise Probed(f"{self.task}: {where} calls the lab's check ({flags['probed']}): asking the check for the "
                         "accepted answer is not an answer; write it yourself")
        if flags.get("spawned"):
            raise Escaped(f"{self.task}: {where} starts another program ({flags['spawned']}) while it is graded; "
                           "write it in Python, in the notebook")

    def call(self, name: str, args, kwargs):
        sync = {k: wire.encode(self.ns[k]) for k in self.sync if k in self.ns}
        self._send({"op": "call", "name": name, "args": wire.encode(list(args)), "kwargs": wire.encode(dict(kwargs)),
                    "forbid": [list(t) for block in _ACTIVE_TARGETS for t in block], "sync": sync})
        reply = self._read()
        for k, v in reply.get("sync", {}).items():
            wire.assign(self.ns, k, wire.decode(v))
        if reply.get("printed"):
            print(reply["printed"], end="")
        self.flags(reply.get("flags", {}), f"`{name}`")
        if reply.get("hits"):
            raise Shortcut(f"{self.task}: `{name}` calls {reply['hits'][0]} instead of computing it: write it yourself")
        if "raise" in reply:
            raise _exception(reply["raise"])
        return wire.decode(reply.get("ok"))

    def rebind(self, inputs: dict, names) -> dict:
        """The learner's values for ``names`` when the release names in ``inputs`` have other values: their
        statements run again in the submission's process (see ``sandbox.rebind``). Raises what they raise."""
        self._send({"op": "rebind", "inputs": {k: wire.encode(v) for k, v in inputs.items()}, "names": list(names),
                    "forbid": [list(t) for block in _ACTIVE_TARGETS for t in block]})
        reply = self._read()
        self.flags(reply.get("flags", {}), "a cell of your notebook")
        if reply.get("hits"):
            raise Shortcut(f"{self.task}: a cell of your notebook calls {reply['hits'][0]}: write it yourself")
        if reply.get("raise"):
            raise _exception(reply["raise"])
        return {k: wire.decode(v) for k, v in reply["values"].items()}

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.write('{"op": "exit"}\n')
                self.proc.stdin.close()
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired, ValueError):
                self.proc.kill()
        self.tmp.cleanup()


