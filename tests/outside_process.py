"""Waiting for a process a test started outside the course's own managers (`make lab`, an engine a
room's instructor started by hand) until its HTTP endpoint answers."""
from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

import requests


def wait_until_answers(proc: subprocess.Popen, url: str, timeout_s: float, output: Callable[[], str],
                       what: str, poll_s: float = 0.5) -> None:
    """Return once ``url`` answers 200; fail (with the tail of ``output()``) when ``proc`` exits first
    or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        assert proc.poll() is None, f"{what} exited early:\n{output()[-3000:]}"
        try:
            if requests.get(url, timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        assert time.monotonic() < deadline, f"{what} did not answer within {timeout_s:.0f} s:\n{output()[-3000:]}"
        time.sleep(poll_s)
