"""The one "stop what a failed cell left running" hook the servers share (ManagedProcess layer)."""
from pathlib import Path

import pytest
from IPython.testing.globalipapp import get_ipython as _test_shell

from inferopt.serving import managed_process

_SHELL = []


def _shell():
    """IPython's test shell (globalipapp starts it once per process and returns None after)."""
    if not _SHELL:
        _SHELL.append(_test_shell())
    return _SHELL[0]


def test_callback_runs_after_a_failed_cell_only_and_is_registered_once(monkeypatch):
    shell = _shell()
    monkeypatch.setattr("IPython.get_ipython", lambda: shell)
    calls = []

    def cb():
        calls.append(1)

    managed_process.after_failed_cell(cb)
    managed_process.after_failed_cell(cb)          # a second server start registers nothing more
    shell.run_cell("x = 1")
    assert calls == []
    shell.run_cell("raise ValueError('a failing cell')")
    assert calls == [1]
    managed_process._FAILED_CELL_CALLBACKS.discard(cb)


class _Sleeper(managed_process.ManagedProcess):
    """The smallest real managed process: `sleep` in its own process group."""

    def start(self):
        self._spawn(["sleep", "60"], Path(self.log))
        return self

    def __init__(self, log):
        self.log = log


def test_a_failed_cell_stops_every_managed_process_and_a_good_cell_none(monkeypatch, tmp_path, capsys):
    shell = _shell()
    monkeypatch.setattr("IPython.get_ipython", lambda: shell)
    # the hook stops *every* running managed process: set aside the suite's own (its shared engine)
    others = [p for p in managed_process.ManagedProcess.running() if not isinstance(p, _Sleeper)]
    for p in others:
        managed_process._RUNNING.discard(p)
    a, b = _Sleeper(tmp_path / "a.log").start(), _Sleeper(tmp_path / "b.log").start()
    pids = [a.proc.pid, b.proc.pid]
    try:
        assert set(_Sleeper.running()) == {a, b}
        shell.run_cell("x = 1")
        assert all(managed_process._alive(p) for p in pids)
        shell.run_cell("raise ValueError('a failing cell')")
        assert a.proc is None and b.proc is None and _Sleeper.running() == []
        assert not any(managed_process._alive(p) for p in pids)
        assert "what it left running was stopped" in capsys.readouterr().out
    finally:
        _Sleeper.stop_all()
        for p in others:
            managed_process._RUNNING.add(p)
    assert all(p.proc is not None for p in others)      # the suite's engine is still up


class _Refuser(managed_process.ManagedProcess):
    def start(self):
        raise RuntimeError("refused")


def test_start_together_keeps_what_it_started_alive(tmp_path):
    """PR_SET_PDEATHSIG follows the thread that forked: children forked by start()'s helper
    threads got SIGTERM the moment those threads ended, until the caller's thread did the forking."""
    import time

    a, b = managed_process.start_together(_Sleeper(tmp_path / "a.log"), _Sleeper(tmp_path / "b.log"))
    try:
        time.sleep(0.5)
        assert a.proc.poll() is None and b.proc.poll() is None
        out = managed_process.start_together(_Sleeper(tmp_path / "c.log"), _Refuser(), return_exceptions=True)
        assert isinstance(out[1], RuntimeError) and out[0].proc.poll() is None
        out[0].stop()
        c = _Sleeper(tmp_path / "d.log")
        with pytest.raises(RuntimeError, match="refused"):
            managed_process.start_together(c, _Refuser())
        assert c.proc is None                  # the one that started was stopped again
    finally:
        _Sleeper.stop_all()
