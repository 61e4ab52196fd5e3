import sys; sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from common import build
C = []
md = lambda s: C.append(("md", s)); code = lambda s: C.append(("code", s))
md(r"""
# Lab 3: a live vLLM engine — start it with the plan's flags, watch it stream, read its metrics

Seed §5.3 deploys the plan of §5.2 in four steps: get the model, start vLLM with the plan's
flags, load-test it against the SLOs, then roll it out as a canary (灰度发布). This lab walks the
first three on a real engine. On a laptop the engine is vLLM's CPU backend serving
SmolLM2-135M (float32), so every size is scaled down; on a CUDA machine the same cells start the
GPU engine.

You will:
1. translate the plan's launch flags into flags that make sense for the engine on this machine;
2. stream one answer and compute time to first token (TTFT, 首 token 延迟) and time per output
   token (TPOT, 每个输出 token 的时间) from your own timestamps, live;
3. read the engine's Prometheus `/metrics`;
4. run the scaled-down SLO check of §5.3 and give a verdict;
5. stop the engine.
""")
code(r"""
from inferopt.banner import gpu_banner
from inferopt.engine import VLLMServer, engine_kind
from inferopt.planner import make_plan
from inferopt.bench import experiments, loadgen
from inferopt.bench.metrics import SLO, table
from inferopt.bench.workload import Workload, build_requests, load_tokenizer

plan = make_plan("llama3-70b-chat")
print("the plan's vLLM flags (8 x H100, Llama-3-70B FP8):")
print(plan.command.module_shell)
""")
md(r"""
## 1. The plan's flags, translated

The planner (chapter 05) wrote flags for eight H100s. Some of them mean nothing on one CPU core,
one would stop the engine from starting, and two are sized for a 70B model at 50 QPS.

**Task 1.** Write `cpu_flags(flags)` that returns the flags for the course's CPU engine:
- drop `--tensor-parallel-size N` (one CPU socket, no tensor parallelism), `--gpu-memory-utilization X`
  (the CPU engine gets an explicit KV budget instead) and `--port N` (the engine picks a free port);
- drop `--kv-cache-dtype fp8`: on an x86 CPU without AVX-512/AMX vLLM refuses to start with it
  ("FP8 KV cache on CPU requires x86 with AVX-512 or AMX");
- keep the feature switches (`--enable-prefix-caching`, `--enable-chunked-prefill`);
- scale the sizes: `--max-num-batched-tokens` to 2048 (vLLM's CPU default) and `--max-num-seqs` to 16.

Keep the order of the flags you keep. Each value follows its flag as the next list item.
""")
code(r"""
DROP = {"--tensor-parallel-size", "--gpu-memory-utilization", "--port", "--kv-cache-dtype"}
SCALE = {"--max-num-batched-tokens": "2048", "--max-num-seqs": "16"}


def cpu_flags(flags):
    ### BEGIN SOLUTION
    out, i = [], 0
    while i < len(flags):
        f = flags[i]
        has_value = i + 1 < len(flags) and not flags[i + 1].startswith("--")
        value = flags[i + 1] if has_value else None
        i += 2 if has_value else 1
        if f in DROP:
            continue
        out.append(f)
        if has_value:
            out.append(SCALE.get(f, value))
    return out
    ### END SOLUTION
""")
code(r"""
# check 1
flags = cpu_flags(plan.command.flags)
print(flags)
assert flags == ["--enable-prefix-caching", "--enable-chunked-prefill", "--max-num-batched-tokens", "2048",
                 "--max-num-seqs", "16"], flags
assert cpu_flags(["--port", "9", "--enable-prefix-caching"]) == ["--enable-prefix-caching"]
""")
md(r"""
## 2. Start the engine and stream one answer

`VLLMServer` starts `python -m vllm.entrypoints.openai.api_server` in its own process group and
waits for `/health` (about 35–50 s on 2 CPU cores: Python imports, loading the weights,
allocating the KV cache). It is stopped at the end of the lab — or by itself if the kernel dies.
On a CUDA machine this cell starts the GPU engine instead (the banner below says which).
""")
code(r"""
_ = gpu_banner()
""")
code(r"""
# NBVAL_IGNORE_OUTPUT
srv = VLLMServer(max_model_len=2048, kv_cache_gib=1.0 if engine_kind() == "cpu" else None,
                 extra_args=flags)
srv.start()
print(f"engine up in {srv.startup_seconds:.0f} s; KV cache {srv.kv_cache_tokens} tokens; "
      f"max concurrency at 2048 tokens: {srv.max_concurrency}x")
assert srv.kv_cache_tokens and srv.kv_cache_tokens >= 2048
""")
md(r"""
**Task 2.** `stream_chat` calls `on_token(piece)` for every streamed chunk. Write an `on_token`
that records `time.perf_counter()` for each piece and prints the piece (so you see tokens arrive),
then `live_stats(t0, stamps, n_tokens)` that returns `(ttft_ms, tpot_ms)`: TTFT from the send
time `t0` to the first stamp, TPOT = (last stamp − first stamp) / (n_tokens − 1).
""")
code(r"""
import time

stamps = []


def on_token(piece):
    ### BEGIN SOLUTION
    stamps.append(time.perf_counter())
    print(piece, end="", flush=True)
    ### END SOLUTION


def live_stats(t0, stamps, n_tokens):
    ### BEGIN SOLUTION
    ttft_ms = 1000 * (stamps[0] - t0)
    tpot_ms = 1000 * (stamps[-1] - stamps[0]) / (n_tokens - 1)
    return ttft_ms, tpot_ms
    ### END SOLUTION
""")
code(r"""
# NBVAL_IGNORE_OUTPUT
stamps.clear()
t0 = time.perf_counter()
answer = srv.stream_chat("Explain in two sentences what a KV cache is.", max_tokens=48, on_token=on_token)
ttft_ms, tpot_ms = live_stats(t0, stamps, answer["output_tokens"])
print(f"\n\nTTFT {ttft_ms:.0f} ms, TPOT {tpot_ms:.0f} ms over {answer['output_tokens']} tokens "
      f"(server-side usage); the engine helper measured TTFT {1000 * answer['ttft_s']:.0f} ms")
# check 2: your numbers agree with the helper's own timing (a few ms apart at most)
assert len(stamps) >= 2 and abs(ttft_ms - 1000 * answer["ttft_s"]) < 50
assert 0 < tpot_ms < 5000
""")
md(r"""
## 3. Read `/metrics`

vLLM exports Prometheus metrics at `/metrics`: histograms such as
`vllm:time_to_first_token_seconds` and `vllm:request_time_per_output_token_seconds` (vLLM's TPOT),
gauges such as `vllm:num_requests_running`, `vllm:num_requests_waiting` and
`vllm:kv_cache_usage_perc`, counters such as `vllm:prefix_cache_hits_total` and
`vllm:num_preemptions_total`. Chapter 06 builds the alerts on them.

**Task 3.** `metric_value(text, name)`: the sum of all samples called exactly `name` in the text
(one sample per label set, e.g. one per model), ignoring `#` comment lines. A sample line is
`name{labels} value` or `name value`.
""")
code(r"""
def metric_value(text, name):
    ### BEGIN SOLUTION
    total = 0.0
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        if head.split("{", 1)[0] == name:
            total += float(value)
    return total
    ### END SOLUTION
""")
code(r"""
# NBVAL_IGNORE_OUTPUT
text = srv.metrics_text()
names = ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
         "vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:time_to_first_token_seconds_count"]
ref = experiments.parse_metrics(text)
for n in names:
    print(f"{n:45s} {metric_value(text, n):10.3f}")
# check 3: the same values as prometheus_client's parser; one request (plus the chat above) was served
assert all(abs(metric_value(text, n) - ref.get(n, 0.0)) < 1e-9 for n in names)
assert metric_value(text, "vllm:generation_tokens_total") >= answer["output_tokens"]
""")
md(r"""
## 4. The scaled-down SLO check of §5.3

The seed's load test is `genai-perf profile ... --concurrency 100 --synthetic-input-tokens-mean 800
--output-tokens-mean 150`, and its verdict "TTFT P95 < 500 ms, TPOT P95 < 50 ms". On one CPU core
we scale it down: 200-token prompts, 32 output tokens, 4 requests in flight, and CPU-sized SLOs.
The course's load generator plays genai-perf's role (streaming, `ignore_eos`, exact prompt
lengths from the model's tokenizer).

**Task 4.** `slo_verdict(summary, slo)`: a dict `{"ttft": (value_ms, limit_ms, ok), "tpot": (...)}`
using the summary's P95 keys (`ttft_p95_ms`, `tpot_p95_ms`) and `ok = value <= limit`.
""")
code(r"""
SLO_CPU = SLO(ttft_ms=2000, tpot_ms=250, percentile=95)


def slo_verdict(summary, slo):
    ### BEGIN SOLUTION
    out = {}
    for metric, limit in (("ttft", slo.ttft_ms), ("tpot", slo.tpot_ms)):
        value = summary[f"{metric}_p{slo.percentile}_ms"]
        out[metric] = (value, limit, value <= limit)
    return out
    ### END SOLUTION
""")
code(r"""
# NBVAL_IGNORE_OUTPUT
tok = load_tokenizer()
reqs = build_requests(Workload(input_tokens=200, output_tokens=32, num_requests=8, seed=3), tok)
run = loadgen.run(loadgen.Endpoint.from_server(srv), reqs, concurrency=4, warmup=1)
summary = run.summary(SLO_CPU)
print(table([summary], ["concurrency", "completed", "ttft_p95_ms", "tpot_p95_ms", "output_throughput_tok_s",
                        "goodput_rps"]))
verdict = slo_verdict(summary, SLO_CPU)
for metric, (value, limit, ok) in verdict.items():
    print(f"{metric.upper()} P95 {value:.0f} ms vs SLO {limit:.0f} ms: {'PASS' if ok else 'FAIL'}")
# check 4: your verdict matches the course's SLO check
assert all(ok for _, _, ok in verdict.values()) == SLO_CPU.summary_meets(summary)
assert {m for m, (_, _, ok) in verdict.items() if not ok} == {v.split()[0].lower() for v in SLO_CPU.violations(summary)}
assert summary["completed"] == 8
""")
md(r"""
The verdict decides the next step of §5.3: if it passes, the canary starts (5 % → 50 % → 100 %
of traffic, each step held while the same SLOs are watched); if it fails, go back to the decision
tree (chapter 02) with this run as the baseline.
""")
code(r"""
for step in plan.canary:
    print(f"step {step.step}: {step.traffic_fraction:.0%} of traffic, hold {step.hold_minutes} min")
""")
md(r"""
## 5. Stop the engine
""")
code(r"""
srv.stop()
print(srv)
""")
build(C, str(__import__("pathlib").Path(__file__).resolve().parents[2]) + "/solutions/lab3-live-vllm.ipynb")
