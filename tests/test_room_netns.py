"""The room's engine from another machine: the course's CPU engine runs in a network namespace this module makes,
reached only over that namespace's own (non-loopback) address, and the notebooks that use a shared engine run
against it with ``INFEROPT_ENGINE_URL`` pointing there: chapter 00 whole (its room-engine cells: the first request,
the long prompt, the KV arithmetic, the stop cell), chapter 05 whole (its live section, §5.4) and lab 4's worked
solution (its live sweep and check), then eight learners' clients at once.

Nothing of the engine is on this side: no log, no pid file, no port of this namespace (``127.0.0.1:PORT`` refuses
here), so a cell that read any of them would fail. The namespace: ``ip netns add`` and a veth pair (iproute2, as
root: CI runs as root on a fresh Debian-like machine). Where that cannot be done, the module fails with what was
missing; it is never skipped. One engine start for the module (~1 min), about 3-4 minutes in all on 2 cores."""
from __future__ import annotations

import ipaddress
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import pytest
import requests
from outside_process import wait_until_answers

from inferopt.serving import shared_engine as se
from inferopt.serving.engine_facts import facts_from_sources

PORT = 8000          # the room's conventional port: free in a namespace of its own


# ---------------------------------------------------------------- pure: the endpoints say what the log says
def test_max_concurrency_from_metrics_alone_is_the_logs_figure():
    """vLLM's label holds the unrounded concurrency (11.375 for 182 blocks of 128 tokens at 2048 tokens per request);
    its log prints '11.38x'. An engine read from its endpoints alone must report the log's figure, else chapter 05's
    assert (srv.max_concurrency == round(predicted, 2)) fails on a room's engine elsewhere."""
    label = ('vllm:cache_config_info{block_size="128",cache_dtype="auto",enable_prefix_caching="True",engine="0",'
             'kv_cache_max_concurrency="11.375",kv_cache_memory_bytes="1073741824",kv_cache_size_tokens="23296",'
             'num_gpu_blocks="182"} 1.0\n')
    models = {"data": [{"id": "SmolLM2-135M-Instruct", "max_model_len": 2048}]}
    remote = facts_from_sources(label, models)
    local = facts_from_sources(label, models, "KV cache size: 23,296 tokens, Maximum concurrency for 2,048 tokens "
                                              "per request: 11.38x")
    assert remote.max_concurrency == local.max_concurrency == 11.38
    assert remote.kv_cache_tokens == local.kv_cache_tokens == 23296
    # the wrong case: the raw label value is not what the engine reports
    assert facts_from_sources(label.replace("11.375", "11.3751"), models).max_concurrency == 11.38
    assert remote.max_concurrency != 11.375


# ---------------------------------------------------------------- the namespace
def _why_no_netns() -> str | None:
    """None when this machine can make a network namespace with a veth pair to it; else what is missing."""
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed (apt-get install iproute2)"
    if os.geteuid() != 0:
        return (f"this runs as uid {os.geteuid()}: a network namespace wired to this one by a veth pair needs root "
                "(CAP_NET_ADMIN in this namespace); run the suite as root, as CI does")
    return None


def _sh(*args: str) -> None:
    done = subprocess.run(list(args), capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}"


def _free_subnet() -> ipaddress.IPv4Network:
    """A /30 in 10.213.0.0/16 that no address or route of this namespace overlaps."""
    used = subprocess.run(["ip", "-4", "-o", "route", "show", "table", "all"], capture_output=True, text=True).stdout
    used += subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    nets = []
    for word in used.split():
        try:
            nets.append(ipaddress.ip_network(word, strict=False))
        except ValueError:
            continue
    for i in range(os.getpid() % 1000, os.getpid() % 1000 + 16000):
        cand = ipaddress.ip_network(f"10.213.{(i // 64) % 256}.{(i % 64) * 4}/30")
        if not any(cand.overlaps(n) for n in nets if n.prefixlen > 0):
            return cand
    raise AssertionError("no free /30 in 10.213.0.0/16 on this machine")


@pytest.fixture(scope="module")
def room_engine(tmp_path_factory):
    """The course's default-shape CPU engine (the room's: 2048 tokens, 1 GiB of KV, float32), started inside a
    network namespace and bound to its veth address; yields (url, process). This module removes all of it."""
    why = _why_no_netns()
    if why:
        pytest.fail(f"error: the room test needs a network namespace: {why}", pytrace=False)
    from inferopt.serving import cpu_isa
    from inferopt.serving.engine import VLLMServer

    tag = f"{os.getpid() % 100000}"
    ns, host_if, ns_if = f"inferopt-room-{tag}", f"ior{tag}h", f"ior{tag}n"
    net = _free_subnet()
    host_ip, ns_ip = (str(a) for a in list(net.hosts())[:2])
    made: list[str] = []
    proc = None
    ipc = tempfile.mkdtemp(prefix="inferopt-room-ipc-")
    try:
        _sh("ip", "netns", "add", ns)
        made.append("ns")
        _sh("ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if)
        made.append("link")
        _sh("ip", "link", "set", ns_if, "netns", ns)
        _sh("ip", "addr", "add", f"{host_ip}/{net.prefixlen}", "dev", host_if)
        _sh("ip", "link", "set", host_if, "up")
        _sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{ns_ip}/{net.prefixlen}", "dev", ns_if)
        _sh("ip", "netns", "exec", ns, "ip", "link", "set", ns_if, "up")
        _sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        # the course's own command line for the room's engine, bound to the namespace's address
        spec = VLLMServer(max_model_len=2048, kv_cache_gib=1.0, host=ns_ip, quiet=True)
        spec.port = PORT
        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_NO_USAGE_STATS="1",
                   DO_NOT_TRACK="1", TOKENIZERS_PARALLELISM="false", VLLM_RPC_BASE_PATH=ipc)
        env.pop(se.ENV_URL, None)
        env.pop("VLLM_CPU_KVCACHE_SPACE", None)
        env = cpu_isa.engine_env(env)
        log = tmp_path_factory.mktemp("room") / "vllm.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(["ip", "netns", "exec", ns, *spec.command()], stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                    env=env)
        url = f"http://{ns_ip}:{PORT}"
        wait_until_answers(proc, url + "/health", 600, log.read_text, "the room's engine in its namespace")
        yield url, proc
    finally:
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
            except ProcessLookupError:
                pass
        if "link" in made:
            subprocess.run(["ip", "link", "del", host_if], capture_output=True)
        if "ns" in made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        shutil.rmtree(ipc, ignore_errors=True)


@pytest.fixture
def room_url(room_engine, monkeypatch):
    """The learner's environment in a room: INFEROPT_ENGINE_URL set, the default policy (refuse: any cell whose
    engine differs stops with one line, none starts an engine of its own here)."""
    url, _ = room_engine
    monkeypatch.setenv(se.ENV_URL, url)
    monkeypatch.delenv(se.ENV_MISMATCH, raising=False)
    return url


def _run_notebook(path):
    """Run the notebook top to bottom in a real kernel (which inherits INFEROPT_ENGINE_URL); every cell must pass."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
                   ).execute()
    return nb


def _text(cell) -> str:
    return "".join(o.get("text", "") + "".join(map(str, o.get("data", {}).values())) for o in cell.get("outputs", []))


def _requests_done(url: str) -> float:
    text = requests.get(url + "/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vllm:request_success_total"))


@pytest.mark.engine
def test_the_engine_is_only_on_the_other_side(room_engine):
    """What makes the rest a test of 'another machine': the engine's address is not one of this namespace, its
    port here is closed, and the course's server records know nothing of it."""
    from inferopt.serving.managed_process import server_records

    url, proc = room_engine
    host, port = se.split_url(url)
    assert not ipaddress.ip_address(host).is_loopback
    here = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    assert f" {host}/" not in here, "the engine's address must belong to the other namespace"
    with pytest.raises(requests.ConnectionError):
        requests.get(f"http://127.0.0.1:{port}/health", timeout=3)
    assert requests.get(url + "/health", timeout=5).status_code == 200
    assert all(info.get("port") != port for _, info in server_records() if info)


@pytest.mark.engine
def test_chapter_00_runs_against_the_room_engine(room_url):
    """Every cell passes (they assert the engine's KV figures against the hand arithmetic and the calculator), the
    requests went over there (the room's own counter), and the stop cell let the engine go, never stopped it."""
    from inferopt.paths import CHAPTERS

    before = _requests_done(room_url)
    nb = _run_notebook(CHAPTERS / "00-start-here.ipynb")
    assert any("VLLMServer(" in c.source for c in nb.cells if c.cell_type == "code")
    assert _requests_done(room_url) - before >= 3        # the first request and the short and long prompts
    assert requests.get(room_url + "/health", timeout=5).status_code == 200


@pytest.mark.engine
def test_chapter_05_live_section_runs_against_the_room_engine(room_url):
    from inferopt.paths import CHAPTERS

    nb = _run_notebook(CHAPTERS / "05-end-to-end-deployment.ipynb")
    live = [c for c in nb.cells if c.cell_type == "code" and "memory.engine_prediction(srv)" in c.source]
    from inferopt.serving.attach import AttachedEngine

    room_kv = AttachedEngine(room_url).start().kv_cache_tokens                  # the room's own account
    assert len(live) == 1 and f"{room_kv:,} tokens" in _text(live[0]), [_text(c) for c in live]


@pytest.mark.engine
def test_lab4_solution_runs_against_the_room_engine(room_url):
    from inferopt.paths import SOLUTIONS

    before = _requests_done(room_url)
    nb = _run_notebook(SOLUTIONS / "lab4-benchmark-plotting.ipynb")
    live = [c for c in nb.cells if c.cell_type == "code" and "concurrency_sweep(" in c.source]
    import re

    lines = re.search(r"(\d+) request lines, 3 summary lines", _text(live[0])) if len(live) == 1 else None
    assert lines, [_text(c) for c in live]
    assert _requests_done(room_url) - before >= int(lines.group(1))     # the sweep's requests were served there


@pytest.mark.engine
def test_eight_learners_at_once(room_url):
    """Eight clients, each a learner's own VLLMServer attached through INFEROPT_ENGINE_URL, ask at the same moment;
    every one is answered, the engine counts eight more requests, and they were in flight together."""
    from inferopt.serving.engine import VLLMServer

    n = 8
    start = threading.Barrier(n)
    results: list = [None] * n

    def learner(i):
        srv = VLLMServer(max_model_len=2048, kv_cache_gib=1.0, quiet=True).start()
        try:
            start.wait(timeout=60)
            t0 = time.monotonic()
            r = srv.stream_chat("What is the capital of France?", max_tokens=24)
            results[i] = (srv.attached_url, t0, time.monotonic(), r["text"], srv.kv_cache_tokens)
        finally:
            srv.stop()

    before = _requests_done(room_url)
    threads = [threading.Thread(target=learner, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert all(r is not None for r in results), results
    from inferopt.serving.attach import AttachedEngine

    room_kv = AttachedEngine(room_url).start().kv_cache_tokens
    assert {r[0] for r in results} == {room_url} and {r[4] for r in results} == {room_kv} and room_kv >= 2048
    assert all("Paris" in r[3] for r in results), [r[3] for r in results]
    assert _requests_done(room_url) - before == n
    # at the moment the last one was sent, how many were still running: they overlapped, not one after another
    last_sent = max(r[1] for r in results)
    assert sum(r[1] <= last_sent < r[2] for r in results) >= 2, results
    assert requests.get(room_url + "/health", timeout=5).status_code == 200       # nobody stopped it
