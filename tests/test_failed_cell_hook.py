"""The one "stop what a failed cell left running" hook the servers share (ManagedProcess layer)."""
from IPython.testing.globalipapp import get_ipython as _test_shell

from inferopt.serving import managed_process


def test_callback_runs_after_a_failed_cell_only_and_is_registered_once(monkeypatch):
    shell = _test_shell()
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
