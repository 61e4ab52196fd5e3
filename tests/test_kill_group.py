"""stop() returns once the engine's process group is gone, also when the group outlived SIGTERM's grace period
and had to be killed: a fresh-clone CI run (2026-12-05) found an engine's group still there right after stop()
(tests/test_engine.py), its processes (niced, starved beside the timed lane) not ended within the grace period,
SIGKILL'd, and stop() returned without waiting for them. Here the group's leader ignores SIGTERM: it is killed,
and it is gone (reaped, not a zombie of ours) when _kill_group returns."""
import signal
import subprocess
import sys
import time

from inferopt.serving.managed_process import _kill_group, group_alive

IGNORES_TERM = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN)"


def _started(setup: str = "") -> subprocess.Popen:
    """A process leading a group of its own, past ``setup`` (say, its SIGTERM handler set), sleeping."""
    proc = subprocess.Popen([sys.executable, "-c", f"{setup}\nimport time; print('up', flush=True); time.sleep(60)"],
                            start_new_session=True, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "up"
    return proc


def test_a_group_that_ignores_sigterm_is_killed_and_gone_on_return():
    proc = _started(IGNORES_TERM)
    t0 = time.monotonic()
    _kill_group(proc.pid, grace=0.5, proc=proc)
    assert not group_alive(proc.pid), "the group is still there when _kill_group returned"
    assert proc.returncode == -signal.SIGKILL and time.monotonic() - t0 < 5


def test_a_group_that_ends_on_sigterm_is_not_killed():
    proc = _started()
    _kill_group(proc.pid, grace=5, proc=proc)
    assert not group_alive(proc.pid) and proc.returncode == -signal.SIGTERM
