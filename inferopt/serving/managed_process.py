"""A child process the course starts and must never leave behind (vLLM server, Prometheus).

``ManagedProcess`` gives a subclass the shared life cycle: spawn in a new process group with
PR_SET_PDEATHSIG (the child gets SIGTERM if the Python that started it dies), stop the whole
group (SIGTERM, then SIGKILL after a grace period), and use as a context manager. Subclasses
add what they start and how they tell it is ready. Also the small helpers both need: free
ports and a log's last lines.
"""
from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import time
from pathlib import Path


def _pdeathsig():
    """Run in the child before exec: SIGTERM when the parent dies."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_group(pgid: int, grace: float = 10.0, proc: subprocess.Popen | None = None) -> None:
    """SIGTERM the process group, wait up to ``grace`` s for all of it to go, then SIGKILL.

    ``proc`` (the group leader, if it is our child) is reaped while waiting: an unreaped
    leader stays a zombie and would keep the group 'alive' for the whole grace period."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if proc is not None:
            proc.poll()
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def log_tail(path: Path | None, n: int = 25) -> str:
    """The last ``n`` lines of a log file, or '(no log)'."""
    try:
        lines = Path(path).read_text(errors="replace").splitlines()
    except (OSError, TypeError):
        return "(no log)"
    return "\n".join(lines[-n:])


class ManagedProcess:
    """Base for a process group this package starts and stops (see module docstring)."""

    proc: subprocess.Popen | None = None
    stop_grace_s: float = 10.0

    def _spawn(self, cmd: list[str], log_path: Path, **popen_kw) -> subprocess.Popen:
        """Start ``cmd`` in its own process group, stdout+stderr to ``log_path``."""
        with open(log_path, "wb") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True, preexec_fn=_pdeathsig, **popen_kw)
        return self.proc

    def _terminate(self) -> None:
        """Stop the whole process group and reap the leader (no-op when not running)."""
        if self.proc is None:
            return
        _kill_group(self.proc.pid, grace=self.stop_grace_s, proc=self.proc)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.proc = None

    def start(self):  # pragma: no cover - subclasses define it
        raise NotImplementedError

    def stop(self) -> None:
        self._terminate()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __del__(self):
        try:
            self.stop()
        except Exception:
            pass


_FAILED_CELL_CALLBACKS: set = set()


def after_failed_cell(callback) -> None:
    """In a notebook kernel: call ``callback()`` after every cell that raised (registered once per
    callback; nothing outside IPython). The servers use it to stop what a failed cell left running."""
    if callback in _FAILED_CELL_CALLBACKS:
        return
    try:
        from IPython import get_ipython
    except ImportError:
        return
    ip = get_ipython()
    if ip is None:
        return

    def hook(result) -> None:
        if getattr(result, "error_in_exec", None) is not None:
            callback()

    ip.events.register("post_run_cell", hook)
    _FAILED_CELL_CALLBACKS.add(callback)

