"""The engine's start-up reads the environment safely while another thread changes it, and polls its own loopback
address without a proxy (a CI run lost its session engine to pytest's PYTEST_CURRENT_TEST changing mid-copy)."""
from __future__ import annotations

import http.server
import threading

import pytest
import requests

from inferopt.serving import engine


class _Shifting(dict):
    """An environment whose first walk breaks the way os.environ does when a key goes away mid-iteration."""

    def __init__(self, *a, fails=1, **k):
        super().__init__(*a, **k)
        self.fails = fails

    def __iter__(self):
        if self.fails:
            self.fails -= 1
            raise KeyError("PYTEST_CURRENT_TEST")
        return super().__iter__()

    def keys(self):
        return list(iter(self))


def test_a_snapshot_taken_while_a_key_goes_away_is_taken_again(monkeypatch):
    shifting = _Shifting({"A": "1"}, fails=2)
    with pytest.raises(KeyError):
        dict(_Shifting({"A": "1"}))                  # the plain copy breaks
    monkeypatch.setattr(engine.os, "environ", shifting)
    assert engine.environ_snapshot() == {"A": "1"}
    assert shifting.fails == 0


@pytest.fixture
def local_server():
    class Ok(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()

        def log_message(self, *a):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), Ok)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/health"
    srv.shutdown()


def test_the_health_poll_ignores_a_proxy_in_the_environment(monkeypatch, local_server):
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")     # nothing listens there
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with pytest.raises(requests.RequestException):
        requests.get(local_server, timeout=2)                   # the environment's proxy is used, and fails
    with engine._loopback_http() as http_:
        assert http_.get(local_server, timeout=2).status_code == 200
