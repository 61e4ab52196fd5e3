import sys; sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from common import build
C = []
md = lambda s: C.append(("md", s)); code = lambda s: C.append(("code", s))
md(r"""
# 02b · The decision tree, live: measure, diagnose, change one flag, measure again

Chapter 02 drew the decision tree (决策树) of seed §2 and its decision engine,
`inferopt.decision.diagnose`. Here every branch gets a **live experiment** on a real vLLM engine:

1. start the engine in a baseline configuration and **measure** a workload that shows the symptom;
2. give the measurement to the decision engine and let it **diagnose**: which branch, which technique, which flag;
3. change **that one flag** and nothing else (§4: 一次只改一项), and **measure again** with the same workload;
4. **assert** the effect with a margin, and print the measured ratio.

The branches run in the order of §4 — memory (C) first, because an engine that cannot hold the
load makes every other number meaningless; then TTFT (A), TPOT and throughput (B), and the tail
(D) last. Speculative decoding closes branch B and shows pitfall 3.2 live.

Scale: the CPU engine (vLLM's CPU backend, SmolLM2-135M in float32, one engine thread) on a
2-core machine. Each experiment is sized to take about a minute; the ratios, not the absolute
milliseconds, are the result. Timing cells are excluded from output comparison
(`# NBVAL_IGNORE_OUTPUT`) and assert the direction of the effect instead.

To keep engine starts few, engines are reused where the configuration is the same: five engines
in all, each differing from its comparison partner in exactly one flag.
""")
code(r"""
from inferopt.banner import gpu_banner
from inferopt.decision import diagnose, default_techniques_on
from inferopt.engine import VLLMServer
from inferopt.memory import cpu_engine_prediction
from inferopt.bench import experiments as X, plots
from inferopt.bench.metrics import SLO, max_level_meeting, table
from inferopt.bench.workload import load_tokenizer

tok = load_tokenizer()
VLLM_DEFAULTS = default_techniques_on()   # what vLLM 0.32 runs with no flags
SLOS = {"ttft_p95_ms": 2000, "tpot_p95_ms": 250}   # CPU-scale SLOs (the §5 SLOs are 500 / 50 ms on H100)
SLO_CPU = SLO(ttft_ms=SLOS["ttft_p95_ms"], tpot_ms=SLOS["tpot_p95_ms"])
print("techniques on by default:", VLLM_DEFAULTS)
print("CPU-scale SLOs:", SLOS)
""")
code(r"""
_ = gpu_banner()
""")
md(r"""
## Branch C — memory: a KV budget too small for the load

On a GPU, "out of memory" (显存不够, OOM) often means the engine does not start, or dies. Once it
runs, vLLM does not crash when its **KV cache** (KV 缓存) is full: it keeps requests waiting and,
when a running request needs one more block, **preempts** another one (抢占: frees its blocks and
recomputes it later). Both show on `/metrics` as `vllm:num_requests_waiting` and
`vllm:num_preemptions_total`, and in the latencies.

The load: 12 requests at once, each 100 prompt tokens + 60 output tokens. The CPU engine stores
KV in blocks of 128 tokens, so each request starts in one block and needs a second one after
28 output tokens. The baseline budget is the smallest one vLLM accepts for `max_model_len` 2048:
16 usable blocks plus the null block vLLM keeps. The memory calculator (chapter 05,
`inferopt.memory`) tells what that holds:
""")
code(r"""
LOAD = {"concurrency": 12, "input_tokens": 100, "output_tokens": 60}
small_gib = X.min_kv_gib(2048)
small = cpu_engine_prediction(kv_cache_gib=small_gib, max_model_len=2048)
fix = X.kv_fix_gib(max_model_len=2048, **LOAD)
print(f"baseline budget {small_gib:.4f} GiB = {small.num_blocks} blocks x {small.bytes_per_block:,} B "
      f"({small.block_size}-token blocks, {small.kv_bytes_per_token:,} B per token in float32)")
print(f"the load needs {LOAD['concurrency']} x {fix['blocks_per_request']} = {fix['blocks_needed']} blocks; "
      f"the baseline has {small.num_blocks - X.NULL_BLOCKS} usable")
print(f"calculator's fix: {fix['blocks_needed']} x 1.25 headroom + 1 null block = {fix['blocks_with_headroom']} "
      f"blocks = {fix['kv_cache_gib']:.4f} GiB ({fix['predicted_kv_tokens']:,} tokens)")
""")
code(r"""
# NBVAL_IGNORE_OUTPUT
with VLLMServer(max_model_len=2048, kv_cache_gib=small_gib) as srv:
    c_before = X.kv_pressure_run(srv, tok, **LOAD, slo=SLO_CPU)
print(table([c_before["summary"]], ["concurrency", "completed", "ttft_p95_ms", "tpot_p95_ms", "e2e_p95_ms",
                                    "output_throughput_tok_s"]))
print("preemptions:", c_before["counters"]["vllm:num_preemptions_total"],
      " peak waiting:", c_before["peak"].get("vllm:num_requests_waiting"),
      " peak KV use:", c_before["peak"].get("vllm:kv_cache_usage_perc"))
c_diag = diagnose(X.decision_inputs(c_before["summary"], counters=c_before["counters"], peak=c_before["peak"]),
                  SLOS, {"prompt_tokens": 100, "output_tokens": 60, "concurrency": 12, "gpu_type": "CPU",
                         "model_weights_gib": 0.5, "gpu_memory_gib": 16}, VLLM_DEFAULTS)
print(X.describe(c_diag))
assert c_before["counters"]["vllm:num_preemptions_total"] > 0 or c_before["peak"]["vllm:num_requests_waiting"] > 0
assert c_diag.branch == "C"
""")
md(r"""
The decision engine takes branch C and, since paged attention is already on, recommends KV-cache
quantization (`--kv-cache-dtype fp8`): half the bytes per token, twice the blocks. On a CPU that
flag needs AVX-512 or AMX — without them vLLM's CPU backend refuses to start ("FP8 KV cache on
CPU requires x86 with AVX-512 or AMX"), a live case of "FP8 needs the right hardware". The next
cell checks this machine. We take the calculator's other fix in either case — give the KV cache
the space the load needs — because it works on every machine and keeps the float32 KV cache that
the rest of this notebook compares against. If the cell says FP8 KV is possible here, try the
engine's own recommendation as an exercise: the baseline budget plus
`extra_args=["--kv-cache-dtype", "fp8"]`, and `X.kv_pressure_run` again.
""")
code(r"""
# NBVAL_IGNORE_OUTPUT
flags = set(open("/proc/cpuinfo").read().split())
fp8_ok = "avx512f" in flags or "amx_tile" in flags
print("AVX-512:", "avx512f" in flags, " AMX:", "amx_tile" in flags, " ->",
      "FP8 KV possible" if fp8_ok else "FP8 KV refused on this CPU: use more KV space")
assert c_diag.recommendations[0]["id"] == "kv_cache_quant"
""")
md(r"""
The one change: `--kv-cache-memory-bytes` from the baseline to the calculator's budget. This
engine is also the **baseline engine** for branches B, D and A below (vLLM's defaults with this
KV budget), so it stays up.
""")
code(r"""
# NBVAL_IGNORE_OUTPUT
base = VLLMServer(max_model_len=2048, kv_cache_gib=fix["kv_cache_gib"]).start()
print("KV cache tokens (engine log):", base.kv_cache_tokens, " calculator:", fix["predicted_kv_tokens"])
c_after = X.kv_pressure_run(base, tok, **LOAD, slo=SLO_CPU)
print(table([c_before["summary"], c_after["summary"]], ["concurrency", "ttft_p95_ms", "tpot_p95_ms", "e2e_p95_ms",
                                                       "output_throughput_tok_s"]))
r_e2e = X.ratio(c_before["summary"]["e2e_p95_ms"], c_after["summary"]["e2e_p95_ms"])
print(f"preemptions {c_before['counters']['vllm:num_preemptions_total']:.0f} -> "
      f"{c_after['counters']['vllm:num_preemptions_total']:.0f}; E2E P95 after/before = {r_e2e:.2f}")
print(X.describe(diagnose(X.decision_inputs(c_after["summary"], counters=c_after["counters"], peak=c_after["peak"]),
                          SLOS, {"prompt_tokens": 100, "output_tokens": 60, "concurrency": 12, "gpu_type": "CPU"},
                          VLLM_DEFAULTS)))
assert base.kv_cache_tokens == fix["predicted_kv_tokens"]
assert c_after["counters"]["vllm:num_preemptions_total"] == 0
assert r_e2e < 0.9
""")
md(r"""
The fix removed the preemptions, and the requests that used to wait or be recomputed finish
sooner. What remains failing is a *different* problem — the next diagnosis names it — which is
exactly why §4 says: fix, re-measure, re-diagnose.

## Branch B — TPOT and throughput: continuous batching, live

Continuous batching (连续批处理) is on in every vLLM: each engine step decodes one token for every
running request. More requests in flight share each step, so throughput rises — and each step
gets longer, so every request's TPOT rises too. A sweep over concurrency shows both, and finds
the largest concurrency that still meets a TPOT SLO (120 ms P95 here, a stream that reads
faster than a person).
""")
code(r"""
# NBVAL_IGNORE_OUTPUT
SLO_B = SLO(ttft_ms=SLOS["ttft_p95_ms"], tpot_ms=120)   # a tighter TPOT SLO for an interactive stream
sweep = X.concurrency_sweep(base, tok, concurrencies=[1, 2, 4, 8], input_tokens=100, output_tokens=32, slo=SLO_B)
print(table(sweep, ["concurrency", "ttft_p95_ms", "tpot_p50_ms", "tpot_p95_ms", "output_throughput_tok_s", "meets_slo",
                    "wall_s"]))
best = max_level_meeting(sweep, SLO_B)
thr = {s["concurrency"]: s["output_throughput_tok_s"] for s in sweep}
tpot = {s["concurrency"]: s["tpot_p50_ms"] for s in sweep}
print(f"concurrency 8 vs 1: throughput x{thr[8] / thr[1]:.2f}, median TPOT x{tpot[8] / tpot[1]:.2f}; "
      f"largest concurrency meeting the SLOs: {best}; sweep wall time {sum(s['wall_s'] for s in sweep):.0f} s")
assert thr[8] > 2 * thr[1] and tpot[8] > 1.1 * tpot[1]
""")
code(r"""
# NBVAL_IGNORE_OUTPUT
plots.latency_vs_concurrency(sweep, SLO_B, title="Continuous batching: TTFT/TPOT vs concurrency").show()
plots.pareto(sweep, latency="tpot_p95_ms", slo_ms=SLO_B.tpot_ms).show()
assert [s["concurrency"] for s in sweep] == [1, 2, 4, 8]
""")
md(r"""
### Speculative decoding at low concurrency — and pitfall 3.2

At concurrency 1 each decode step produces one token for one request: the engine is mostly idle
between steps' worth of work. Say the service needs 20 output tokens/s from one stream (a code
assistant that must keep up with the reader). The decision engine sees a small batch and
recommends speculative decoding (投机解码). vLLM's **n-gram** method needs no draft model: it
proposes the tokens that followed the same n-gram earlier in the prompt — ideal for code that
repeats itself. We measure code-like prompts at concurrency 1 and 8 on the baseline engine now,
and on an engine with the recommended flag later.
""")
code(r"""
# NBVAL_IGNORE_OUTPUT
spec_before = {c: X.spec_run(base, tok, concurrency=c) for c in (1, 8)}
print(table([r["summary"] for r in spec_before.values()], ["concurrency", "tpot_p50_ms", "output_throughput_tok_s"]))
b_diag = diagnose(X.decision_inputs(spec_before[1]["summary"]), {**SLOS, "throughput_tok_s": 20},
                  {"prompt_tokens": 150, "output_tokens": 64, "concurrency": 1, "gpu_type": "CPU"}, VLLM_DEFAULTS)
print(X.describe(b_diag))
assert b_diag.branch == "B" and b_diag.recommendations[0]["id"] == "speculative_decoding"
SPEC_FLAGS = b_diag.recommendations[0]["flags_add"]
""")
md(r"""
## Branch D, baseline — a long prompt arrives while others decode

Four chat streams are decoding when a 1,500-token document arrives. With vLLM's CPU default
token budget per step (`--max-num-batched-tokens 2048`), the whole prefill fits in one step: the
four streams get no token until it is done. Their P99 *gap between tokens* (ITL, token 间隔) shows
the stall; their TPOT (an average over the request) hides most of it. Every prompt is fresh
random text, so the prefix cache cannot help either run (the trap of reusing a prompt).
""")
code(r"""
# NBVAL_IGNORE_OUTPUT
d_before = X.prefill_interference_run(base, tok)
print(table([d_before["decode"]], ["completed", "itl_p50_ms", "itl_p99_ms", "tpot_p95_ms", "tpot_p99_ms"]),
      f"\nlong prompt TTFT {d_before['long_ttft_ms']:.0f} ms")
assert d_before["decode"]["itl_p99_ms"] > 3 * d_before["decode"]["itl_p50_ms"]
""")
md(r"""
## Branch A, "after" — the customer-service workload on the default engine

Branch A's experiment compares prefix caching (前缀缓存) off and on. vLLM 0.32 has it **on** by
default, so the baseline engine *is* the "after" configuration; while it runs we measure the
workload on it, and the "before" engine (the same flags plus `--no-enable-prefix-caching`) comes
next. The workload: a 600-token system prompt shared by every conversation plus a 30-token user
question, one request at a time.
""")
code(r"""
# NBVAL_IGNORE_OUTPUT
a_after = X.shared_prefix_run(base, tok)
print(f"first request (cold) TTFT {a_after['cold_ttft_ms']:.0f} ms, later requests (warm) median "
      f"{a_after['warm_ttft_ms']:.0f} ms; prefix-cache hits {a_after['counters']['vllm:prefix_cache_hits_total']:.0f} "
      f"of {a_after['counters']['vllm:prefix_cache_queries_total']:.0f} queried tokens")
assert a_after["counters"]["vllm:prefix_cache_hits_total"] > 0
base.stop()
""")
md(r"""
## Branch A — TTFT: prefix caching off → on

The "before" engine: the baseline plus `--no-enable-prefix-caching`. Every request prefills the
whole 630-token prompt again.
""")
code(r"""
# NBVAL_IGNORE_OUTPUT
with VLLMServer(max_model_len=2048, kv_cache_gib=fix["kv_cache_gib"], extra_args=["--no-enable-prefix-caching"]) as srv:
    a_before = X.shared_prefix_run(srv, tok)
print(f"prefix caching off: TTFT median {a_before['warm_ttft_ms']:.0f} ms (first {a_before['cold_ttft_ms']:.0f} ms)")
a_diag = diagnose(X.decision_inputs({**a_before["summary"], "ttft_p95_ms": a_before["warm_ttft_ms"]}),
                  {"ttft_p95_ms": 1000, "tpot_p95_ms": SLOS["tpot_p95_ms"]},
                  {"prompt_tokens": 630, "output_tokens": 8, "shared_prefix_frac": 1.0, "concurrency": 1, "gpu_type": "CPU"},
                  [t for t in VLLM_DEFAULTS if t != "prefix_cache"])
print(X.describe(a_diag))
r_a = X.ratio(a_before["warm_ttft_ms"], a_after["warm_ttft_ms"])
print(f"TTFT with prefix caching / without = {r_a:.2f} "
      f"({a_before['warm_ttft_ms']:.0f} ms -> {a_after['warm_ttft_ms']:.0f} ms)")
assert a_diag.branch == "A" and a_diag.recommendations[0]["id"] == "prefix_cache"
assert a_after["warm_ttft_ms"] < a_before["warm_ttft_ms"] / 2
""")
md(r"""
The decision engine's TTFT SLO here is 1 s (a chat user sees the first words within a second).
The recommended change is exactly the flag that separates the two engines, and the TTFT of every
conversation after the first drops by the share of the prompt that no longer needs a prefill.

## Branch D — the tail: split the long prefill

The decision engine gets the decode streams' numbers. For the tail we give it the P99 of the
gaps between tokens — a stall is one long gap, and averaging it into TPOT would hide it.
""")
code(r"""
# NBVAL_IGNORE_OUTPUT
dec = d_before["decode"]
d_metrics = X.decision_inputs({**dec, "tpot_p99_ms": dec["itl_p99_ms"]})
d_diag = diagnose(d_metrics, {**SLOS, "tpot_p99_ms": 1000},
                  {"prompt_tokens": 1500, "output_tokens": 64, "concurrency": 5, "gpu_type": "CPU"},
                  [t for t in VLLM_DEFAULTS if t != "chunked_prefill"])
print(X.describe(d_diag))
assert d_diag.branch == "D" and d_diag.recommendations[0]["id"] == "chunked_prefill"
""")
md(r"""
Why we told the engine chunked prefill is *off*: it is nominally on in vLLM 0.32, but chunking
only happens when a prompt is longer than the token budget of one step. With the CPU default
budget of 2048, a 1,500-token prompt is never split — for this workload chunked prefill is not in
effect. The flag the engine proposes keeps that budget, so we size it to the workload instead:
`--max-num-batched-tokens 256` splits the prefill into six chunks, and the decode streams get a
token between chunks. One flag changes.
""")
code(r"""
# NBVAL_IGNORE_OUTPUT
budget = 256
with VLLMServer(max_model_len=2048, kv_cache_gib=fix["kv_cache_gib"],
                extra_args=["--max-num-batched-tokens", str(budget)]) as srv:
    d_after = X.prefill_interference_run(srv, tok)
rows = [{"config": "budget 2048", **d_before["decode"], "long_ttft_ms": d_before["long_ttft_ms"]},
        {"config": f"budget {budget}", **d_after["decode"], "long_ttft_ms": d_after["long_ttft_ms"]}]
print(table(rows, ["config", "itl_p50_ms", "itl_p99_ms", "tpot_p99_ms", "long_ttft_ms"]))
r_d = X.ratio(d_before["decode"]["itl_p99_ms"], d_after["decode"]["itl_p99_ms"])
print(f"decode ITL P99 after/before = {r_d:.2f}; TPOT P99 after/before = "
      f"{X.ratio(d_before['decode']['tpot_p99_ms'], d_after['decode']['tpot_p99_ms']):.2f}; "
      f"the long prompt's own TTFT after/before = {X.ratio(d_before['long_ttft_ms'], d_after['long_ttft_ms']):.2f}")
assert r_d < 0.6
""")
md(r"""
The price is visible too: the long prompt's own TTFT does not improve (more, smaller steps),
which is the cost column of chunked prefill in the technique map.

## Branch B — speculative decoding, and pitfall 3.2

The engine with the flag the decision engine recommended (`--speculative-config` with the n-gram
method, 4 draft tokens), the same code prompts, concurrency 1 and 8.
""")
code(r"""
# NBVAL_IGNORE_OUTPUT
print("flags:", " ".join(SPEC_FLAGS))
with VLLMServer(max_model_len=2048, kv_cache_gib=fix["kv_cache_gib"], extra_args=SPEC_FLAGS) as srv:
    spec_after = {c: X.spec_run(srv, tok, concurrency=c) for c in (1, 8)}
gain = {}
for c in (1, 8):
    b, a = spec_before[c]["summary"], spec_after[c]["summary"]
    gain[c] = b["tpot_p50_ms"] / a["tpot_p50_ms"]
    print(f"concurrency {c}: TPOT {b['tpot_p50_ms']:.0f} -> {a['tpot_p50_ms']:.0f} ms (speed-up x{gain[c]:.2f}), "
          f"draft acceptance {spec_after[c]['acceptance_rate']:.0%}")
assert gain[1] > 1.5
assert gain[8] < gain[1]
""")
md(r"""
At concurrency 1 speculative decoding turns idle step time into accepted tokens. At concurrency 8
the same steps are already shared by eight requests, so there is less idle capacity to fill and
verifying the draft tokens (five positions per request per step) competes with real work: the
gain shrinks. That is pitfall 3.2
measured — and why the plan of chapter 05 (high concurrency) leaves speculative decoding off.

## What the experiments showed

| branch | symptom | one change | effect (ratio printed above) |
|---|---|---|---|
| C | KV space too small: waiting and preemptions | `--kv-cache-memory-bytes` from the calculator | preemptions → 0, E2E P95 down |
| A | TTFT high with a shared system prompt | prefix caching off → on | TTFT down by more than half |
| B | throughput vs TPOT | concurrency (continuous batching) | throughput up, TPOT up; SLO frontier found |
| B | slow single stream | n-gram speculative decoding | TPOT down at concurrency 1, less at 8 (pitfall 3.2) |
| D | decode stalls behind a long prefill | `--max-num-batched-tokens` 2048 → 256 | decode ITL P99 down |
""")
build(C, str(__import__("pathlib").Path(__file__).resolve().parents[2]) + "/chapters/02b-decision-tree-live.ipynb")
