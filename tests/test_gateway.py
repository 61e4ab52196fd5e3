"""The canary gateway: real nginx (Debian's package) splitting real requests between the live
engine ("stable") and vLLM's router in front of the same engine ("canary": a second address
that answers like vLLM). nginx's smooth weighted round-robin is exact, so the counts are too."""
from __future__ import annotations

import pytest
import requests

from inferopt.errors import CourseError
from inferopt.serving.gateway import NginxGateway
from inferopt.serving.managed_process import _alive
from inferopt.serving.router import VLLMRouter

pytestmark = pytest.mark.engine


def _send(gw, n):
    for _ in range(n):
        r = requests.post(gw.base_url + "/v1/completions", timeout=60,
                          json={"model": gw.model, "prompt": "Hello", "max_tokens": 1, "temperature": 0})
        assert r.status_code == 200, r.text


def test_the_split_follows_the_weight_and_moves_without_a_restart(live_server):
    with VLLMRouter([live_server], policy="round_robin") as canary, \
            NginxGateway(stable=[live_server], canary=[canary], canary_weight=5) as gw:
        pid, workdir = gw.proc.pid, gw.workdir
        log = workdir / "access.log"
        _send(gw, 40)
        assert gw.requests_per_version() == {"stable": 38, "canary": 2}, log.read_text()        # 5 % of 40, exactly
        gw.set_canary_weight(50)
        _send(gw, 20)
        assert gw.requests_per_version() == {"stable": 48, "canary": 12}, log.read_text()
        gw.set_canary_weight(0)                                                # roll back
        _send(gw, 10)
        assert gw.requests_per_version()["canary"] == 12, log.read_text()
        gw.set_canary_weight(100)
        _send(gw, 4)
        assert gw.requests_per_version() == {"stable": 58, "canary": 16}, log.read_text()
        assert gw.proc.pid == pid and gw.reloads == 3                            # reloaded, never restarted
        assert [s for _, _, s in gw.access_log()] == [200] * 74
        with pytest.raises(CourseError, match="outside 0-100"):
            gw.set_canary_weight(150)
        assert gw.canary_weight == 100
    assert not _alive(pid) and not workdir.exists()


def test_bad_inputs_are_one_clear_line(live_server, monkeypatch, tmp_path):
    with pytest.raises(CourseError, match="outside 0-100"):
        NginxGateway(stable=[live_server], canary=[live_server], canary_weight=-5)
    with pytest.raises(CourseError, match="needs at least one upstream"):
        NginxGateway(stable=[live_server], canary=[])
    with pytest.raises(CourseError, match="loopback URL"):
        NginxGateway(stable=["http://example.com:80"], canary=[live_server])
    with pytest.raises(CourseError, match="does not answer"):      # nothing listens there
        NginxGateway(stable=[live_server], canary=["http://127.0.0.1:9"]).start()
    monkeypatch.setenv("INFEROPT_NGINX", str(tmp_path / "no-nginx"))
    with pytest.raises(CourseError, match="nginx is not installed") as exc:
        NginxGateway(stable=[live_server], canary=[live_server]).start()
    assert "\n" not in str(exc.value)
