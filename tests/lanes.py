"""A lane's nice, carried into every session its processes start (Linux autogroups).

With ``kernel.sched_autogroup_enabled = 1`` (the default of most distribution kernels, and of the
machines this suite runs on) the CPU scheduler first shares time between *autogroups*, one per session
(``setsid``), each at weight 1024 whatever the nice of the processes in it, and only then between the
processes inside one group. Nice acts inside a group only. Engines (serving/managed_process.py starts
each in its own session, so a failed cell can kill its whole process group), Jupyter kernels and
headless browsers all start new sessions: a rest-lane engine at nice 10 then takes as much of a core
as the timed engine beside it. Measured on the 2-core CI machine kind: two busy loops on one core, each
in its own session, one at nice 10, the niced one got 0.494 of the core; with nice 10 written to its
``/proc/<pid>/autogroup`` it got 0.096 (nice 10 vs 0 is weight 110 vs 1024: 110 / 1134 = 0.097).

The fix carries each process's nice into its autogroup (``sched(7)``, "The autogroup feature"):
``renice_new_sessions`` writes, for each session a descendant of the worker started, the highest nice
among the session's processes to their ``/proc/<pid>/autogroup`` (never for the worker's own session:
that autogroup holds the other lane's worker too). ``Sweeper`` does it twice a second on each xdist
worker.

Whether autogroups are on is the kernel's switch (``/proc/sys/kernel/sched_autogroup_enabled``), not the
worker's own ``/proc/<pid>/autogroup``: a process in the *root* group (pid 1's, where no ``setsid`` ever
happened; a CI harness that runs as pid 1 starts the suite there) has an empty file, yet every session it
starts gets an autogroup of its own at weight 1024, beside the root group's tasks at their nice weights.
The project's CI failed so (2026-12-03): the sweeper saw the worker's empty file and never started.
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from pathlib import Path

import psutil

PROC = Path("/proc")
SWITCH = PROC / "sys/kernel/sched_autogroup_enabled"
_SWEEP = threading.Lock()     # held by each sweep; paused() holds it to keep the sweeper out


@contextmanager
def paused():
    """No sweep runs inside this block (a test of renice_new_sessions in a worker whose Sweeper runs)."""
    with _SWEEP:
        yield


def descendants(root: int) -> dict[int, tuple[int, int]]:
    """Every living descendant of ``root``: pid -> (session id, nice) (psutil, as serving/managed_process uses)."""
    out = {}
    try:
        children = psutil.Process(root).children(recursive=True)
    except psutil.NoSuchProcess:
        return out
    for child in children:
        try:
            out[child.pid] = (os.getsid(child.pid), child.nice())
        except (psutil.NoSuchProcess, ProcessLookupError):
            continue
    return out


def enabled(switch: Path = SWITCH) -> bool:
    """The kernel weighs sessions as autogroups (its switch reads 1)."""
    try:
        return switch.read_text().strip() == "1"
    except OSError:
        return False


def autogroup_nice(pid: int) -> int | None:
    """The nice of a process's autogroup ("/autogroup-42 nice 10"), or None (gone, no autogroups, or in the
    root group, whose file is empty)."""
    try:
        return int((PROC / str(pid) / "autogroup").read_text().split()[-1])
    except (OSError, ValueError, IndexError):
        return None


def renice_new_sessions(root: int) -> list[int]:
    """Give each session that descendants of ``root`` started (any session but ``root``'s) the highest nice
    among its processes as its autogroup's nice; return the pids of the sessions whose autogroup changed.
    Processes that vanish, or a write refused (a lower nice needs CAP_SYS_NICE), are left as they are."""
    try:
        root_session = os.getsid(root)
    except ProcessLookupError:
        return []
    sessions: dict[int, list[tuple[int, int]]] = {}
    for pid, (session, nice) in descendants(root).items():
        if session != root_session:
            sessions.setdefault(session, []).append((pid, nice))
    changed = []
    for members in sessions.values():
        target = max(nice for _, nice in members)
        for pid, _ in members:            # one living member's file stands for the session's autogroup
            current = autogroup_nice(pid)
            if current is None:
                continue
            if current != target:
                try:
                    (PROC / str(pid) / "autogroup").write_text(str(target))
                except OSError:
                    break
                changed += [p for p, _ in members]
            break
    return changed


class Sweeper:
    """A daemon thread that calls ``renice_new_sessions(os.getpid())`` every ``period_s``."""

    def __init__(self, period_s: float = 0.5):
        self.period_s = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="lane-autogroups", daemon=True)

    def start(self) -> Sweeper:
        if enabled():         # a kernel without autogroups has nothing to fix (the worker's own file may be
            self._thread.start()        # empty even with them on: see the module's doc)
        return self

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                with _SWEEP:
                    renice_new_sessions(os.getpid())
            except Exception:      # a sweep must never take the worker down
                pass
