"""loadgen's event send times (``AfterTokens``) without an engine: against a closed port every request fails at
once, and an event whose requests have all ended still fires, so a run never waits forever; bad events are refused
in one line before anything is sent. The live behaviour (sent after the k-th token) is in test_bench_client."""
import socket

import pytest

from inferopt.bench import loadgen
from inferopt.bench.workload import RequestSpec
from inferopt.errors import CourseError


def _closed_port() -> loadgen.Endpoint:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]                          # closed again when the block ends
    return loadgen.Endpoint(f"http://127.0.0.1:{port}", "m")


def _spec(tag: str) -> RequestSpec:
    return RequestSpec(prompt="x", prompt_tokens=1, max_tokens=4, tag=tag)


def test_an_event_fires_when_its_requests_end_without_tokens():
    ep = _closed_port()
    schedule = [(0.0, _spec("decode")), (0.0, _spec("decode")), (loadgen.AfterTokens("decode", 3), _spec("long"))]
    res = loadgen.run(ep, schedule=schedule, progress=False)
    assert [r.tag for r in res.records] == ["decode", "decode", "long"]      # the event's request was sent
    assert not any(r.ok for r in res.records)
    long = res.records[-1]
    assert long.start_s >= max(r.start_s for r in res.records[:2])           # not before the requests it waits on


def test_events_go_last_whatever_order_they_are_given_in():
    ep = _closed_port()
    schedule = [(loadgen.AfterTokens("a", 1), _spec("late")), (0.5, _spec("a")), (0.0, _spec("a"))]
    res = loadgen.run(ep, schedule=schedule, progress=False)
    assert [r.tag for r in res.records] == ["a", "a", "late"]
    assert res.records[-1].start_s >= 0.5


def test_a_bad_event_is_one_clear_line():
    ep = _closed_port()
    with pytest.raises(CourseError, match="no request sent at a clock time has the tag 'decode'"):
        loadgen.run(ep, schedule=[(0.0, _spec("other")), (loadgen.AfterTokens("decode", 2), _spec("long"))],
                    progress=False)
    for bad in (0, -1, 2.5):
        with pytest.raises(CourseError, match="whole number of tokens"):
            loadgen.AfterTokens("decode", bad)
