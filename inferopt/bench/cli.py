"""``python -m inferopt bench ...``: sweep a server (or a fresh CPU engine), import other tools' files.

    python -m inferopt bench sweep --concurrency 1 2 4 8            # starts the default CPU engine
    python -m inferopt bench sweep --url http://host:8000 --model NAME --api-key KEY --tokenizer DIR
    python -m inferopt bench sweep --rate 0.5 1 2 --requests 20      # open loop
    python -m inferopt bench import profile_export_aiperf.json      # or a vllm bench serve JSON
"""
from __future__ import annotations

import contextlib
import json
import os
import time

from inferopt.errors import CourseError


def add_subcommand(sub) -> None:
    p = sub.add_parser("bench", help="load-test an OpenAI-compatible server; import benchmark results")
    bsub = p.add_subparsers(dest="bench_command", required=True)
    s = bsub.add_parser("sweep", help="closed-loop concurrency levels or open-loop rates; saves JSON lines")
    lv = s.add_mutually_exclusive_group()
    lv.add_argument("--concurrency", type=int, nargs="+", help="concurrency levels, e.g. 1 2 4 8")
    lv.add_argument("--rate", type=float, nargs="+", help="request rates in req/s (open loop)")
    s.add_argument("--url", default=None, help="server base URL; default: start the course's CPU engine")
    s.add_argument("--model", default=None, help="served model name (with --url)")
    s.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY"), help="bearer token (default $OPENAI_API_KEY)")
    s.add_argument("--tokenizer", default=None, help="tokenizer folder or hub id (default: the course model)")
    s.add_argument("--api", choices=["completions", "chat"], default="completions")
    s.add_argument("--input-tokens", type=int, default=100)
    s.add_argument("--output-tokens", type=int, default=32)
    s.add_argument("--requests", type=int, default=8, help="requests per level (at least 2 × concurrency)")
    s.add_argument("--shared-prefix-tokens", type=int, default=0)
    s.add_argument("--warmup", type=int, default=1)
    s.add_argument("--slo-ttft-ms", type=float, default=None)
    s.add_argument("--slo-tpot-ms", type=float, default=None)
    s.add_argument("--name", default="sweep", help="results file name prefix")
    s.add_argument("--no-progress", action="store_true")
    s.set_defaults(func=_sweep)
    i = bsub.add_parser("import", help="read a genai-perf/aiperf/vllm-bench/our result file and print its summary")
    i.add_argument("path")
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=_import)


def _sweep(a) -> int:
    from inferopt.bench.loadgen import Endpoint
    from inferopt.bench.metrics import SLO, table
    from inferopt.bench.results import ResultWriter, new_results_path
    from inferopt.bench.sweep import sweep
    from inferopt.bench.workload import Workload, load_tokenizer

    if not a.concurrency and not a.rate:
        a.concurrency = [1, 2, 4, 8]
    if a.url and not a.model:
        raise CourseError("--url needs --model (the served model name; see GET /v1/models)")
    slo = SLO(ttft_ms=a.slo_ttft_ms, tpot_ms=a.slo_tpot_ms) if (a.slo_ttft_ms or a.slo_tpot_ms) else None
    wl = Workload(input_tokens=a.input_tokens, output_tokens=a.output_tokens, num_requests=a.requests,
                  shared_prefix_tokens=a.shared_prefix_tokens)
    tok = load_tokenizer(a.tokenizer)
    path = new_results_path(a.name)
    t0 = time.monotonic()
    with contextlib.ExitStack() as stack:
        if a.url:
            ep = Endpoint(a.url, a.model, api_key=a.api_key, api=a.api)
        else:
            from inferopt.serving.engine import VLLMServer

            srv = stack.enter_context(VLLMServer())
            ep = Endpoint.from_server(srv, api_key=a.api_key, api=a.api)
        writer = stack.enter_context(ResultWriter(path, run=a.name))
        writer.write("config", {"workload": wl.to_dict(), "endpoint": ep.base_url, "model": ep.model,
                                "levels": a.concurrency or a.rate})
        rows = sweep(ep, wl, concurrencies=a.concurrency, rates=a.rate, tokenizer=tok, slo=slo,
                     warmup=a.warmup, writer=writer, progress=not a.no_progress)
    cols = ["concurrency" if a.concurrency else "rate", "completed", "ttft_p50_ms", "ttft_p95_ms", "tpot_p50_ms",
            "tpot_p95_ms", "itl_p99_ms", "output_throughput_tok_s", "request_throughput_rps",
            "client_cpu_ms_per_request", "wall_s"] + (["goodput_rps", "meets_slo"] if slo else [])
    print(table(rows, cols))
    print(f"saved {path}  (sweep wall time {time.monotonic() - t0:.0f} s)")
    return 0


def _import(a) -> int:
    from inferopt.bench.metrics import table
    from inferopt.bench.results import import_any

    summary, records = import_any(a.path)
    rows = [summary]
    if a.path.endswith(".jsonl"):
        from inferopt.bench.results import read_jsonl

        rows = read_jsonl(a.path)[1] or rows   # every level of one of our sweeps
    if a.json:
        print(json.dumps(summary, indent=2, sort_keys=True, default=str))
    else:
        print(table(rows, [k for k in ("concurrency", "rate", "completed", "ttft_p50_ms", "ttft_p95_ms", "tpot_p50_ms",
                                       "tpot_p95_ms", "e2e_p95_ms", "output_throughput_tok_s") if k in summary]))
        print(f"{len(records)} per-request records")
    return 0
