"""`python -m inferopt diagnose`: options, files, JSON output, errors, the timing benchmark."""
import argparse
import json
import re
import subprocess
import sys

import pytest

from inferopt.diagnosis import cli as diagnose_cli
from inferopt.errors import CourseError
from inferopt.paths import REPO_ROOT

BASE = ["--slo-ttft-p95-ms", "500", "--slo-tpot-p95-ms", "50"]


def run(argv, capsys):
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="command", required=True)
    diagnose_cli.add_subcommand(sub)
    args = ap.parse_args(["diagnose", *argv])
    rc = args.func(args)
    return rc, capsys.readouterr().out


def test_json_has_the_promised_keys(capsys):
    rc, out = run(["--ttft-p95-ms", "1800", "--tpot-p95-ms", "30", *BASE, "--shared-prefix-frac", "0.7",
                   "--prompt-tokens", "900", "--on", "paged_attention,continuous_batching", "--json"], capsys)
    assert rc == 0
    d = json.loads(out)
    assert {"branch", "worst_metric", "techniques", "conflicts", "flags", "next_step"} <= set(d)
    assert d["branch"] == "A" and d["worst_metric"] == "ttft_p95_ms"
    assert d["techniques"] == ["prefix_cache"]
    assert d["flags"] == ["--enable-prefix-caching"]
    assert d["conflicts"] == []


def test_oom_and_gpu_options(capsys):
    rc, out = run(["--oom", *BASE, "--model-weights-gib", "130", "--gpu-type", "A100", "--num-gpus", "4",
                   "--on", "none", "--json"], capsys)
    d = json.loads(out)
    # 4 GPUs at hand: tensor parallelism first, then FP8 (weight-only on an A100), INT4 last
    assert d["branch"] == "C" and d["techniques"] == ["tensor_parallel", "fp8", "int4_awq_marlin"]
    assert d["flags"] == ["--tensor-parallel-size", "4"]  # the one next change
    # INT4 is another checkpoint, not a flag: no --quantization on this checkpoint, the AWQ/GPTQ kind named
    # (no model given: no catalog checkpoint to name)
    int4 = d["recommendations"][2]
    assert int4["flags_add"] == [] and int4["checkpoint"]["weight_format"] == "int4"
    assert "AWQ or GPTQ" in int4["checkpoint"]["kind"] and int4["checkpoint"]["checkpoint"] is None


def test_input_file_and_options_override_it(tmp_path, capsys):
    f = tmp_path / "case.yaml"
    f.write_text("metrics: {ttft_p95_ms: 300, tpot_p95_ms: 80}\n"
                 "slos: {ttft_p95_ms: 500, tpot_p95_ms: 50}\n"
                 "workload: {concurrency: 2, draft_model: tiny-draft, draft_dtype: int4}\n"
                 "techniques_on: [paged_attention, int4_awq_marlin]\n")
    d = json.loads(run(["--input", str(f), "--json"], capsys)[1])
    assert d["techniques"] == ["speculative_decoding"]
    assert [c["id"] for c in d["conflicts"]] == ["spec_quant", "paged_kv_spec"]
    assert json.loads(d["flags"][1]) == {"model": "tiny-draft", "num_speculative_tokens": 4}
    d = json.loads(run(["--input", str(f), "--concurrency", "64", "--queue-len", "20", "--json"], capsys)[1])
    assert d["techniques"] == ["continuous_batching"]


def test_baseline_from_an_aiperf_export(tmp_path, capsys):
    f = tmp_path / "profile_export_aiperf.json"
    f.write_text(json.dumps({"time_to_first_token": {"unit": "ms", "p95": 700.0, "p99": 900.0},
                             "inter_token_latency": {"unit": "ms", "p95": 20.0, "p99": 30.0}}))
    d = json.loads(run(["--baseline", str(f), *BASE, "--shared-prefix-frac", "0.5", "--on", "none", "--json"], capsys)[1])
    assert d["branch"] == "A" and d["failing"][0]["value"] == 700.0


def test_text_output_is_readable(capsys):
    rc, out = run(["--ttft-p95-ms", "1800", "--tpot-p95-ms", "30", *BASE, "--shared-prefix-frac", "0.7", "--on", "none"], capsys)
    assert "branch: [A]" in out and "try prefix_cache" in out and out.rstrip().splitlines()[-1].startswith("next:")


def test_bad_input_is_a_course_error(tmp_path, capsys):
    with pytest.raises(CourseError, match=r"slos\.ttft_p95_ms: 0\.5 ms looks like seconds"):
        run(["--ttft-p95-ms", "1800", "--tpot-p95-ms", "30", "--slo-ttft-p95-ms", "0.5", "--slo-tpot-p95-ms", "50"], capsys)
    f = tmp_path / "bad.json"
    f.write_text('{"metrics": {}, "slo": {}}')
    with pytest.raises(CourseError, match=r"unknown top-level key\(s\) \['slo'\]"):
        run(["--input", str(f)], capsys)


def test_bench_prints_the_figure(capsys):
    rc, out = run(["--bench", "50"], capsys)
    assert rc == 0 and out.startswith("one diagnosis: median ")
    median = float(out.split("median ")[1].split(" ms")[0])
    assert median < 5.0


def test_the_real_command_line():
    """The module is wired into `python -m inferopt`; errors exit 2 with the message, no traceback."""
    cmd = [sys.executable, "-m", "inferopt", "diagnose", "--ttft-p95-ms", "200", "--tpot-p95-ms", "90",
           *BASE, "--concurrency", "1", "--on", "none", "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["techniques"] == ["speculative_decoding"]
    r = subprocess.run(cmd[:-3] + ["--on", "flux_capacitor"], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert r.returncode == 2 and "unknown technique 'flux_capacitor'" in r.stderr and "Traceback" not in r.stderr


# ----------------------------------------------------------------- inputs checked for meaning (issue 50)
def main_out(argv, capsys):
    """`python -m inferopt diagnose ...` through the command line's own main(): (exit code, stdout, stderr)."""
    from inferopt.__main__ import main

    rc = main(["diagnose", *argv])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


MEANING = [   # (what is wrong, argv, the one error line must match)
    ("TTFT SLO above the whole-request SLO (seconds given as ms)",
     ["--ttft-p95-ms", "700", "--slo-ttft-p95-ms", "800", "--slo-e2e-p95-ms", "30"],
     r"^error: slos\.ttft_p95_ms: 800 ms is above the whole-request SLO e2e_p95_ms 30 ms.*write 30000"),
    ("measured TTFT above the measured whole request",
     ["--ttft-p95-ms", "900", "--e2e-p95-ms", "800", "--slo-ttft-p95-ms", "500"],
     r"^error: metrics\.ttft_p95_ms: 900 ms is above the measured e2e_p95_ms 800 ms"),
    ("measured TTFT in seconds against an SLO in ms",
     ["--ttft-p95-ms", "0.7", "--slo-ttft-p95-ms", "500"], r"^error: metrics\.ttft_p95_ms: 0\.7 ms .*looks like seconds"),
    ("measured TPOT in microseconds",
     ["--tpot-p95-ms", "42000", "--slo-tpot-p95-ms", "50"], r"^error: metrics\.tpot_p95_ms: .*looks like microseconds"),
    ("prompt longer than the model's context",
     ["--model", "llama-3.1-8b", "--gpu", "H100", "--prompt-tokens", "200000", "--output-tokens", "10",
      "--ttft-p95-ms", "900", "--slo-ttft-p95-ms", "500"],
     r"^error: workload\.prompt_tokens: 200,000 tokens is longer than the context of 131,072 tokens "
     r"\(llama-3\.1-8b's max_position_embeddings\); vLLM refuses"),
    ("prompt + output longer than --max-model-len",
     ["--model", "llama-3.1-8b", "--gpu", "H100", "--max-model-len", "4096", "--prompt-tokens", "4000",
      "--output-tokens", "500", "--ttft-p95-ms", "900", "--slo-ttft-p95-ms", "500"],
     r"^error: workload: prompt_tokens \+ output_tokens = 4,500 tokens .* cuts each output to 96 tokens"),
]


@pytest.mark.parametrize("what,argv,pattern", MEANING, ids=[m[0] for m in MEANING])
def test_inputs_are_checked_for_meaning_in_one_line(what, argv, pattern, capsys):
    import re

    rc, out, err = main_out(argv, capsys)
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert re.search(pattern, err.strip()), err


def test_the_same_inputs_made_consistent_are_diagnosed(capsys):
    """Each refusal above is for the inconsistency: the consistent neighbour of each case runs."""
    for argv in (["--ttft-p95-ms", "700", "--slo-ttft-p95-ms", "800", "--slo-e2e-p95-ms", "30000"],
                 ["--ttft-p95-ms", "700", "--e2e-p95-ms", "8000", "--slo-ttft-p95-ms", "500"],
                 ["--tpot-p95-ms", "42", "--slo-tpot-p95-ms", "50"],
                 ["--model", "llama-3.1-8b", "--gpu", "H100", "--max-model-len", "4096", "--prompt-tokens", "3500",
                  "--output-tokens", "500", "--ttft-p95-ms", "900", "--slo-ttft-p95-ms", "500"]):
        rc, out, err = main_out([*argv, "--json"], capsys)
        assert rc == 0 and err == "", (argv, err)
        json.loads(out)


def test_a_whole_request_slo_that_fails_is_diagnosed():
    from inferopt.diagnosis.decision import diagnose

    d = diagnose({"ttft_p95_ms": 300, "tpot_p95_ms": 40, "e2e_p95_ms": 9000}, {"e2e_p95_ms": 5000})
    assert d.failing[0]["metric"] == "e2e_p95_ms" and d.branch == "B"   # decode takes most of the request
    d = diagnose({"ttft_p95_ms": 300, "tpot_p95_ms": 40, "e2e_p95_ms": 4000}, {"e2e_p95_ms": 5000})
    assert d.branch is None


# ----------------------------------------------------------------- the sample size travels (issue 50)
def vllm_bench_result(n: int, *, detailed: bool = True, percentiles=(99,), ttft_s=0.2, tpot_s=0.02, out_len=64) -> dict:
    """A `vllm bench serve --save-result` JSON with vLLM 0.32's own field names (vllm/benchmarks/serve.py:
    benchmark() `result`, process_one_metric() `mean_/median_/std_/p{N}_<metric>_ms`, main() `num_prompts` ...);
    without --save-detailed vLLM deletes input_lens, output_lens, start_times, ttfts, itls, generated_texts, errors."""
    import numpy as np

    ttfts = [ttft_s * (1 + 0.4 * i / n) for i in range(n)]                # slowest 1.4x the fastest
    itls = [[tpot_s] * (out_len - 1) for _ in range(n)]
    lat = [t + tpot_s * (out_len - 1) for t in ttfts]
    tpots = [(la - t) / (out_len - 1) for la, t in zip(lat, ttfts, strict=True)]
    d = {"date": "20261206-031500", "endpoint_type": "openai", "backend": "openai", "label": None,
         "model_id": "Qwen/Qwen3-8B", "tokenizer_id": "Qwen/Qwen3-8B", "num_prompts": n, "request_rate": "inf",
         "burstiness": 1.0, "max_concurrency": 8, "duration": n * 0.05, "completed": n, "failed": 0,
         "total_input_tokens": 512 * n, "total_output_tokens": out_len * n, "request_throughput": 20.0,
         "request_goodput": None, "output_throughput": 20.0 * out_len, "total_token_throughput": 20.0 * (512 + out_len),
         "input_lens": [512] * n, "output_lens": [out_len] * n, "ttfts": ttfts, "itls": itls, "latencies": lat,
         "start_times": [0.05 * i for i in range(n)], "queue_times": [0.0] * n, "generated_texts": [""] * n,
         "errors": [""] * n, "max_output_tokens_per_s": 1500.0, "max_concurrent_requests": 8, "rtfx": 0.0}
    for name, vals in (("ttft", ttfts), ("tpot", tpots), ("itl", [g for x in itls for g in x]), ("e2el", lat)):
        ms = np.asarray(vals) * 1000
        d[f"mean_{name}_ms"], d[f"median_{name}_ms"], d[f"std_{name}_ms"] = ms.mean(), np.median(ms), ms.std()
        for p in percentiles:
            d[f"p{p}_{name}_ms"] = float(np.percentile(ms, p))
    if not detailed:
        for k in ("input_lens", "output_lens", "start_times", "ttfts", "itls", "generated_texts", "errors"):
            del d[k]
    return d


SLO_ARGS = ["--slo-ttft-p95-ms", "500", "--slo-tpot-p95-ms", "50", "--on", "none"]


def test_a_vllm_bench_serve_result_is_a_baseline_that_keeps_its_request_count(tmp_path, capsys):
    f = tmp_path / "vllm-bench.json"
    f.write_text(json.dumps(vllm_bench_result(60)))
    rc, out, err = main_out(["--baseline", str(f), *SLO_ARGS, "--json"], capsys)
    d = json.loads(out)
    assert rc == 0 and d["sample"]["requests"] == 60
    assert all(v["passed"] and v["basis"] == "order-statistic bound" for v in d["sample"]["verdicts"])
    assert d["next_step"].startswith("All SLOs are met")


def test_twelve_requests_never_say_stop(tmp_path, capsys):
    """Issue 50: 'all SLOs met: stop' from 12 requests. The same run of 12 requests, read three ways (vLLM's
    per-request file, vLLM's summary with --metric-percentiles 95,99, an aiperf export of 8 requests)."""
    f = tmp_path / "vllm-12.json"
    f.write_text(json.dumps(vllm_bench_result(12)))
    g = tmp_path / "vllm-12-summary.json"
    g.write_text(json.dumps(vllm_bench_result(12, detailed=False, percentiles=(95, 99))))
    aiperf = REPO_ROOT / "tests" / "data" / "aiperf_profile_export_aiperf.json"   # request_count 8
    for path, n in ((f, 12), (g, 12), (aiperf, 8)):
        rc, out, err = main_out(["--baseline", str(path), "--slo-ttft-p95-ms", "5000", "--slo-tpot-p95-ms", "500",
                                 "--on", "none", "--json"], capsys)
        d = json.loads(out)
        assert rc == 0 and d["sample"]["requests"] == n, (path, err)
        assert "All SLOs are met" not in d["next_step"] and d["branch"] is None
        assert d["next_step"].startswith(f"Not enough requests to say TTFT P95 <= 5000 ms: need 45, measured {n}"), d["next_step"]


def test_the_checker_rejects_the_old_stop(tmp_path, capsys):
    """The old answer ('All SLOs are met: stop' for 12 requests) is what the 45-request run answers, and the
    12-request assertion above fails on it."""
    f = tmp_path / "vllm-45.json"
    f.write_text(json.dumps(vllm_bench_result(45)))
    d = json.loads(main_out(["--baseline", str(f), *SLO_ARGS, "--json"], capsys)[1])
    with pytest.raises(AssertionError):
        assert "All SLOs are met" not in d["next_step"]


def test_the_p99_bounds_the_p95_from_a_summary_of_100_requests(capsys):
    """No per-request values: the rank argument. From 100 requests the sample P99 lies at or above the
    99th fastest, the 90 % bound of the P95; with 60, neither is known to bound it."""
    base = ["--ttft-p95-ms", "300", "--ttft-p99-ms", "450", "--slo-ttft-p95-ms", "500", "--json"]
    d = json.loads(main_out([*base, "--requests", "100"], capsys)[1])
    assert d["sample"]["verdicts"][0]["passed"] is True and d["next_step"].startswith("All SLOs are met")
    d = json.loads(main_out([*base, "--requests", "60"], capsys)[1])
    assert d["sample"]["verdicts"][0]["passed"] is None and "per-request latencies" in d["next_step"]
    d = json.loads(main_out([*base[:4], "--ttft-p99-ms", "520", *base[4:], "--requests", "100"], capsys)[1])
    assert d["sample"]["verdicts"][0]["passed"] is None   # the P99 is above the SLO: the bound does not hold


def test_the_default_vllm_summary_without_a_p95_is_refused_in_one_line(tmp_path, capsys):
    f = tmp_path / "vllm-default.json"
    f.write_text(json.dumps(vllm_bench_result(200, detailed=False)))   # --metric-percentiles 99: vLLM's default
    rc, out, err = main_out(["--baseline", str(f), *SLO_ARGS], capsys)
    assert rc == 2 and re.search(r"^error: --baseline .*holds no P95.*--metric-percentiles 95,99", err.strip())


def test_our_json_lines_carry_their_requests_and_bounds(tmp_path, capsys):
    from inferopt.bench.metrics import RequestRecord, summarize
    from inferopt.bench.results import ResultWriter

    path = tmp_path / "run.jsonl"
    with ResultWriter(path, run="r1") as wr:
        for c, n in ((1, 12), (8, 50)):
            recs = [RequestRecord(i, 100, 33, ttft_s=0.1 + 0.001 * i, e2e_s=1.0 + 0.001 * i, start_s=0.01 * i)
                    for i in range(n)]
            for r in recs:
                wr.request(r, concurrency=c)
            wr.summary({**summarize(recs, duration_s=2.0), "concurrency": c})
    from inferopt.bench.results import load_baseline

    m = load_baseline(path)
    assert m["requests"] == 50 and m["ttft_p95_bound_ms"] >= m["ttft_p95_ms"]
    rc, out, err = main_out(["--baseline", str(path), *SLO_ARGS, "--json"], capsys)
    assert json.loads(out)["next_step"].startswith("All SLOs are met")


# ----------------------------------------------------------------- saturation named as saturation (issue 50)
SAT_ARGS = ["--throughput-tok-s", "900", "--gpu-util", "0.4", "--queue-len", "30", "--slo-throughput-tok-s", "2000", "--concurrency", "64",
            "--num-gpus", "8", "--gpu-type", "H100", "--target-rps", "20", "--json"]


def sweep_files(tmp_path, rps, goodput=None) -> list[str]:
    """One `vllm bench serve --save-result` file per --max-concurrency level (16, 32, 64, 128)."""
    out = []
    for i, (c, r) in enumerate(zip((16, 32, 64, 128), rps, strict=True)):
        d = vllm_bench_result(60, detailed=False, percentiles=(95, 99))
        d.update(max_concurrency=c, request_throughput=r, request_goodput=None if goodput is None else goodput[i])
        f = tmp_path / f"c{c}.json"
        f.write_text(json.dumps(d))
        out.append(str(f))
    return out


def _offers_a_higher_cap(d) -> bool:
    return any("--max-num-seqs" in c["flags_add"] for c in d["changes"])


def test_a_flat_sweep_is_saturation_and_the_fleet_is_sized_on_goodput(tmp_path, capsys):
    files = sweep_files(tmp_path, (4.0, 4.1, 4.1, 4.05), goodput=(4.0, 3.9, 2.0, 0.5))
    rc, out, err = main_out([*SAT_ARGS, "--sweep", *files], capsys)
    d = json.loads(out)
    assert rc == 0 and d["saturation"]["saturated"] and d["saturation"]["roof_rps"] == 4.1
    assert not _offers_a_higher_cap(d)
    from inferopt.planning.capacity import plan_instances

    plan = plan_instances(20, 4.0, gpus_per_instance=1)   # goodput at the SLO, not the roof of 4.1 req/s
    assert d["saturation"]["fleet"]["instances"] == plan.instances == 7
    assert d["changes"][0]["id"] == "add_replicas" and d["worst_metric"] == "goodput_rps"
    assert "saturated at 4.1 req/s (the throughput roof)" in d["next_step"] and "7 replicas" in d["next_step"]


def test_a_rising_sweep_is_not_saturation_and_the_checker_rejects_the_old_answer(tmp_path, capsys):
    rising = sweep_files(tmp_path, (1.0, 1.9, 3.7, 7.0))
    d = json.loads(main_out([*SAT_ARGS, "--sweep", *rising], capsys)[1])
    assert d["saturation"]["saturated"] is False and _offers_a_higher_cap(d)   # the cap still buys throughput
    old = json.loads(main_out(SAT_ARGS, capsys)[1])     # no sweep: the rule tree's answer, as before issue 50
    with pytest.raises(AssertionError):
        assert not _offers_a_higher_cap(old)


def test_a_course_sweep_file_shows_the_roof(tmp_path, capsys):
    from inferopt.bench.results import ResultWriter

    path = tmp_path / "sweep.jsonl"
    with ResultWriter(path, run="s") as wr:
        for c, r in ((1, 2.0), (2, 3.8), (4, 4.0), (8, 4.05)):
            wr.summary({"concurrency": c, "completed": 60, "request_throughput_rps": r, "ttft_p95_ms": 100 * c,
                        "tpot_p95_ms": 20})
    d = json.loads(main_out([*SAT_ARGS, "--sweep", str(path), "--slo-ttft-p95-ms", "500", "--slo-tpot-p95-ms", "50"],
                            capsys)[1])
    sat = d["saturation"]
    assert sat["saturated"] and sat["knee"] == 2 and sat["goodput_rps"] == 4.0   # concurrency 4 meets TTFT 500 ms
    assert sat["fleet"]["base_instances"] == 5


def test_a_sweep_over_two_loads_is_refused_in_one_line(tmp_path, capsys):
    f = tmp_path / "bad.yaml"
    f.write_text("metrics: {throughput_tok_s: 900}\nslos: {throughput_tok_s: 2000}\n"
                 "sweep: [{concurrency: 4, request_throughput_rps: 2}, {rate: 8, request_throughput_rps: 2}]\n")
    rc, out, err = main_out(["--input", str(f)], capsys)
    assert rc == 2 and err.startswith("error: sweep: the levels vary ['concurrency', 'rate']; give one sweep")


# ----------------------------------------------------------------- diagnose acts on its model (issue 50)
MODEL_ARGS = ["--model", "llama-3.1-8b", "--gpu", "H100", "--prompt-tokens", "2000", "--output-tokens", "200",
              "--concurrency", "64", "--tpot-p95-ms", "30", "--throughput-tok-s", "2400", "--json"]


def test_a_measured_ttft_p95_is_judged_with_the_model_predict_runs(capsys):
    """The steady state has no queue (TTFT ~60 ms here); predict simulates it (P95 ~2.9 s). A measured P95
    equal to predict's is explained; one a third of it is not."""
    from inferopt.performance.predict import predict

    p = predict("llama-3.1-8b", "H100", input_tokens=2000, output_tokens=200, concurrency=64)
    d = json.loads(main_out([*MODEL_ARGS, "--ttft-p95-ms", f"{p.ttft_p95_ms:.0f}", "--slo-tpot-p95-ms", "20"],
                            capsys)[1])
    ttft = next(c for c in d["model"]["checks"] if c["metric"] == "ttft")
    assert d["model"]["explains"] and ttft["source"].startswith("predict") and ttft["ratio"] == 1.0
    assert d["model"]["predicted"]["ttft_ms"] < p.ttft_p95_ms / 10      # the fast path alone called it unexplained
    d = json.loads(main_out([*MODEL_ARGS, "--ttft-p95-ms", f"{p.ttft_p95_ms / 3:.0f}", "--slo-tpot-p95-ms", "20"],
                            capsys)[1])
    assert not d["model"]["explains"] and "cannot explain" in d["model"]["summary"]
    # the model cannot reproduce it: the next step says measure, with the gap, and names the tree's branch
    assert d["next_step"].startswith("The model cannot explain this (ttft measured") and "measure" in d["next_step"]
    assert f"branch {d['branch']}" in d["next_step"] and not d["flags"]


def test_what_the_model_ranks_is_in_the_change_list_with_its_predicted_effect(capsys):
    from inferopt.performance.predict import predict

    p = predict("llama-3.1-8b", "H100", input_tokens=2000, output_tokens=200, concurrency=64)
    args = [*MODEL_ARGS, "--ttft-p95-ms", f"{p.ttft_p95_ms:.0f}", "--slo-tpot-p95-ms", "20"]
    d = json.loads(main_out(args, capsys)[1])
    fp8 = next(c for c in d["changes"] if c["id"] == "fp8_w8a8")
    assert fp8["kind"] == "model" and fp8["flags_add"] == ["--quantization", "fp8"]
    assert fp8["predicted"]["tpot_ms"] < d["model"]["predicted"]["tpot_ms"]
    assert d["flags"] == ["--quantization", "fp8"] and "performance model ranks first" in d["next_step"]
    assert "profile" not in d["next_step"]
    # the recommendation names its decision-tree branch, the binding limit and how far the model is from the run
    assert f"Decision tree branch {d['branch']}" in d["next_step"]
    assert f"binding limit: {d['model']['binding_limit']}" in d["next_step"]
    assert "the model reproduces the measurement (TPOT P95 (ms) measured 30 vs predicted" in d["next_step"]
    assert "% off)" in d["next_step"]
    d = json.loads(main_out([*args, "--enforce-eager"], capsys)[1])   # --enforce-eager left on: free, first
    assert d["changes"][0]["id"] == "cuda_graphs" and d["flags_remove"] == ["--enforce-eager"]
