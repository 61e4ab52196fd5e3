"""vLLM's router wrapper: bad inputs give one clear line; the command line it builds is accepted
by vllm-router's own argument parser. Fast: no engine is started here (the chapter
06b-scale-out runs the router live in front of two engines)."""
from __future__ import annotations

import http.server
import json
import threading

import pytest

from inferopt.errors import CourseError
from inferopt.planning.capacity import check_canary_weight, check_instances
from inferopt.serving.managed_process import free_port
from inferopt.serving.router import (
    POLICIES,
    VLLMRouter,
    probe_worker,
)


def _one_line(exc_info) -> str:
    msg = str(exc_info.value)
    assert "\n" not in msg, msg
    return msg


@pytest.fixture()
def http_server():
    """A loopback HTTP server that is not vLLM; ``answers`` sets what /v1/models returns."""
    state = {"models": {"object": "list", "data": [{"id": "m", "owned_by": "someone-else"}]}}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps(state["models"]).encode() if self.path == "/v1/models" else b"ok"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", state
    finally:
        srv.shutdown()
        srv.server_close()


def test_router_with_no_worker_at_all():
    with pytest.raises(CourseError) as e:
        VLLMRouter([])
    assert "at least one worker" in _one_line(e)


def test_router_with_no_healthy_worker():
    dead = [f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"]
    r = VLLMRouter(dead)
    with pytest.raises(CourseError) as e:
        r.start()
    assert "no healthy worker" in _one_line(e)
    assert r.proc is None  # nothing was started


def test_worker_that_is_not_vllm(http_server):
    url, state = http_server
    with pytest.raises(CourseError) as e:
        VLLMRouter([url]).start()
    assert "is not a vLLM server" in _one_line(e) and url in str(e.value)
    # the same server shaped like vLLM's /v1/models passes the probe: the check reads owned_by
    state["models"] = {"object": "list", "data": [{"id": "SmolLM2", "owned_by": "vllm"}]}
    assert probe_worker(url) == "SmolLM2"


def test_bad_worker_and_policy_values():
    with pytest.raises(CourseError) as e:
        VLLMRouter(["127.0.0.1:8000"])
    assert "http://" in _one_line(e)
    with pytest.raises(CourseError) as e:
        VLLMRouter(["http://127.0.0.1:8000"], policy="fastest")
    assert "round_robin" in _one_line(e)


@pytest.mark.parametrize("bad", [-1, 100.5, 101, "half", None, float("nan")])
def test_canary_weight_outside_range(bad):
    with pytest.raises(CourseError) as e:
        check_canary_weight(bad)
    assert "0" in _one_line(e) and "100" in str(e.value)


@pytest.mark.parametrize("ok", [0, 5, 50, 100, "5"])
def test_canary_weight_inside_range(ok):
    assert check_canary_weight(ok) == float(ok)


def test_instances_below_n_plus_one():
    with pytest.raises(CourseError) as e:
        check_instances(5, needed=5)
    assert "N+1" in _one_line(e) and "6" in str(e.value)
    assert check_instances(6, needed=5) == 6


@pytest.mark.parametrize("policy", ["round_robin", "cache_aware"])
def test_command_parses_with_vllm_routers_own_parser(policy):
    from vllm_router.launch_router import parse_router_args

    r = VLLMRouter(["http://127.0.0.1:9001", "http://127.0.0.1:9002/v1"], policy=policy, retries=3)
    r.port, r.metrics_port = 9100, 9101
    args = parse_router_args(r.command()[3:])   # drop python -m module
    assert args.worker_urls == ["http://127.0.0.1:9001", "http://127.0.0.1:9002"]
    assert (args.policy, args.port, args.prometheus_port, args.host) == (policy, 9100, 9101, "127.0.0.1")
    assert args.retry_max_retries == 3 and not args.disable_retries
    assert args.health_check_interval_secs == 2 and args.health_failure_threshold == 1
    no_retry = VLLMRouter(["http://127.0.0.1:9001"], retries=0)
    no_retry.port, no_retry.metrics_port = 9100, 9101
    assert parse_router_args(no_retry.command()[3:]).disable_retries
    assert set(POLICIES) <= {"random", "round_robin", "cache_aware", "kv_aware", "power_of_two",
                             "consistent_hash", "sticky_least_loaded"}
