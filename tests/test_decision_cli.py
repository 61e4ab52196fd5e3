"""`python -m inferopt diagnose`: options, files, JSON output, errors, the timing benchmark."""
import argparse
import json
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
    assert d["recommendations"][2]["flags_add"] == ["--quantization", "awq_marlin"]


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
    d = json.loads(run(["--input", str(f), "--concurrency", "64", "--gpu-util", "0.2", "--json"], capsys)[1])
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
