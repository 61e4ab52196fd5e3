"""One engine for a room: the course attaches to a vLLM engine it did not start, uses it like its own,
refuses in one line when it lacks what a cell needs, and never stops it.

The engine here is started *outside the course*: a plain ``python -m vllm.entrypoints.openai.api_server``
subprocess this module starts itself (no VLLMServer, no pid file), with lab 3's CPU flags. The pure
decisions (serving/shared_engine.py) are tested without an engine first."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import requests
from outside_process import wait_until_answers

from inferopt.errors import CourseError
from inferopt.serving import shared_engine as se
from inferopt.serving.engine_facts import EngineFacts

CPU_FACTS = EngineFacts(model="SmolLM2-135M-Instruct", max_model_len=2048, block_size=128, num_blocks=182,
                        kv_cache_tokens=23296, cache_dtype="auto", model_dtype=None, enable_prefix_caching=True,
                        kv_cache_memory_bytes=1 << 30)


# ---------------------------------------------------------------- pure decisions
def test_mismatches_name_each_missing_setting_and_accept_a_fit():
    assert se.mismatches(CPU_FACTS, model="SmolLM2-135M-Instruct", max_model_len=2048, kv_cache_memory_bytes=1 << 30,
                         enable_prefix_caching=True, kv_cache_tokens_at_least=2048) == []
    got = se.mismatches(CPU_FACTS, max_model_len=4096, kv_cache_memory_bytes=1 << 29, enable_prefix_caching=False,
                        kv_cache_tokens_at_least=30000, dtype="float32", model="other")
    assert got == ["model other (it has SmolLM2-135M-Instruct)", "max_model_len 4096 (it has 2048)",
                   "KV budget 0.5 GiB (it has 1 GiB)", "dtype float32 (the engine does not report it)",
                   "prefix caching off (it has on)", "KV tokens >= 30,000 (it has 23,296)"]
    assert se.mismatches(CPU_FACTS, max_model_len_at_least=1024) == []
    # an engine whose log is not readable here: the calculator's KV tokens for the asked dtype settle it
    from inferopt.planning.memory import cpu_engine_prediction

    fp32, bf16 = (cpu_engine_prediction(1.0, 2048, d).kv_cache_tokens for d in ("float32", "bfloat16"))
    assert se.mismatches(CPU_FACTS, dtype="float32", kv_cache_tokens=fp32) == []
    assert se.mismatches(CPU_FACTS, dtype="bfloat16", kv_cache_tokens=bf16) == [f"KV tokens {bf16:,} (it has 23,296)"]
    err = se.refusal("http://127.0.0.1:8000", got)
    assert "\n" not in str(err) and "max_model_len 4096 (it has 2048)" in str(err) and se.ENV_URL in str(err)


def test_engine_url_and_policy_are_checked(monkeypatch):
    assert se.split_url("http://10.0.0.5:8000/v1") == ("10.0.0.5", 8000)
    assert se.base_url("http://127.0.0.1:8000/") == "http://127.0.0.1:8000"
    for bad in ("127.0.0.1:8000", "http://127.0.0.1", "https://x:1/path", ""):
        with pytest.raises(CourseError, match="give the engine's base URL"):
            se.split_url(bad)
    monkeypatch.delenv(se.ENV_URL, raising=False)
    assert se.shared_engine_url() is None
    monkeypatch.setenv(se.ENV_URL, "http://localhost:9000/v1")
    assert se.shared_engine_url() == "http://localhost:9000"
    monkeypatch.setenv(se.ENV_MISMATCH, "ignore")
    with pytest.raises(CourseError, match="use 'refuse'"):
        se.mismatch_policy()
    assert se.own_engine_reason() is None
    assert "--no-enable-prefix-caching" in se.own_engine_reason(["--no-enable-prefix-caching"])
    assert "cores [1]" in se.own_engine_reason(cpu_cores=[1])


def test_a_room_url_where_nothing_answers_is_one_line(monkeypatch):
    from inferopt.serving.engine import VLLMServer
    from inferopt.serving.managed_process import free_port

    monkeypatch.setenv(se.ENV_URL, f"http://127.0.0.1:{free_port()}")
    srv = VLLMServer(quiet=True)
    with pytest.raises(CourseError, match="no vLLM engine answered") as exc:
        srv.start()
    assert "\n" not in str(exc.value) and srv.proc is None and srv.attached_url is None


def test_a_baseline_with_own_true_never_asks_the_room(monkeypatch, capsys):
    """02b's baseline engine (own=True) starts its own even where the room names an engine: the same
    dead URL that refuses a default-shaped server above is never contacted."""
    from inferopt.serving.engine import VLLMServer
    from inferopt.serving.managed_process import free_port

    url = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv(se.ENV_URL, url)
    assert "own=True" in se.own_engine_reason(own=True)
    assert VLLMServer(max_model_len=2048, kv_cache_gib=1.0, own=True)._attach_shared() is False
    out = capsys.readouterr().out
    assert "starts its own engine (it is the baseline of a before/after experiment" in out and url in out
    with pytest.raises(CourseError, match="no vLLM engine answered"):
        VLLMServer(max_model_len=2048, kv_cache_gib=1.0, quiet=True)._attach_shared()


# ---------------------------------------------------------------- an engine started outside the course
LAB3_CPU_FLAGS = ["--enable-prefix-caching", "--enable-chunked-prefill", "--max-num-batched-tokens", "2048",
                  "--max-num-seqs", "16"]


@pytest.fixture(scope="module")
def outside_engine(tmp_path_factory):
    """A plain vLLM OpenAI server, as an instructor would start it for a room (this module stops it)."""
    from inferopt.serving.managed_process import free_port
    from inferopt.serving.model_prep import MODEL_NAME, require_model

    port = free_port()
    log = tmp_path_factory.mktemp("outside") / "vllm.log"
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_NO_USAGE_STATS="1",
               TOKENIZERS_PARALLELISM="false")
    env.pop(se.ENV_URL, None)
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(require_model()),
           "--served-model-name", MODEL_NAME, "--host", "127.0.0.1", "--port", str(port),
           "--max-model-len", "2048", "--dtype", "float32", "--enforce-eager",
           "--kv-cache-memory-bytes", str(1 << 30), *LAB3_CPU_FLAGS]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_answers(proc, url + "/health", 400, log.read_text, "the outside engine")
        yield url, proc
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.mark.engine
def test_lab3_live_steps_on_an_engine_the_course_did_not_start(outside_engine, monkeypatch):
    from inferopt.bench import experiments, loadgen
    from inferopt.bench.lesson import calibrate, lesson_slo
    from inferopt.bench.workload import Workload, build_requests, load_tokenizer
    from inferopt.labcheck import _references as _ref
    from inferopt.labcheck import lab3
    from inferopt.serving.attach import AttachedEngine
    from inferopt.serving.engine import VLLMServer

    url, proc = outside_engine
    with AttachedEngine(url) as srv:
        f = srv.facts                               # the engine's own account, read over HTTP only
        assert (f.model, f.max_model_len, f.kv_cache_memory_bytes, f.enable_prefix_caching) == \
            ("SmolLM2-135M-Instruct", 2048, 1 << 30, True)
        assert f.kv_cache_tokens == f.tokens_for_blocks(f.num_blocks) and f.kv_cache_tokens >= 2048
        assert srv.kv_cache_tokens == f.kv_cache_tokens and srv.max_model_len == 2048
        srv.requires(max_model_len=2048, enable_prefix_caching=True, kv_cache_tokens_at_least=2048)
        # lab 3, section 5: stream one answer, time it from the learner's stamps (the reference formula)
        stamps = []
        t0 = time.perf_counter()
        answer = srv.stream_chat("Explain in two sentences what a KV cache is.", max_tokens=48,
                                 on_token=lambda piece: stamps.append(time.perf_counter()))
        ttft_ms, tpot_ms = _ref.ref_live_stats(t0, stamps, answer["output_tokens"])
        lab3.check_live({"t0": t0, "stamps": stamps, "ttft_ms": ttft_ms, "tpot_ms": tpot_ms}, answer)
        # ... read /metrics next to prometheus_client's parser
        text = srv.metrics_text()
        ref = experiments.parse_metrics(text)
        for n in ("vllm:num_requests_running", "vllm:generation_tokens_total", "vllm:time_to_first_token_seconds_count"):
            assert abs(_ref.ref_metric_value(text, n) - ref.get(n, 0.0)) < 1e-9, n
        assert _ref.ref_metric_value(text, "vllm:generation_tokens_total") >= answer["output_tokens"]
        # ... the scaled-down load test against the lesson SLO of this machine
        tok = load_tokenizer()
        slo = lesson_slo(calibrate(srv, tok, input_tokens=200, output_tokens=32))
        reqs = build_requests(Workload(input_tokens=200, output_tokens=32, num_requests=8, seed=3), tok)
        summary = loadgen.run(loadgen.Endpoint.from_server(srv), reqs, concurrency=4, warmup=1).summary(slo)
        assert summary["completed"] == 8
        # 8 requests cannot carry a P95: the verdict is on the slowest request (SLO.violations)
        verdict = {m: summary[f"{m}_max_ms"] <= getattr(slo, f"{m}_ms") for m in ("ttft", "tpot")}
        assert all(verdict.values()) == slo.summary_meets(summary)
        assert "attached" in repr(srv)
    # the end of the block let it go: the engine still runs and answers
    assert proc.poll() is None and requests.get(url + "/health", timeout=5).status_code == 200
    # INFEROPT_ENGINE_URL: a default-shaped VLLMServer of that configuration attaches instead of starting
    monkeypatch.setenv(se.ENV_URL, url)
    monkeypatch.delenv(se.ENV_MISMATCH, raising=False)
    shared = VLLMServer(max_model_len=2048, kv_cache_gib=1.0, quiet=True).start()
    assert shared.attached_url == url and shared.proc is None and shared.base_url == url
    assert "Paris" in shared.chat("What is the capital of France?", max_tokens=24)
    shared.stop()
    assert proc.poll() is None and requests.get(url + "/health", timeout=5).status_code == 200


@pytest.mark.engine
def test_a_notebook_pointed_at_the_wrong_engine_gets_the_one_line_refusal(outside_engine, monkeypatch):
    """Lab 2 (its solution, run by a real kernel as a learner would) with the room's URL set: its live cell
    wants 1536 tokens and 0.5 GiB of KV, the room's engine has 2048 and 1 GiB; the cell stops with the
    one-line refusal, and the room's engine runs on."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    from inferopt.paths import REPO_ROOT

    url, proc = outside_engine
    monkeypatch.setenv(se.ENV_URL, url)                 # the kernel inherits the learner's environment
    monkeypatch.delenv(se.ENV_MISMATCH, raising=False)
    nb = nbformat.read(REPO_ROOT / "solutions" / "lab2-memory-calculator.ipynb", as_version=4)
    client = NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(REPO_ROOT / "solutions")}})
    with pytest.raises(CellExecutionError):
        client.execute()
    failed = [c for c in nb.cells if c.cell_type == "code" and any(o.output_type == "error" for o in c.outputs)]
    assert len(failed) == 1 and "VLLMServer(max_model_len=1536" in failed[0].source   # the live cell, nothing before
    err = next(o for o in failed[0].outputs if o.output_type == "error")
    assert err.ename == "CourseError" and len(err.traceback) == 1 and "\n" not in err.evalue   # one line, no traceback
    assert err.evalue.startswith(f"the shared engine at {url} does not have the configuration this cell needs")
    assert "max_model_len 1536 (it has 2048)" in err.evalue and "KV budget 0.5 GiB (it has 1 GiB)" in err.evalue
    assert proc.poll() is None and requests.get(url + "/health", timeout=5).status_code == 200


@pytest.mark.engine
def test_a_cell_needing_another_configuration_gets_one_line(outside_engine, monkeypatch):
    from inferopt.serving.attach import AttachedEngine
    from inferopt.serving.engine import VLLMServer

    url, proc = outside_engine
    with pytest.raises(CourseError) as exc:
        AttachedEngine(url).requires(max_model_len=4096, enable_prefix_caching=False)
    msg = str(exc.value)
    assert "\n" not in msg and "max_model_len 4096 (it has 2048)" in msg and "prefix caching off (it has on)" in msg
    # the room switch: lab 2's engine (1536 tokens, 0.5 GiB) is not the room's, and the cell is refused
    monkeypatch.setenv(se.ENV_URL, url)
    monkeypatch.delenv(se.ENV_MISMATCH, raising=False)
    with pytest.raises(CourseError) as exc:
        VLLMServer(max_model_len=1536, kv_cache_gib=0.5, dtype="float32", quiet=True).start()
    msg = str(exc.value)
    assert "\n" not in msg and "max_model_len 1536 (it has 2048)" in msg and "KV budget 0.5 GiB (it has 1 GiB)" in msg
    with pytest.raises(CourseError, match="no vLLM engine answered"):
        AttachedEngine("http://127.0.0.1:9").start()
    assert proc.poll() is None                       # nothing here stopped the outside engine
