import sys; sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from common import build
C = []
md = lambda s: C.append(("md", s)); code = lambda s: C.append(("code", s))
md(r"""
# Lab 4: from raw request records to percentiles, goodput and the SLO frontier

A load test ends with a pile of per-request records. The numbers a deployment review asks for
— P95 time to first token (TTFT, 首 token 延迟), P95 time per output token (TPOT, 每个输出 token 的时间),
goodput (有效吞吐) and "how much concurrency can we take before an SLO breaks" — are all computed
from that pile. In this lab you write those computations, then run them on a live measurement
and draw the plots of seed §5.3.

1. **Compute** (tasks 1–3): percentiles with linear interpolation, TPOT per request, goodput
   under SLOs, the largest concurrency that meets every SLO; each task has a check on fixed data.
2. **Plot** (task 4): latency percentiles against concurrency with the SLO lines and the answer
   of task 3 marked, and the throughput–latency (Pareto) curve.
3. **Measure**: a short closed-loop sweep on the live CPU engine (concurrency 1, 2, 4); every
   request is saved to a JSON-lines file as it completes. Then your functions run on those
   records and are graded against `inferopt.bench.metrics` on whatever the engine measured today.
""")
code(r"""
import math
import numpy as np

from inferopt.engine import VLLMServer
from inferopt.bench import experiments, plots
from inferopt.bench.metrics import SLO, summarize, max_level_meeting, table
from inferopt.bench.results import ResultWriter, new_results_path, read_jsonl, records_from_lines
from inferopt.bench.workload import load_tokenizer

CONCURRENCY = [1, 2, 4]
# CPU-scale SLOs (the §5 SLOs, 500 ms / 50 ms, are for an H100 serving a 70B model)
SLO_CPU = SLO(ttft_ms=800, tpot_ms=120, percentile=95)
print(SLO_CPU)
""")
md(r"""
A request record, as the load generator saves it, holds what the client saw, in seconds:
`ttft_s` (first token arrived), `e2e_s` (last token arrived), `output_tokens` (from the
server's usage record), `itl_s` (every gap between two streamed chunks), `prompt_tokens`, and the
`concurrency` level it belongs to.

## 1. Compute

**Task 1a.** `percentile(values, q)`: the q-th percentile with *linear interpolation* between
the two nearest ranks (numpy's default and `vllm bench serve`'s rule): sort the values, take the
fractional rank `r = (n − 1) · q / 100`, and interpolate between the values at `floor(r)` and
`ceil(r)`. Do not call `np.percentile`.

**Task 1b.** `tpot_ms(record)`: TPOT of one request in ms, `(e2e − ttft) / (n − 1)`; `None` when
`n < 2`. (genai-perf and aiperf call this number `inter_token_latency`; vLLM's ITL is the raw
chunk gaps, and guidellm's `time_per_output_token` divides the whole E2E by n. Same words,
different numbers: always check the definition.)
""")
code(r"""
def percentile(values, q):
    ### BEGIN SOLUTION
    v = sorted(values)
    if not v:
        return float("nan")
    r = (len(v) - 1) * q / 100
    lo, hi = math.floor(r), math.ceil(r)
    return v[lo] + (v[hi] - v[lo]) * (r - lo)
    ### END SOLUTION


def tpot_ms(record):
    ### BEGIN SOLUTION
    n = record["output_tokens"]
    if n < 2:
        return None
    return 1000.0 * (record["e2e_s"] - record["ttft_s"]) / (n - 1)
    ### END SOLUTION
""")
code(r"""
# check 1: against numpy on fixed data
data = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]
for q in (0, 25, 50, 90, 95, 99, 100):
    assert abs(percentile(data, q) - np.percentile(data, q)) < 1e-9, q
assert tpot_ms({"output_tokens": 1, "ttft_s": 0.1, "e2e_s": 0.1}) is None
assert abs(tpot_ms({"output_tokens": 11, "ttft_s": 0.5, "e2e_s": 1.5}) - 100.0) < 1e-9
print("percentile and TPOT: correct on fixed data")
""")
md(r"""
**Task 2.** `goodput_rps(rows, slo, duration_s)`: requests per second that met **every** SLO on
their own — TTFT ≤ `slo.ttft_ms` and TPOT ≤ `slo.tpot_ms` for that request. Throughput counts
every completed request; goodput counts only the ones a user would call fast enough, which is why
it is the number to maximise under SLOs (DistServe's definition, also `vllm bench serve --goodput`).
""")
code(r"""
def goodput_rps(rows, slo, duration_s):
    ### BEGIN SOLUTION
    good = 0
    for d in rows:
        t = tpot_ms(d)
        if 1000 * d["ttft_s"] <= slo.ttft_ms and (t is None or t <= slo.tpot_ms):
            good += 1
    return good / duration_s
    ### END SOLUTION
""")
code(r"""
# check 2
fixed = [{"output_tokens": 11, "ttft_s": 0.5, "e2e_s": 1.5}, {"output_tokens": 11, "ttft_s": 2.0, "e2e_s": 3.0},
         {"output_tokens": 11, "ttft_s": 0.2, "e2e_s": 3.2}]
assert goodput_rps(fixed, SLO(ttft_ms=1000, tpot_ms=150), 2.0) == 0.5
print("goodput: correct on fixed data")
""")
md(r"""
**Task 3.** `max_concurrency(summaries, slo)`: the largest concurrency whose P95 TTFT and P95 TPOT
both meet the SLO, scanning levels in increasing order and stopping at the first level that
misses (a lucky pass above a failing level is noise, not capacity). `None` if even the first
level fails. Use the keys `ttft_p95_ms` and `tpot_p95_ms` of each summary.
""")
code(r"""
def max_concurrency(summaries, slo):
    ### BEGIN SOLUTION
    best = None
    for s in sorted(summaries, key=lambda s: s["concurrency"]):
        if s["ttft_p95_ms"] <= slo.ttft_ms and s["tpot_p95_ms"] <= slo.tpot_ms:
            best = s["concurrency"]
        else:
            break
    return best
    ### END SOLUTION
""")
code(r"""
# check 3
rows = [{"concurrency": c, "ttft_p95_ms": 100.0, "tpot_p95_ms": t} for c, t in ((8, 150), (1, 90), (4, 170), (2, 120))]
assert max_concurrency(rows, SLO(ttft_ms=500, tpot_ms=160)) == 2
assert max_concurrency(rows, SLO(ttft_ms=50, tpot_ms=160)) is None
print("max_concurrency: correct on fixed data")
""")
md(r"""
## 2. Plot

**Task 4.** Return two figures: (a) TTFT and TPOT percentiles against concurrency with the SLO
lines and the maximum concurrency marked, (b) output throughput against P95 TPOT with the TPOT
SLO line. The builders are in `inferopt.bench.plots` (`latency_vs_concurrency`, `pareto`); your
job is to pick the right inputs.
""")
code(r"""
def make_figures(summaries, slo):
    ### BEGIN SOLUTION
    fig_latency = plots.latency_vs_concurrency(summaries, slo)
    fig_pareto = plots.pareto(summaries, latency="tpot_p95_ms", slo_ms=slo.tpot_ms)
    return fig_latency, fig_pareto
    ### END SOLUTION
""")
code(r"""
# check 4 on fixed summaries
fixed_rows = [{"concurrency": c, "ttft_p50_ms": 100.0 * c, "ttft_p95_ms": 150.0 * c, "ttft_p99_ms": 200.0 * c,
               "tpot_p50_ms": 80 + 10.0 * c, "tpot_p95_ms": 90 + 10.0 * c, "tpot_p99_ms": 95 + 10.0 * c,
               "output_throughput_tok_s": 9.0 * c, "failed": 0} for c in (1, 2, 4)]
fa, fb = make_figures(fixed_rows, SLO_CPU)
texts = [a.text for a in fa.layout.annotations]
assert "max concurrency meeting SLOs: 2" in texts and any("SLO P95 120 ms" in t for t in texts), texts
assert fb.layout.xaxis.title.text == "tpot_p95_ms" and any("120" in (a.text or "") for a in fb.layout.annotations)
print("figures: correct on fixed data")
""")
md(r"""
## 3. Measure, and grade on live data

One engine, three concurrency levels, 100-token prompts, 16 output tokens (`ignore_eos`, so every
request really produces 16). Each level uses fresh random prompts, so no level is helped by the
prefix cache of the one before. The progress bar counts finished requests; the results file
grows line by line.
""")
code(r"""
# NBVAL_IGNORE_OUTPUT
tok = load_tokenizer()
path = new_results_path("lab4-sweep")
with VLLMServer(max_model_len=2048, kv_cache_gib=1.0) as srv, ResultWriter(path, run="lab4") as writer:
    summaries = experiments.concurrency_sweep(srv, tok, concurrencies=CONCURRENCY, input_tokens=100,
                                              output_tokens=16, slo=SLO_CPU, writer=writer)
request_lines, summary_lines = read_jsonl(path)
by_level = {c: [d for d in request_lines if d["concurrency"] == c] for c in CONCURRENCY}
print(f"{len(request_lines)} request lines, {len(summary_lines)} summary lines in {path.name}")
print({k: request_lines[0][k] for k in ("concurrency", "prompt_tokens", "output_tokens", "ttft_s", "e2e_s")})
assert len(request_lines) == sum(2 * c for c in CONCURRENCY) and len(summary_lines) == 3
assert all(d["output_tokens"] == 16 and d["prompt_tokens"] == 100 for d in request_lines)
""")
code(r"""
# check on live data: your functions give the course's numbers for every level
for s in summaries:
    rows = by_level[s["concurrency"]]
    ref = summarize(records_from_lines(rows))
    assert abs(percentile([1000 * d["ttft_s"] for d in rows], 95) - ref["ttft_p95_ms"]) < 1e-6
    assert abs(percentile([tpot_ms(d) for d in rows], 95) - ref["tpot_p95_ms"]) < 1e-6
    assert abs(goodput_rps(rows, SLO_CPU, s["duration_s"]) - s["goodput_rps"]) < 1e-9
assert max_concurrency(summaries, SLO_CPU) == max_level_meeting(summaries, SLO_CPU)
print("all your functions agree with inferopt.bench.metrics on today's measurement")
""")
code(r"""
# NBVAL_IGNORE_OUTPUT
print(table(summaries, ["concurrency", "ttft_p95_ms", "tpot_p50_ms", "tpot_p95_ms", "output_throughput_tok_s",
                        "goodput_rps", "meets_slo"]))
best = max_concurrency(summaries, SLO_CPU)
print("max concurrency meeting the CPU SLOs:", best)
thr = [s["output_throughput_tok_s"] for s in summaries]
tpot = [s["tpot_p50_ms"] for s in summaries]
print("throughput ratio c=4 / c=1: %.2f, median TPOT ratio: %.2f" % (thr[-1] / thr[0], tpot[-1] / tpot[0]))
assert thr[-1] > 1.5 * thr[0], "continuous batching should raise throughput with concurrency"
fig_latency, fig_pareto = make_figures(summaries, SLO_CPU)
fig_latency.show()
fig_pareto.show()
if best is not None:
    assert f"max concurrency meeting SLOs: {best}" in [a.text for a in fig_latency.layout.annotations]
""")
md(r"""
**What to take away.** Throughput grows with concurrency because continuous batching (连续批处理)
puts more requests into each decode step, but every request's TPOT grows too: the frontier is
the last level before a P95 crosses its SLO. Pointed at a real server
(`python -m inferopt bench sweep --url ... --model ... --slo-ttft-ms 500 --slo-tpot-ms 50`), the
same code draws the same plots for a GPU deployment.
""")
build(C, str(__import__("pathlib").Path(__file__).resolve().parents[2]) + "/solutions/lab4-benchmark-plotting.ipynb")
