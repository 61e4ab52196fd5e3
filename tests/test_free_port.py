"""free_port never hands one port to two servers: the kernel can give the same free port to two calls in a row
(06b's engines, 2b's pairs and the niced lane's three start-verdict engines start together), and vLLM binds its
port with SO_REUSEADDR before its engine starts, so two engines on one port both start, write one log file, and
one reads the other's refusal (a fresh-clone run, 2026-12-05: the 94,371,840 B engine reported the 50,000,000 B
engine's "estimated maximum model length is 896"). The kernel's answers are scripted here."""
import json
import socket

import pytest

from inferopt.serving import managed_process as mp


class ScriptedSocket:
    """socket.socket whose bind(("host", 0)) gets the next port of a script."""
    script: list = []

    def __init__(self, *a, **k):
        self.port = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def bind(self, addr):
        self.port = ScriptedSocket.script.pop(0)

    def getsockname(self):
        return ("127.0.0.1", self.port)


@pytest.fixture
def scripted(monkeypatch, tmp_path):
    monkeypatch.setenv("INFEROPT_CACHE", str(tmp_path))
    monkeypatch.setattr(mp.socket, "socket", ScriptedSocket)
    monkeypatch.setattr(mp, "_HANDED_OUT", mp.collections.deque(maxlen=512))
    return ScriptedSocket


def test_the_same_free_port_twice_is_handed_out_once(scripted):
    scripted.script = [40001, 40001, 40003]
    assert [mp.free_port(), mp.free_port()] == [40001, 40003]


def test_a_port_a_running_course_server_records_is_skipped(scripted, tmp_path):
    (tmp_path / "servers").mkdir(exist_ok=True)
    (tmp_path / "servers" / "123.pid.json").write_text(json.dumps({"pid": 123, "port": 40005}))
    scripted.script = [40005, 40007]
    assert mp.free_port() == 40007


def test_a_real_port_is_free_and_not_repeated():
    a, b = mp.free_port(), mp.free_port()
    assert a != b
    with socket.socket() as s:
        s.bind(("127.0.0.1", a))                 # nothing is bound to it
