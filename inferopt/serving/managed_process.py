"""A child process the course starts and must never leave behind (vLLM server, router,
Prometheus, the nginx gateway).

``ManagedProcess`` gives a subclass the shared life cycle: spawn in a new process group with
PR_SET_PDEATHSIG (the child gets SIGTERM if the Python that started it dies), stop the whole
group (SIGTERM, then SIGKILL after a grace period), and use as a context manager. ``_spawn``
also records the process among the running ones, so that every one of them is stopped at
interpreter exit and, in a notebook, after a cell that raised (one message names them).
Subclasses add what they start and how they tell it is ready. Also the small helpers they all
need: free ports and a log's last lines.
"""
from __future__ import annotations

import atexit
import collections
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path


def _pdeathsig():
    """Run in the child before exec: SIGTERM when the parent dies."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _answers_signal_0(kill, target: int) -> bool:
    """Whether ``kill(target, 0)`` finds a process (``os.kill``: that pid; ``os.killpg``: any of that group; an
    unreaped zombie counts, one we may not signal too)."""
    try:
        kill(target, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _alive(pid: int) -> bool:
    return _answers_signal_0(os.kill, pid)


def group_alive(pgid: int) -> bool:
    """Whether any process of the process group ``pgid`` is still there (an unreaped zombie counts)."""
    return _answers_signal_0(os.killpg, pgid)


def _kill_group(pgid: int, grace: float = 10.0, proc: subprocess.Popen | None = None) -> None:
    """SIGTERM the process group, wait up to ``grace`` s for all of it to go, then SIGKILL and wait up to
    ``grace`` s again: the group is gone when this returns (unless the kernel takes longer than that to end a
    killed process).

    ``proc`` (the group leader, if it is our child) is reaped while waiting: an unreaped
    leader stays a zombie and would keep the group 'alive' for the whole grace period. The second wait
    matters on a starved machine: a CI run (2026-12-05) found an engine's group still there right after
    ``stop()``, its SIGTERM'd processes (at nice 10 beside a busy timed lane) not ended within the grace
    period, SIGKILL'd, and not yet gone when ``stop()`` returned."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    if _wait_group_gone(pgid, grace, proc):
        return
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return
    _wait_group_gone(pgid, grace, proc)


def _wait_group_gone(pgid: int, seconds: float, proc: subprocess.Popen | None) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        if proc is not None:
            proc.poll()
        if not group_alive(pgid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


_HANDED_OUT: collections.deque = collections.deque(maxlen=512)     # ports free_port gave this process, newest last
_HANDED_LOCK = threading.Lock()


def server_records():
    """``(pid file, its record)`` for every server the course recorded in ``<cache>/servers`` on this machine
    (any process's); the record is None where the file cannot be read."""
    import json

    from inferopt.paths import servers_dir

    for f in servers_dir().glob("*.pid.json"):
        try:
            info = json.loads(f.read_text())
        except (OSError, ValueError):
            info = None
        yield f, info


def _recorded_ports() -> set:
    """The ports the course's servers on this machine record in their pid files (any process's engines)."""
    return {info["port"] for _, info in server_records() if info and isinstance(info.get("port"), int)}


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing is bound to now that this process has not handed out before and that no course server on
    this machine records. The kernel can give the same free port to two calls in a row (two engines started
    together), and vLLM binds its port with SO_REUSEADDR before the engine starts, so both would start up and
    share one log file, and one would fail only at listen()."""
    taken = _recorded_ports()
    with _HANDED_LOCK:
        for _ in range(200):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind((host, 0))
                port = s.getsockname()[1]
            if port not in _HANDED_OUT and port not in taken:
                _HANDED_OUT.append(port)
                return port
    from inferopt.errors import CourseError

    raise CourseError(f"no free port on {host} after 200 tries: too many servers running? Stop some and retry.")


def log_tail(path: Path | None, n: int = 25) -> str:
    """The last ``n`` lines of a log file, or '(no log)'."""
    try:
        lines = Path(path).read_text(errors="replace").splitlines()
    except (OSError, TypeError):
        return "(no log)"
    return "\n".join(lines[-n:])


# every ManagedProcess whose process group is running (weak: a forgotten object can still go)
_RUNNING: weakref.WeakSet = weakref.WeakSet()


class ManagedProcess:
    """Base for a process group this package starts and stops (see module docstring)."""

    proc: subprocess.Popen | None = None
    stop_grace_s: float = 10.0
    workdir: Path | None = None      # a temporary folder the process owns (config, logs, data): deleted on stop()

    def _spawn(self, cmd: list[str], log_path: Path, cpu_cores=None, **popen_kw) -> subprocess.Popen:
        """Start ``cmd`` in its own process group, stdout+stderr to ``log_path`` (and only on
        ``cpu_cores``, inherited by every process and thread it starts, when given); from now on
        it is stopped at interpreter exit and after a failed notebook cell."""
        def preexec():
            _pdeathsig()
            if cpu_cores:
                os.sched_setaffinity(0, set(cpu_cores))

        with open(log_path, "wb") as log:
            self.proc = _popen_in_callers_thread(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                 start_new_session=True, preexec_fn=preexec, **popen_kw)
        _RUNNING.add(self)
        after_failed_cell(_stop_after_failed_cell)
        return self.proc

    @classmethod
    def running(cls) -> list:
        """The instances of this class (and its subclasses) whose process group is running."""
        return [p for p in list(_RUNNING) if isinstance(p, cls)]

    @classmethod
    def stop_all(cls) -> None:
        """Stop every running instance of this class (ManagedProcess.stop_all(): all of them)."""
        for p in cls.running():
            try:
                p.stop()
            except OSError as exc:
                print(f"[inferopt] could not stop {p!r}: {exc}", file=sys.stderr)

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
        _RUNNING.discard(self)

    def group_processes(self) -> list:
        """The running process and all its descendants (psutil.Process objects)."""
        import psutil

        root = psutil.Process(self.proc.pid)
        return [root, *root.children(recursive=True)]

    def memory_mib(self) -> float:
        """Resident memory (RSS, MiB = 2^20 B) of the process and all its children now."""
        import psutil

        if self.proc is None or self.proc.poll() is not None:
            from inferopt.errors import CourseError

            raise CourseError(f"{self!r} is not running: start it before measuring its memory")
        total = 0
        for p in self.group_processes():
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
        return total / (1 << 20)

    def start(self):  # pragma: no cover - subclasses define it
        raise NotImplementedError

    def stop(self) -> None:
        """Stop the whole process group, then delete its temporary folder if it has one."""
        self._terminate()
        if self.workdir is not None:
            import shutil

            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __del__(self):
        try:
            self.stop()
        except Exception:
            pass


_LOCAL = threading.local()


def _popen_in_callers_thread(args, **kw) -> subprocess.Popen:
    """``subprocess.Popen``, run by the thread that called :func:`start_together` when called from
    one of its helper threads (see there), else right here."""
    spawns = getattr(_LOCAL, "spawns", None)
    if spawns is None:
        return subprocess.Popen(args, **kw)
    box, done = {}, threading.Event()
    spawns.put((args, kw, box, done))
    done.wait()
    if "error" in box:
        raise box["error"]
    return box["proc"]


def start_together(*procs, return_exceptions: bool = False) -> list:
    """Start several managed processes at once (each ``start()`` in its own thread) and return
    them in order. Most of a vLLM engine's start-up is one process importing Python modules, so
    two engines on two cores start in little more time than one. If any start fails, the ones
    that started are stopped and the first error is raised; with ``return_exceptions=True``
    (as in ``asyncio.gather``) each failed start's exception takes its place in the list instead
    and the others keep running."""
    import queue

    errors = [None] * len(procs)
    spawns: queue.Queue = queue.Queue()

    def run(i, p):
        _LOCAL.spawns = spawns
        try:
            p.start()
        except BaseException as exc:   # re-raised below, in the caller's thread
            errors[i] = exc

    threads = [threading.Thread(target=run, args=(i, p), daemon=True) for i, p in enumerate(procs)]
    for t in threads:
        t.start()
    # PR_SET_PDEATHSIG fires when the *thread* that forked a child ends, so the helper threads
    # (which end as soon as their start() returns) must not fork: this thread runs their Popen
    while any(t.is_alive() for t in threads):
        try:
            args, kw, box, done = spawns.get(timeout=0.05)
        except queue.Empty:
            continue
        try:
            box["proc"] = subprocess.Popen(args, **kw)
        except BaseException as exc:
            box["error"] = exc
        done.set()
    for t in threads:
        t.join()
    if return_exceptions:
        return [e if e is not None else p for p, e in zip(procs, errors, strict=True)]
    first = next((e for e in errors if e is not None), None)
    if first is not None:
        for p in procs:
            p.stop()
        raise first
    return list(procs)


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



def _stop_after_failed_cell() -> None:
    left = ManagedProcess.running()
    if left:
        names = ", ".join(repr(p) for p in left)
        ManagedProcess.stop_all()
        print(f"[inferopt] the cell failed, so what it left running was stopped: {names}. "
              "Fix the cell and start them again.")


atexit.register(ManagedProcess.stop_all)
