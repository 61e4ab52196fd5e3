"""Chapter 06b's load helpers, without an engine: ``loadgen.spaced_run`` (evenly spaced traffic split across
endpoints), ``experiments.Sampler`` (a value read on a clock in a thread) and ``experiments.kill_under_load`` (an
open loop with a crash in it). Against closed ports every request fails at once, which is enough to check the
order, the spacing and the split; the live behaviour (an engine killed under load, the router's retries) is
asserted by chapter 06b's own cells."""
import socket
import time

import pytest

from inferopt.bench import experiments, loadgen
from inferopt.bench.workload import RequestSpec
from inferopt.errors import CourseError


def _closed_ports(k):
    socks = [socket.socket() for _ in range(k)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()                                               # closed again: a request there fails at once
    return [loadgen.Endpoint(f"http://127.0.0.1:{p}", "m") for p in ports], ports


def _specs(n):
    return [RequestSpec(prompt="x", prompt_tokens=1, max_tokens=4, tag=str(i)) for i in range(n)]


def test_spaced_run_alternates_endpoints_one_request_every_gap():
    eps, ports = _closed_ports(2)
    run = loadgen.spaced_run(eps, _specs(6), gap_s=0.15)
    assert [r.tag for r in run.records] == [str(i) for i in range(6)]          # one run, in the order sent
    # the i-th request went to endpoint i % 2: its error names that endpoint's port
    assert all(str(ports[int(r.tag) % 2]) in r.error for r in run.records), [r.error for r in run.records]
    # evenly spaced across both threads (the two shares start together)
    gaps = [b.start_s - a.start_s for a, b in zip(run.records, run.records[1:], strict=False)]
    assert all(0.05 < g < 0.3 for g in gaps), gaps
    one = loadgen.spaced_run(eps[:1], _specs(3), gap_s=0.0)
    assert len(one.records) == 3 and all(str(ports[0]) in r.error for r in one.records)


@pytest.mark.parametrize("endpoints, n, gap", [(0, 3, 0.1), (1, 0, 0.1), (1, 3, -1.0)])
def test_spaced_run_refuses_nothing_to_send_in_one_line(endpoints, n, gap):
    eps, _ = _closed_ports(1)
    with pytest.raises(CourseError, match="spaced_run: .* give one endpoint or more"):
        loadgen.spaced_run(eps[:endpoints], _specs(n), gap_s=gap)


def test_sampler_reads_on_its_clock_and_skips_a_failed_read():
    calls = []

    def read():
        calls.append(1)
        if len(calls) == 2:
            raise OSError("restarting")                          # e.g. the router between two answers
        return len(calls)
    t0 = time.monotonic()
    s = experiments.Sampler(read, t0=t0, interval_s=0.05).start()
    time.sleep(0.4)
    s.stop()
    n = len(calls)
    time.sleep(0.15)
    assert len(calls) == n                                      # stopped: no read after stop()
    values = [v for _, v in s.samples]
    assert 2 not in values and values[:2] == [1, 3] and len(values) == n - 1
    times = [t for t, _ in s.samples]
    assert times == sorted(times) and 0 <= times[0] < 0.2
    with pytest.raises(CourseError, match="positive number of seconds"):
        experiments.Sampler(read, t0=t0, interval_s=0)


def test_kill_under_load_kills_once_even_when_nothing_finishes():
    eps, _ = _closed_ports(1)
    kills = []
    t0 = time.monotonic()
    run, t_kill = experiments.kill_under_load(eps[0], _specs(5), rate=50.0, kill=lambda: kills.append(time.monotonic()),
                                              kill_after=1, after_n=1, settle_s=0.0, t0=t0)
    # no request can finish, so the load ran out first; the kill still came, once, and after the load's last send
    assert len(kills) == 1 and len(run.records) == 5 and not any(r.ok for r in run.records)
    assert t_kill >= max(r.start_s for r in run.records)
    with pytest.raises(CourseError, match="kill_under_load: .*after_n >= 1"):
        experiments.kill_under_load(eps[0], _specs(5), rate=50.0, kill=lambda: None, kill_after=1, after_n=0,
                                    settle_s=0.0, t0=t0)
