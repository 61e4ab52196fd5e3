"""The course's load generator on the live CPU engine, what it does rather than how fast: exact lengths, results
saved as they complete, the open loop's schedule, sends after the k-th token, a bad endpoint's one line, and vLLM's
own `vllm bench serve` run as a subprocess and imported. Nothing here is timed against anything, so the module runs
in the suite's niced lane (tests/conftest.py, BACKGROUND); the timed comparison of the two clients is
tests/test_bench_live.py."""

import pytest

from inferopt.bench import loadgen, vllm_bench
from inferopt.bench.results import ResultWriter, read_jsonl
from inferopt.bench.workload import Workload, build_requests, default_tokenizer_path, load_tokenizer
from inferopt.errors import CourseError


def test_exact_lengths_and_results_saved_as_they_complete(live_server, tok, tmp_path):
    ep = loadgen.Endpoint.from_server(live_server)
    reqs = build_requests(Workload(input_tokens=64, output_tokens=12, num_requests=4, seed=7), tok)
    path = tmp_path / "r.jsonl"
    seen = []

    with ResultWriter(path, run="t") as w:
        save = w.on_record(concurrency=2)

        def on_record(rec):
            save(rec)
            seen.append(len(read_jsonl(path)[0]))   # the line is on disk when the callback returns

        res = loadgen.run(ep, reqs, concurrency=2, warmup=1, on_record=on_record, progress=False)
    assert seen == [1, 2, 3, 4]
    assert [(r.prompt_tokens, r.output_tokens) for r in res.records] == [(64, 12)] * 4   # server's usage
    # at most one chunk per token (no spec decoding); fewer when the API server reads late: vLLM merges the deltas
    # a slow reader has not taken yet (vllm/v1/engine/output_processor.py, RequestOutputCollector.put)
    assert all(1 <= len(r.itl_s) <= 11 for r in res.records)
    s = res.summary()
    assert s["completed"] == 4 and s["concurrency"] == 2 and s["client_cpu_ms_per_request"] > 0


def test_open_loop_rate_and_duration_bound(live_server, tok):
    ep = loadgen.Endpoint.from_server(live_server)
    reqs = build_requests(Workload(input_tokens=32, output_tokens=4, num_requests=6, seed=8), tok)
    res = loadgen.run(ep, reqs, rate=2.0, progress=False, seed=1)
    starts = [r.start_s for r in res.records]
    assert len(res.records) == 6 and starts == sorted(starts) and starts[-1] > 0.5
    short = loadgen.run(ep, reqs, rate=2.0, duration_s=0.01, progress=False, seed=1)
    assert len(short.records) == 1                                  # only the t=0 arrival is sent


def test_an_event_sends_after_the_kth_token_of_every_stream(live_server, tok):
    """AfterTokens: the tagged request goes out after every stream's k-th chunk arrived (each chunk carries one
    token or more) and while they still decode; a clock time would read the machine's speed instead."""
    ep = loadgen.Endpoint.from_server(live_server)
    k, n_out = 6, 24
    streams = build_requests(Workload(input_tokens=32, output_tokens=n_out, num_requests=2, seed=9), tok, tag="s")
    late = build_requests(Workload(input_tokens=32, output_tokens=2, num_requests=1, seed=10), tok, tag="late")
    res = loadgen.run(ep, schedule=[(0.0, r) for r in streams] + [(loadgen.AfterTokens("s", k), late[0])],
                      progress=False)
    *dec, last = res.records
    assert last.tag == "late" and all(r.ok for r in res.records)
    for r in dec:
        kth = r.start_s + r.ttft_s + sum(r.itl_s[:k - 1])         # when this stream's k-th chunk came
        assert kth <= last.start_s < r.start_s + r.e2e_s          # sent after it, while the stream still decodes


def test_bad_endpoint_fails_with_the_reason(live_server):
    ep = loadgen.Endpoint(live_server.base_url, "no-such-model")
    with pytest.raises(CourseError, match="warm-up request .* failed: HTTP 404"):
        loadgen.run(ep, [build_requests(Workload(10, 2, 1), load_tokenizer())[0]], concurrency=1, warmup=1,
                    progress=False)


def test_vllm_bench_subprocess_result_imports(live_server):
    """The subprocess form (what a learner runs against any server) works and imports."""
    s, recs = vllm_bench.run(live_server.base_url, live_server.model_name, str(default_tokenizer_path()),
                             input_len=32, output_len=4, num_prompts=2, concurrency=1)
    assert len(recs) == 2 and s["completed"] == 2 and s["concurrency"] == 1 and s["ttft_p50_ms"] > 0
