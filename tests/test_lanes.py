"""tests/lanes.py: a niced process in a session of its own gets its nice as its autogroup's nice,
a process in the caller's session is never touched, and the sweep finds grandchildren. The tests run
with the worker's own Sweeper paused (under xdist as root it runs in this very process)."""
from __future__ import annotations

import os
import subprocess
import time

import lanes
from lanes import Sweeper, autogroup_nice, descendants, enabled, paused, renice_new_sessions

# every machine this suite runs on has autogroups (kernel.sched_autogroup_enabled = 1); where one has none
# there is nothing to carry and the sweep must change nothing. The caller's own group may be the root group
# (empty file), as under a CI harness running as pid 1: that must not hide the autogroups of new sessions.
AUTOGROUPS = enabled()


def _mine() -> int:
    return os.getpriority(os.PRIO_PROCESS, os.getpid())


def _sleeper(step: int, new_session: bool, *, grandchild: bool = False) -> subprocess.Popen:
    cmd = ["nice", "-n", str(step), "sleep", "30"]          # nice -n adds to the caller's nice
    if grandchild:     # a shell in a new session whose child does the sleeping (the shell waits on it)
        cmd = ["sh", "-c", " ".join(cmd) + "; true"]
    return subprocess.Popen(cmd, start_new_session=new_session)


def _wait_nice(nice: int) -> None:
    for _ in range(200):
        if any(n == nice for _, n in descendants(os.getpid()).values()):
            return
        time.sleep(0.01)
    raise AssertionError(f"no descendant reached nice {nice}")


def test_new_session_gets_its_nice_and_own_session_is_left_alone():
    want = min(_mine() + 3, 19)
    with paused():
        own_before = autogroup_nice(os.getpid())
        apart = _sleeper(3, new_session=True)
        beside = _sleeper(3, new_session=False)
        try:
            _wait_nice(want)
            if not AUTOGROUPS:
                assert renice_new_sessions(os.getpid()) == [] and autogroup_nice(apart.pid) is None
                return
            assert autogroup_nice(apart.pid) != want or want == 0    # a new session starts at nice 0...
            changed = renice_new_sessions(os.getpid())
            assert apart.pid in changed and autogroup_nice(apart.pid) == want   # ...and now carries its own
            assert beside.pid not in changed and autogroup_nice(beside.pid) == own_before
            assert autogroup_nice(os.getpid()) == own_before      # the caller's group is untouched
            assert renice_new_sessions(os.getpid()) == []         # a second sweep has nothing left to do
        finally:
            for p in (apart, beside):
                p.kill()
                p.wait()


def test_grandchild_in_a_new_session_is_found():
    want = min(_mine() + 2, 19)
    with paused():
        shell = _sleeper(2, new_session=True, grandchild=True)
        try:
            _wait_nice(want)
            deep = [pid for pid, (_, n) in descendants(os.getpid()).items() if n == want and pid != shell.pid]
            assert deep, "the sleeping grandchild is not among the descendants"
            if not AUTOGROUPS:
                assert renice_new_sessions(os.getpid()) == []
                return
            assert set(deep) <= set(renice_new_sessions(os.getpid()))
            # the session's group takes its highest nice: the shell (at the caller's nice) shares it
            assert all(autogroup_nice(pid) == want for pid in deep + [shell.pid])
            assert renice_new_sessions(os.getpid()) == []         # no flip-flop between the two members
        finally:
            os.killpg(shell.pid, 9)
            shell.wait()


def test_the_kernel_switch_decides_not_the_callers_own_group(tmp_path, monkeypatch):
    """A worker in the root group reads an empty /proc/self/autogroup; its sweeper must still run (the
    project's CI, 2026-12-03, where the harness is pid 1: the sweeper never started and 06b's good canary
    was rolled back again)."""
    switch = tmp_path / "sched_autogroup_enabled"
    for text, on in (("1\n", True), ("0\n", False)):
        switch.write_text(text)
        assert enabled(switch) is on
    assert enabled(tmp_path / "absent") is False
    real = lanes.autogroup_nice
    monkeypatch.setattr(lanes, "autogroup_nice", lambda pid: None if pid == os.getpid() else real(pid))
    sweeper = Sweeper(period_s=0.05).start()
    try:
        assert sweeper.running is AUTOGROUPS
    finally:
        sweeper.stop()
    assert not sweeper.running


def test_rest_lane_engines_wait_longer_for_start_up_than_the_timed_lanes(monkeypatch):
    """The niced lane's engines start on what the timed lane leaves: their hang guard is longer (conftest)."""
    import conftest

    from inferopt.serving.engine import _startup_timeout

    monkeypatch.setattr(conftest, "_CALLER_STARTUP", None)
    monkeypatch.delenv(conftest.STARTUP_ENV, raising=False)
    conftest._set_startup_wait(rest=True)
    assert _startup_timeout(None) == conftest.REST_STARTUP_TIMEOUT_S > 300
    conftest._set_startup_wait(rest=False)
    assert _startup_timeout(None) == 300                     # the live lane: the engine's own default
    monkeypatch.setattr(conftest, "_CALLER_STARTUP", "5000")  # a caller's longer wait holds in both lanes
    conftest._set_startup_wait(rest=True)
    assert _startup_timeout(None) == 5000
    conftest._set_startup_wait(rest=False)
    assert _startup_timeout(None) == 5000
