"""The live engine as a component: real vLLM CPU server, real requests, real clean-up,
and the bad inputs a learner will try. Nothing is mocked."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from kv_agreement import assert_kv_agrees

from inferopt.errors import CourseError
from inferopt.paths import REPO_ROOT, servers_dir
from inferopt.serving.engine import VLLMServer, parse_startup_log, port_is_free
from inferopt.serving.managed_process import group_alive, start_together


def test_parse_startup_log_reads_the_engines_own_line():
    line = ("INFO [kv_cache_utils.py] CPU KV cache size: 23,296 tokens\n"
            "INFO [kv_cache_utils.py] Maximum concurrency for 2,048 tokens per request: 11.38x\n")
    facts = parse_startup_log(line)
    assert (facts.kv_cache_tokens, facts.max_concurrency, facts.concurrency_for_tokens) == (23296, 11.38, 2048)
    assert parse_startup_log("nothing here").kv_cache_tokens is None


@pytest.fixture(scope="module")
def own_engines():
    """Two engines this module stops or kills itself, started at once (start-up is mostly imports)."""
    pair = (VLLMServer(max_model_len=2048, kv_cache_gib=1.0, quiet=True),
            VLLMServer(max_model_len=1536, kv_cache_gib=0.75, quiet=True, cpu_cores=[1]))
    # the pinned engine's start-up (its API server's imports) may use every core this process may use: sampled
    # while it starts, for test_server_killed_mid_request_...
    samples, starting = [], threading.Event()

    def watch():
        while not starting.wait(0.1):
            p = pair[1].proc
            try:
                if p is not None:
                    samples.append(frozenset(os.sched_getaffinity(p.pid)))
            except ProcessLookupError:
                pass
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        start_together(*pair)
    finally:
        starting.set()
        watcher.join()
    pair[1].start_affinities = samples
    try:
        yield pair
    finally:
        for srv in pair:
            srv.stop()


def test_live_engine_answers_serves_metrics_and_leaves_nothing_behind(own_engines):
    srv = own_engines[0]
    with srv:
        pgid, port = srv.pid, srv.port
        children = psutil.Process(pgid).children(recursive=True)
        ipc = srv.ipc_dir          # vLLM's ZeroMQ sockets live in the engine's own folder, not loose in /tmp
        assert any(p.is_socket() for p in ipc.iterdir()), list(ipc.iterdir())
        assert srv.kv_cache_tokens == 23296  # 1 GiB / (2*30*3*64*4 B) rounded down to 16-token blocks
        assert srv.max_concurrency == 11.38
        f = srv.facts        # read from the engine's /metrics, /v1/models and log (serving/engine_facts.py)
        assert (f.model, f.max_model_len, f.model_dtype) == (srv.served_name, 2048, "float32")
        assert f.tokens_for_blocks(f.num_blocks) == f.kv_cache_tokens and f.max_num_batched_tokens
        answer = srv.chat("What is the capital of France?", max_tokens=24)
        assert "Paris" in answer, answer
        streamed = srv.stream_chat("Count from one to five.", max_tokens=16)
        assert streamed["output_tokens"] >= 2 and 0 < streamed["ttft_s"] <= streamed["e2e_s"]
        metrics = srv.metrics_text()
        for name in ("vllm:num_requests_running", "vllm:kv_cache_usage_perc",
                     "vllm:time_to_first_token_seconds_bucket", "vllm:prefix_cache_hits_total"):
            assert name in metrics, name
        rss = srv.memory_mib()
        print(f"engine ready in {srv.startup_seconds:.1f} s; RSS of server + children {rss:.0f} MiB")
        assert rss > 100
    assert srv.proc is None
    assert not group_alive(pgid), "the server's process group outlived stop()"
    assert not any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in children)
    assert port_is_free(port), f"port {port} still taken after stop()"
    assert not (servers_dir() / f"{pgid}.pid.json").exists()
    assert not ipc.exists(), f"the engine's socket folder {ipc} outlived stop()"


def test_a_crashed_engines_socket_folder_goes_with_the_next_sweep(tmp_path):
    import tempfile

    from inferopt.serving.engine import IPC_PREFIX, sweep_stale_servers

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    ours = Path(tempfile.mkdtemp(prefix=IPC_PREFIX))
    other = tmp_path / "someone-elses"          # a folder the package did not make is never removed
    other.mkdir()
    for folder, name in ((ours, "dead-ours"), (other, "dead-other")):
        (folder / "sock").write_text("")
        (servers_dir() / f"{name}.pid.json").write_text(json.dumps({"pid": dead.pid, "pgid": dead.pid,
                                                                    "owner_pid": dead.pid, "ipc_dir": str(folder)}))
    sweep_stale_servers()
    assert not ours.exists() and other.exists()
    assert not list(servers_dir().glob("dead-*.pid.json"))


def test_the_pinned_engine_has_the_calculators_kv_cache(own_engines):
    """0.75 GiB, float32, max_model_len 1536: one of the memory calculator's checks against the engine
    (tests/test_memory_engine_agreement.py), on an engine this module starts anyway (before it is killed below)."""
    assert_kv_agrees(own_engines[1], 0.75, 1536, "float32")


def test_server_killed_mid_request_gives_a_clear_error_and_is_cleaned_up(own_engines):
    srv = own_engines[1]
    try:
        pgid = srv.pid
        root = psutil.Process(pgid)          # cpu_cores=[1]: every thread of every process of the engine
        tids = [t.id for p in [root, *root.children(recursive=True)] for t in p.threads()]
        assert len(tids) > 3 and {frozenset(os.sched_getaffinity(t)) for t in tids} == {frozenset({1})}
        # ...once it is ready; while it started, its API server could use every core (two engines for one core
        # started together import side by side)
        assert srv.start_affinities and srv.start_affinities[0] == frozenset(os.sched_getaffinity(0)), \
            srv.start_affinities[:3]
        box = {}

        def ask():
            try:
                srv.chat("Write a long story about a lighthouse.", max_tokens=900)
            except CourseError as exc:
                box["error"] = str(exc)

        t = threading.Thread(target=ask)
        t.start()
        time.sleep(2.0)
        os.kill(srv.pid, signal.SIGKILL)  # the API server dies while the request is in flight
        t.join(60)
        assert "died" in box.get("error", ""), box
        with pytest.raises(CourseError, match="died"):
            srv.chat("still there?")
    finally:
        srv.stop()
    deadline = time.monotonic() + 15
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not group_alive(pgid), "engine-core children outlived the killed server after stop()"


def test_cpu_cores_must_be_cores_this_process_may_use():
    with pytest.raises(CourseError, match=r"cpu_cores=\[99\]: give cores this process may use"):
        VLLMServer(cpu_cores=[99], quiet=True)
    with pytest.raises(CourseError, match="cpu_cores"):
        VLLMServer(cpu_cores=[], quiet=True)


def test_unknown_flag_names_the_flag_problem():
    with pytest.raises(CourseError, match="flag was not understood") as err:
        VLLMServer(extra_args=["--no-such-flag"], quiet=True, startup_timeout=120).start()
    assert "--no-such-flag" in str(err.value)


def test_missing_model_path_says_what_to_do():
    with pytest.raises(CourseError, match="does not exist"):
        VLLMServer("/nonexistent/model-folder")


def test_port_in_use_is_refused_before_starting():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        taken = s.getsockname()[1]
        with pytest.raises(CourseError, match="already in use"):
            VLLMServer(port=taken, quiet=True).start()


def test_startup_timeout_stops_the_server_and_shows_the_log():
    srv = VLLMServer(quiet=True, startup_timeout=3)
    with pytest.raises(CourseError, match="not ready after 3 s") as err:
        srv.start()
    assert "Last lines of" in str(err.value)
    assert srv.proc is None


def test_startup_wait_comes_from_the_argument_else_the_environment(monkeypatch):
    monkeypatch.delenv("INFEROPT_STARTUP_TIMEOUT_S", raising=False)
    assert VLLMServer(quiet=True).startup_timeout == 300
    monkeypatch.setenv("INFEROPT_STARTUP_TIMEOUT_S", "900")
    assert VLLMServer(quiet=True).startup_timeout == 900
    assert VLLMServer(quiet=True, startup_timeout=3).startup_timeout == 3      # the argument wins
    for bad in ("soon", "0", "-5", "nan"):
        monkeypatch.setenv("INFEROPT_STARTUP_TIMEOUT_S", bad)
        with pytest.raises(CourseError, match=r"^INFEROPT_STARTUP_TIMEOUT_S=.*positive number"):
            VLLMServer(quiet=True)
    monkeypatch.delenv("INFEROPT_STARTUP_TIMEOUT_S")
    with pytest.raises(CourseError, match=r"^startup_timeout=0: give the start-up wait"):
        VLLMServer(quiet=True, startup_timeout=0)


def test_bad_sizes_are_refused_with_the_fix():
    with pytest.raises(CourseError, match="kv_cache_gib"):
        VLLMServer(kv_cache_gib=-1)
    with pytest.raises(CourseError, match="max_model_len"):
        VLLMServer(max_model_len=0)


def test_no_engine_installed_names_the_requirements_file():
    # a Python without vLLM (the machine's base interpreter), importing this package from source
    base = getattr(sys, "_base_executable", None) or "/usr/bin/python3"
    code = (f"import sys; sys.path.insert(0, {str(REPO_ROOT)!r})\n"
            "import importlib.util; assert importlib.util.find_spec('vllm') is None, 'base python has vllm'\n"
            "from inferopt.serving.engine import require_engine\n"
            "from inferopt.errors import CourseError\n"
            "try:\n    require_engine('cpu')\nexcept CourseError as e:\n    print(e)\n")
    out = subprocess.run([base, "-c", code], capture_output=True, text=True, timeout=60)
    assert "requirements-cpu.txt" in out.stdout, out.stdout + out.stderr


def test_server_does_not_outlive_a_dead_kernel():
    """A 'kernel' (a child Python) starts a server and is SIGKILLed mid-start: the server goes too."""
    code = ("from inferopt.serving.engine import VLLMServer\n"
            "VLLMServer(quiet=True, startup_timeout=600).start()\n")
    kernel = subprocess.Popen([sys.executable, "-c", code], cwd=REPO_ROOT)
    deadline = time.monotonic() + 30
    info = None
    while info is None and time.monotonic() < deadline:
        for f in servers_dir().glob("*.pid.json"):
            d = json.loads(f.read_text())
            if d.get("owner_pid") == kernel.pid:
                info = d
        time.sleep(0.2)
    assert info, "the child never started a server"
    time.sleep(3)
    kernel.kill()
    kernel.wait()
    deadline = time.monotonic() + 30
    while group_alive(info["pgid"]) and time.monotonic() < deadline:
        time.sleep(0.5)
    if group_alive(info["pgid"]):
        from inferopt.serving.engine import sweep_stale_servers
        sweep_stale_servers()
    assert not group_alive(info["pgid"]), "server outlived its kernel (neither pdeathsig nor the sweep stopped it)"
