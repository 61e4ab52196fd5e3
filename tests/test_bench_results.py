"""Results on disk: lines are written as requests complete; other tools' files import into our keys."""
import json
from pathlib import Path

import pytest

from inferopt.bench.metrics import RequestRecord
from inferopt.bench.results import (
    ResultWriter,
    import_aiperf_records,
    import_any,
    import_genai_perf,
    import_vllm_bench,
    read_jsonl,
    records_from_lines,
)
from inferopt.errors import CourseError

DATA = Path(__file__).parent / "data"


def test_writer_flushes_each_line_and_a_torn_line_is_ignored(tmp_path):
    path = tmp_path / "run.jsonl"
    w = ResultWriter(path, run="t")
    w.write("config", {"levels": [2]})
    w.request(RequestRecord(0, 100, 32, 0.1, 3.2, itl_s=[0.1]), concurrency=2)
    # readable before close: an interrupted sweep keeps what finished
    reqs, sums = read_jsonl(path)
    assert len(reqs) == 1 and reqs[0]["concurrency"] == 2 and reqs[0]["run"] == "t"
    w.summary({"concurrency": 2, "ttft_p50_ms": float("nan")})
    w.close()
    with open(path, "a") as fh:
        fh.write('{"type": "request", "request_id": 9')       # killed mid-line
    reqs, sums = read_jsonl(path)
    assert len(reqs) == 1 and sums[0]["ttft_p50_ms"] is None   # NaN stored as null (valid JSON)
    recs = records_from_lines(reqs, concurrency=2)
    assert recs[0].tpot_s == pytest.approx(0.1)


def test_aiperf_summary_maps_names_and_units():
    s = import_genai_perf(DATA / "aiperf_profile_export_aiperf.json")
    assert s["tpot_p95_ms"] == 115.0          # aiperf inter_token_latency = TPOT
    assert s["e2e_p99_ms"] == 4200.0          # request_latency = E2E
    assert s["ttft_p50_ms"] == 350.0 and s["ttft_mean_ms"] == 400.0
    assert s["concurrency"] == 2 and s["completed"] == 8 and s["source"] == "aiperf"
    assert s["throughput_tok_s"] == 16.0


def test_genai_perf_seconds_are_converted(tmp_path):
    p = tmp_path / "profile_export_genai_perf.json"
    p.write_text(json.dumps({"time_to_first_token": {"unit": "s", "p95": 0.5, "avg": 0.4}}))
    s = import_genai_perf(p)
    assert s["ttft_p95_ms"] == 500.0 and s["source"] == "genai-perf"


def test_aiperf_records():
    recs = import_aiperf_records(DATA / "aiperf_profile_export.jsonl")
    assert recs[0].ok and recs[0].ttft_s == pytest.approx(0.3) and recs[0].itl_s == pytest.approx([0.1] * 3)
    assert recs[0].tpot_s == pytest.approx((3.4 - 0.3) / 31)
    assert not recs[1].ok and "499" in recs[1].error and recs[1].start_s == pytest.approx(0.5)


def test_vllm_bench_detailed_file(tmp_path):
    # the keys vllm/benchmarks/serve.py writes with --save-result --save-detailed
    d = {"duration": 4.0, "completed": 2, "failed": 0, "request_throughput": 0.5, "output_throughput": 16.0,
         "total_token_throughput": 66.0, "max_concurrency": 2, "request_rate": "inf",
         "input_lens": [100, 100], "output_lens": [32, 32], "ttfts": [0.2, 0.4], "latencies": [3.3, 3.5],
         "itls": [[0.1] * 31, [0.1] * 31], "start_times": [10.0, 10.5], "errors": ["", ""],
         "mean_ttft_ms": 300.0, "median_ttft_ms": 300.0, "p99_ttft_ms": 398.0}
    p = tmp_path / "vllm.json"
    p.write_text(json.dumps(d))
    s, recs = import_vllm_bench(p)
    assert len(recs) == 2 and recs[1].start_s == pytest.approx(0.5)
    assert s["tpot_p50_ms"] == pytest.approx(100.0)
    assert s["ttft_p99_ms"] == 398.0 and s["concurrency"] == 2 and "rate" not in s
    assert import_any(p)[0]["source"] == "vllm bench serve"


def test_wrong_files_say_what_they_are_not(tmp_path):
    p = tmp_path / "x.json"
    p.write_text("{}")
    with pytest.raises(CourseError, match="not a `vllm bench serve`"):
        import_vllm_bench(p)
    with pytest.raises(CourseError, match="not a genai-perf/aiperf"):
        import_genai_perf(p)
    with pytest.raises(CourseError, match="does not exist"):
        read_jsonl(tmp_path / "missing.jsonl")


def test_cli_import_and_sweep_argument_errors(capsys):
    from inferopt.__main__ import main

    assert main(["bench", "import", str(DATA / "aiperf_profile_export_aiperf.json")]) == 0
    out = capsys.readouterr().out
    # aiperf reported a P95 of 115 ms from 8 requests: the table names the column but will not print it
    assert "tpot_p95_ms" in out and "n<45" in out and "115.0" not in out
    # --url without --model: a CourseError naming the fix, exit code 2, no engine started
    assert main(["bench", "sweep", "--url", "http://127.0.0.1:9", "--concurrency", "1"]) == 2
    assert "--url needs --model" in capsys.readouterr().err
