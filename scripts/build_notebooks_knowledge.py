"""Write the source of chapters 01-04, 07, 08 and solutions/lab1 (cells only, no outputs).

Run it, then execute the notebooks for real to store outputs:
    .venv/bin/python scripts/build_notebooks_knowledge.py [NAME ...]
    .venv/bin/python -m inferopt.nbtools run chapters/01-technique-map.ipynb ...
Other helpers append live-experiment cells to chapters 02 and 04 after this; rebuilding from
here would drop them, so pass only the notebook names you mean to rewrite.
"""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from nbbuild import ROOT, code, md, write  # noqa: F401  (shared cell helpers)


# ----------------------------------------------------------------------------------------- 01
def chapter01():
    return [
        md("""
        # 1. The technique map: thirteen optimizations at a glance

        Before choosing anything, you need the whole menu in one view. This chapter lays out the
        thirteen inference optimizations (推理优化技术) the course has covered, and for each one:
        what problem it solves, what it costs, which module teaches it, which vLLM 0.32 flags turn
        it on, and what hardware it needs.

        The table is **data**, not prose: it lives in `assets/techniques.yaml`, an instructor can
        edit it without touching code, and a test checks every flag in it with vLLM's own argument
        parser. The decision tree of chapter 2 and the pitfalls of chapter 3 refer to techniques by
        the short ids you see here (`prefix_cache`, `speculative_decoding`, ...).
        """),
        code("""
        from inferopt import knowledge

        techs = knowledge.techniques()
        print(f"{len(techs)} techniques\\n")
        print(f"{'id':22s} {'cost':7s} {'covered in':22s} treats")
        for t in techs:
            print(f"{t.id:22s} {t.cost_level:7s} {t.module:22s} {', '.join(t.symptoms)}")
        on_by_default = [t.id for t in techs if t.default_on]
        print(f"\\non by default in vLLM 0.32 ({len(on_by_default)}): {', '.join(on_by_default)}")
        """),
        md("""
        ## The full table

        Each row answers four questions. *Solves*: the symptom it was invented for. *Costs*: the
        price you pay, which is never zero — implementation complexity, accuracy, memory, or
        communication. *Flags*: how to ask vLLM 0.32 for it. *Needs*: hardware it depends on.

        Note the "on by default" entries. In vLLM 0.32, PagedAttention (分页注意力) and continuous
        batching (连续批处理) are simply how the engine works; prefix caching (前缀缓存) and chunked
        prefill (分块预填充) are switched on unless you pass `--no-enable-prefix-caching` /
        `--no-enable-chunked-prefill`; FlashAttention is picked automatically on supported NVIDIA
        GPUs; torch.compile and CUDA graphs run unless you pass `--enforce-eager`. For these, the
        decision is rarely "turn it on" and more often "do not turn it off by accident" or "tune it".
        """),
        code("""
        from IPython.display import HTML
        from inferopt.widgets.technique_table import technique_rows, technique_table_html

        HTML(technique_table_html(technique_rows()))
        """),
        md("""
        ## Filter by symptom and cost

        The widget below filters the same table. Pick a symptom — time to first token (TTFT,
        首 token 延迟) too high, time per output token (TPOT, 每 token 延迟) too high, out of memory
        (OOM, 显存不够), tail latency (尾延迟), low GPU utilization — and the highest cost you are
        willing to pay. (The stored output shows the widget's summary line; in JupyterLab you get
        the live controls.)
        """),
        code("""
        from inferopt.widgets.technique_table import TechniqueTable

        table = TechniqueTable(symptom="oom", max_cost="medium")
        table
        """),
        md("""
        The same filter as a function, for scripts. Which cheap techniques treat each symptom, and
        how many techniques of any cost treat it:
        """),
        code("""
        names = knowledge.load("techniques")["symptom_names"]
        for symptom in names:
            cheap = [r["id"] for r in technique_rows(symptom, "low")]
            every = technique_rows(symptom)
            print(f"{symptom:13s} {len(every):2d} techniques; cheap ones: {', '.join(cheap) or '-'}")
        """),
        md("""
        ## Hardware needs: FP8 and Marlin

        Two rows depend on the GPU generation. FP8 (8-bit floating point for weights and
        activations) needs FP8 tensor cores, which arrived with Ada (compute capability 8.9) and
        Hopper (9.0): H100-class hardware. The fast INT4 path needs the Marlin kernels, which need
        Ampere (8.0) or newer. The compute capability of each GPU in `assets/gpus.yaml` (the
        course's one GPU table) decides it:
        """),
        code("""
        from inferopt import gpu_catalog
        needs = knowledge.load("techniques")["hardware_needs"]
        fp8_cc = needs["fp8"]["min_compute_capability"]
        marlin_cc = needs["marlin"]["min_compute_capability"]
        print(f"FP8 needs compute capability >= {fp8_cc}, Marlin >= {marlin_cc}\\n")
        for name in gpu_catalog.class_names():
            g = knowledge.gpu_info(name)
            if g["arch"] == "cpu":
                continue
            cc = g["compute_capability"]
            print(f"{name:9s} {g['arch']:9s} cc {cc:4.1f}   FP8: {'yes' if cc >= fp8_cc else 'no ':3s}"
                  f"   Marlin INT4: {'yes' if cc >= marlin_cc else 'no'}")
        """),
        md("""
        The CPU build of vLLM has its own version of this rule: on a CPU without AVX-512 or AMX,
        `--kv-cache-dtype fp8` refuses to start ("FP8 KV cache on CPU requires x86 with AVX-512 or
        AMX"). The same lesson at a smaller scale: a quantized format is only a speed-up where the
        hardware has instructions for it.

        ## Every flag is a real vLLM 0.32 flag

        Flag names drift between vLLM releases (`--enable-prefix-caching` became the default, metric
        names changed, `--optimization-level` arrived). So we do not trust the table: the next cell
        hands every flag set in it to the argument parser of the vLLM installed here — the same
        parser `vllm serve` uses — and checks the two values that parser leaves unchecked
        (quantization method, attention backend) against vLLM's own registries. Importing vLLM
        takes a few seconds.
        """),
        code("""
        import contextlib, io, shlex
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            # vLLM logs machine-specific lines while it imports (e.g. about Triton on a CPU); keep them out
            from vllm.entrypoints.launchers.cli_args import make_arg_parser
            from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
            from vllm.utils.argparse_utils import FlexibleArgumentParser
            from vllm.v1.attention.backends.registry import AttentionBackendEnum

        parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
        checked = 0
        for t in techs:
            for flags in (t.enable_flags, t.disable_flags):
                if not flags:
                    continue
                ns = parser.parse_args(["--model", "m", *flags])   # exits on an unknown flag or bad choice
                if "--quantization" in flags:
                    assert ns.quantization in QUANTIZATION_METHODS, ns.quantization
                if "--attention-backend" in flags:
                    assert ns.attention_backend in AttentionBackendEnum.__members__
                checked += 1
        print(f"{checked} flag sets from the table parsed by vLLM's own parser")
        print("prefix caching off:", shlex.join(knowledge.technique_index()["prefix_cache"].disable_flags))
        """),
        md("""
        ## What each technique spends

        Costs come in a few currencies. The picture marks, for each technique, which of them it
        spends: compute (计算), communication (通信), memory (显存), accuracy (精度), or complexity.
        Chapter 7 turns this around and shows what each optimization *buys* with what it gives up.
        """),
        code("""
        from inferopt.widgets.tradeoff_plot import technique_cost_figure

        technique_cost_figure().show()
        """),
        md("""
        ## Takeaways

        - Thirteen techniques, four currencies of cost. None is free; the question is always which
          price your workload can afford.
        - In vLLM 0.32 six of them are already on by default. Know which, so that a benchmark
          compares what you think it compares.
        - FP8 needs H100-class GPUs; fast INT4 needs Marlin (Ampere or newer).

        Next, chapter 2 turns the table into a decision procedure: measure, find the worst metric,
        follow its branch.
        """),
    ]


# ----------------------------------------------------------------------------------------- 02
def chapter02():
    return [
        md("""
        # 2. The symptom-driven decision tree

        Do not start from a technique you like. Start from a measurement. The decision tree
        (选型决策树) of this chapter has one rule at the root: **run a baseline, find the worst
        metric, and enter the branch of that metric.** Four branches follow: A (TTFT too high),
        B (TPOT too high), C (out of memory), D (P95/P99 tail out of control). Each branch asks a
        few questions about the workload and ends in techniques.

        The tree is data (`assets/decision_tree.yaml`) and the engine that walks it,
        `inferopt.decision.diagnose`, is a pure function. It is what the widget at the end of this
        chapter, the lab, and the command line `python -m inferopt diagnose` all use.
        """),
        md("""
        ## Step 1: the baseline (基线)

        Load the server the way production will (realistic prompt and output lengths, realistic
        concurrency) and record five numbers. A load generator such as NVIDIA's aiperf (the
        successor of genai-perf) reports them:
        """),
        code("""
        from inferopt import knowledge

        tree = knowledge.load("decision_tree")
        for m in tree["baseline"]["metrics"]:
            print(f"- {m['name']:45s} -> {', '.join(m['fields'])}")
        print("\\nexample:", tree["baseline"]["command"])
        """),
        md("""
        The field names on the right are what the engine reads. Latencies are in milliseconds;
        utilization and memory are fractions 0–1. Tools disagree on names, so map them once:

        | our field | vLLM metric | aiperf / genai-perf |
        |---|---|---|
        | `ttft_p95_ms` | `vllm:time_to_first_token_seconds` | `time_to_first_token` |
        | `tpot_p95_ms` | `vllm:request_time_per_output_token_seconds` | `inter_token_latency` |
        | `throughput_tok_s` | (generation tokens counter) | `output_token_throughput` |

        aiperf's `inter_token_latency` is (end-to-end − TTFT) / (output tokens − 1) per request,
        which is what vLLM calls TPOT; vLLM's own "ITL" is the raw gap between streamed chunks.
        `inferopt.baseline_import` reads an aiperf/genai-perf `profile_export_*.json` (shape
        `{metric: {unit, avg, p50, p95, p99, ...}}`) into these fields:
        """),
        code("""
        from inferopt.baseline_import import from_profile_export

        export = {   # the shape aiperf writes to profile_export_aiperf.json (values made up for the example)
            "time_to_first_token": {"unit": "ms", "avg": 610.0, "p50": 540.0, "p95": 1820.0, "p99": 2400.0},
            "inter_token_latency": {"unit": "ms", "avg": 24.0, "p50": 23.0, "p95": 31.0, "p99": 44.0},
            "output_token_throughput": {"unit": "tokens/sec", "avg": 2150.0},
            "request_throughput": {"unit": "requests/sec", "avg": 14.3},
        }
        baseline = from_profile_export(export)
        for k, v in sorted(baseline.items()):
            print(f"{k:18s} {v}")
        """),
        md("""
        ## Which metric is worst, and which branch first

        "Worst" is relative to the target: the engine divides each measured value by its service
        level objective (SLO, 服务等级目标) and picks the largest ratio. For throughput, where more
        is better, the ratio is target / measured. A P99 with no P99 SLO counts as a tail problem
        when it is more than `tail_ratio` times the P95.

        When several metrics fail, the branch to enter first is not necessarily the worst one: the
        order of chapter 4 decides (OOM → TTFT → TPOT/throughput → tail). The diagnosis reports both.
        """),
        code("""
        from inferopt.decision import diagnose, format_text

        slos = {"ttft_p95_ms": 500, "tpot_p95_ms": 50}
        d = diagnose({"ttft_p95_ms": 650, "tpot_p95_ms": 140}, slos,
                     {"prompt_tokens": 3000, "gpu_type": "H100"},
                     techniques_on=["paged_attention", "continuous_batching", "flash_attention", "prefix_cache"])
        for f in d.failing:
            print(f"{f['metric']:12s} measured {f['value']:6.0f} ms, SLO {f['slo']:4.0f} ms, ratio {f['ratio']:.2f} -> branch {f['branch']}")
        print(f"\\nworst metric: {d.worst_metric}; enter branch {d.branch} first (order {d.order})")
        """),
        md("""
        TPOT is 2.8× its target and TTFT only 1.3×, yet the engine sends you to branch A first:
        a user who waits too long for the first token leaves before the token speed matters, and
        a prefill fix can change the TPOT picture too. Measure again after the fix, and B may
        still be waiting.

        ## The four branches

        The tree, read straight from the data file:
        """),
        code("""
        order = [s["branch"] for s in knowledge.load("optimization_order")["steps"]]
        for b in sorted(tree["branches"], key=lambda b: order.index(b["id"])):
            print(b["title"])
            for c in b["conditions"]:
                techs = [t["id"] for t in c["techniques"]] + [a["id"] for a in c["actions"]]
                print(f"  {c['id']} {c['title']}\\n      -> {', '.join(techs)}")
        """),
        md("""
        **[A] TTFT too high.** The first token waits for the prefill (预填充) of the whole prompt.
        (A1) With very long prompts, chunked prefill splits the prefill into pieces that share steps
        with decoding, and FP8 on H100-class GPUs makes the prefill's matrix multiplications
        faster. (A2) If many requests begin with the same text — a system prompt, few-shot
        examples — the prefix cache keeps their KV blocks and skips recomputing them (SGLang calls
        its version RadixAttention). (A3) If the GPU sits idle while users wait, the bottleneck is on
        the CPU side (tokenization, scheduling, Python): take an Nsight Systems trace before
        changing any engine flag.

        **[B] TPOT too high.** Each decode step reads all weights and the KV cache to produce one
        token per request. (B1) With long contexts, reading the KV cache dominates (memory bound):
        fused attention kernels (FlashAttention, FlashInfer) and a quantized KV cache cut the bytes
        moved. (B2) At small batch sizes, decoding is serial by nature: speculative decoding (投机
        解码) drafts several tokens cheaply and verifies them in one pass. (B3) If the GPU is
        under-fed because too few requests run at once, raise the concurrency cap of continuous
        batching (`--max-num-seqs`).

        **[C] OOM.** (C1) If the weights fit but the server still runs out of memory, the KV cache
        is the big consumer: PagedAttention stops fragmentation, and KV quantization halves the
        cache. (C2) If the weights alone do not fit: INT4 weight-only quantization (AWQ with the
        Marlin kernels), tensor parallelism (张量并行) across GPUs, or FP8 on H100-class GPUs.

        **[D] Tail latency (P95/P99).** (D1) If long prefills land while others decode, every
        running stream stalls: chunked prefill is the light fix, prefill/decode disaggregation
        (PD 解耦, DistServe/Splitwise) the heavy one for large clusters. (D2) If queues build up and
        requests get preempted under strict SLOs, the answer is scheduling: an SLO-aware scheduler
        (TaiChi and similar) that orders work by deadline.

        ## One diagnosis per branch

        The same engine on four small cases. Each line shows the path taken and what it suggests;
        `techniques_on` lists what is already running (here: vLLM's defaults minus what the case
        says was turned off).
        """),
        code("""
        cases = {
            "A: shared system prompt": dict(
                metrics={"ttft_p95_ms": 1800, "tpot_p95_ms": 30},
                workload={"prompt_tokens": 1300, "shared_prefix_frac": 0.7, "concurrency": 32},
                techniques_on=["paged_attention", "continuous_batching", "flash_attention", "chunked_prefill"]),
            "B: one user, slow tokens": dict(
                metrics={"ttft_p95_ms": 200, "tpot_p95_ms": 95},
                workload={"prompt_tokens": 600, "output_tokens": 300, "concurrency": 1},
                techniques_on=["paged_attention", "continuous_batching", "flash_attention", "prefix_cache", "chunked_prefill"]),
            "C: 70B on one GPU": dict(
                metrics={"oom": True},
                workload={"model_weights_gib": 130.4, "gpu_type": "H100", "num_gpus": 8},
                techniques_on=["paged_attention", "continuous_batching", "flash_attention"]),
            "D: long documents mid-decode": dict(
                metrics={"ttft_p95_ms": 300, "tpot_p95_ms": 40, "tpot_p99_ms": 400},
                workload={"prompt_tokens": 6000, "concurrency": 16, "num_gpus": 2},
                techniques_on=["paged_attention", "continuous_batching", "flash_attention", "prefix_cache", "chunked_prefill"]),
        }
        diagnoses = {}
        for name, case in cases.items():
            d = diagnose(slos={**slos, "tpot_p99_ms": 100}, **case)
            diagnoses[name] = d
            fixes = d.techniques + [a["id"] for a in d.actions]
            print(f"{name:30s} path {' -> '.join(d.path):20s} try: {', '.join(fixes)}")
            print(f"{'':30s} next change: {' '.join(d.flags)}")
        """),
        md("""
        Case D shows a subtlety: chunked prefill is already on (it is vLLM 0.32's default), so the
        engine does not suggest it again. It suggests tuning it — a smaller per-step token budget —
        and explains that PD disaggregation is not worth it on a two-GPU node:
        """),
        code("""
        d = diagnoses["D: long documents mid-decode"]
        print("already on:", [a["id"] for a in d.already_on])
        print("skipped:   ", [(s["id"], s["reason"]) for s in d.skipped])
        print("next:      ", d.next_step)
        """),
        md("""
        The path of case A through the tree, drawn from the same data (orange = the path taken,
        bold = what it suggests):
        """),
        code("""
        from inferopt.widgets.decision_widget import tree_figure

        tree_figure(diagnoses["A: shared system prompt"]).show()
        """),
        md("""
        ## Conflicts and the next step

        A diagnosis also checks the techniques in force — those already on plus the ones it
        recommends — against the combination pitfalls of chapter 3, and it always ends with the same
        instruction: change one thing, then measure again. Here a small-batch TPOT problem meets a
        server that already runs INT4 weights with a draft model:
        """),
        code("""
        d = diagnose({"ttft_p95_ms": 200, "tpot_p95_ms": 95}, slos,
                     {"concurrency": 2, "draft_model": "my-org/draft-160m", "gpu_type": "A100"},
                     techniques_on=["paged_attention", "continuous_batching", "int4_awq_marlin"])
        print(format_text(d))
        """),
        md("""
        ## The same engine from the command line

        Scripts and instructors can call it without a notebook. `--json` prints the diagnosis with
        at least `branch`, `worst_metric`, `techniques`, `conflicts` and `flags`; `--baseline` reads
        an aiperf/genai-perf export or the course's benchmark results, `--input` a YAML/JSON file.
        """),
        code("""
        import json, subprocess, sys

        cmd = [sys.executable, "-m", "inferopt", "diagnose",
               "--ttft-p95-ms", "1800", "--tpot-p95-ms", "30",
               "--slo-ttft-p95-ms", "500", "--slo-tpot-p95-ms", "50",
               "--shared-prefix-frac", "0.7", "--prompt-tokens", "1300",
               "--on", "paged_attention,continuous_batching,chunked_prefill", "--json"]
        out = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
        print({k: out[k] for k in ("branch", "worst_metric", "techniques", "conflicts", "flags")})
        """),
        md("""
        ## Try it: the decision-tree widget

        Set the symptoms, the SLOs and the workload, tick what is already on, or load a benchmark
        result file; the tree picture, the recommendations with their reasons, the conflicts and the
        flag diff update as you type. Bad input (a percentage where a fraction is due, an SLO in
        seconds) shows a message inside the widget. A diagnosis takes a fraction of a millisecond,
        so the widget answers at once:
        """),
        code("""
        # NBVAL_IGNORE_OUTPUT
        from inferopt.decision import time_diagnosis

        timing = time_diagnosis(200)
        print(f"one diagnosis: median {timing['median_ms']:.3f} ms over {timing['calls']} calls")
        assert timing["median_ms"] < 5
        """),
        code("""
        from inferopt.widgets.decision_widget import DecisionWidget

        widget = DecisionWidget()
        widget
        """),
        md("""
        ## Takeaways

        - Measure first. Five numbers (TTFT, TPOT, throughput, memory, GPU utilization) decide where
          to look.
        - The worst metric is measured against its SLO; when several fail, fix them in the order of
          chapter 4.
        - Each branch asks *why* the metric is bad before it names a technique, and a technique that
          is already on gets tuned, not re-enabled.
        """),
    ]


# ----------------------------------------------------------------------------------------- 03
def chapter03():
    return [
        md("""
        # 3. Combination pitfalls: optimizations do not simply add up

        Each technique in chapter 1 was measured on its own. Stacked, some of them interfere: one
        removes the inefficiency another was exploiting, or two need the same resource. This
        chapter walks through the five common conflicts (技术组合的陷阱与冲突). Each is stored in
        `assets/pitfalls.yaml` as a rule the decision engine checks on every diagnosis, with the
        advice it prints.
        """),
        code("""
        from inferopt import knowledge
        from inferopt.decision import conflicts_for

        pitfalls = knowledge.load("pitfalls")["pitfalls"]
        for p in pitfalls:
            rule = " + ".join(p["all_of"]) + (f" + one of ({', '.join(p['any_of'])})" if p["any_of"] else "")
            when = " and ".join(f"{c['fact']} {c['op']} {c['value']}" for c in (p["when"] or {}).get("clauses", []))
            print(f"§{p['section']} {p['title']}\\n     fires on: {rule}{'  when ' + when if when else ''}  [{p['severity']}]")
        """),
        md("""
        ## 3.1 Speculative decoding + quantization

        Speculative decoding pays off only when the draft model guesses right often: the
        acceptance rate (接受率). Quantization hurts small models more than large ones, so a
        quantized *draft* can lose much of its acceptance rate, and every rejected draft token is
        wasted work. The advice: quantize the target, keep the draft in FP16/BF16. The rule needs a
        draft model; n-gram (prompt-lookup) drafting has no weights to quantize.
        """),
        code("""
        draft = {"draft_model": "my-org/draft-160m"}
        for on in (["speculative_decoding", "int4_awq_marlin"], ["speculative_decoding", "fp8"], ["speculative_decoding"]):
            print(f"{' + '.join(on):42s} with a draft model -> {[c['id'] for c in conflicts_for(on, draft)]}")
        print(f"{'speculative_decoding + fp8':42s} n-gram drafting   -> {[c['id'] for c in conflicts_for(['speculative_decoding', 'fp8'])]}")
        """),
        md("""
        How much acceptance matters follows from a short calculation. With `k` draft tokens per
        step and each accepted independently with probability α, one verification step yields on
        average (1 − α^(k+1)) / (1 − α) tokens (Leviathan et al., 2023). The course's n-gram run on
        the CPU engine (COURSE.md: a repetitive code prompt, concurrency 1, 4 draft tokens) accepted
        76 of 84 draft tokens and produced 96 tokens in 22 steps. The formula, fed that α:
        """),
        code("""
        def tokens_per_step(alpha: float, k: int) -> float:
            return (1 - alpha ** (k + 1)) / (1 - alpha)

        alpha_measured = 76 / 84
        print(f"alpha = {alpha_measured:.3f}: expected {tokens_per_step(alpha_measured, 4):.2f} tokens/step; "
              f"measured {96 / 22:.2f}")
        for alpha in (0.9, 0.7, 0.5, 0.3):
            print(f"alpha = {alpha:.1f}: {tokens_per_step(alpha, 4):.2f} tokens per verification step")
        """),
        md("""
        If quantizing the draft drops α from 0.9 to 0.5, each step yields fewer than 2 tokens
        instead of about 4: most of the gain is gone, while the draft and verification costs remain.

        ## 3.2 Speculative decoding + continuous batching

        Two reasons. First, different requests accept different numbers of draft tokens, which
        complicates the scheduler. Second, and decisive: speculation trades spare compute for fewer
        serial steps. At small batch sizes a decode step is memory bound — the GPU waits for
        weights to stream in, and checking `k+1` tokens costs about as much as checking one. At high
        concurrency the step is already compute bound, and verifying drafts costs real time. The
        advice: turn speculation on only for small batches, decided dynamically. The rule fires
        above `small_batch_max` requests in flight:
        """),
        code("""
        small = knowledge.load("decision_tree")["thresholds"]["small_batch_max"]
        for conc in (1, 4, small, small + 1, 64):
            fired = [c["id"] for c in conflicts_for(["speculative_decoding"], {"concurrency": conc})]
            print(f"concurrency {conc:3d}: {fired or 'no conflict'}")
        """),
        md("""
        A toy cost model makes the mechanism visible (a model, not a measurement: its constants are
        assumptions, stated in the cell). A decode step costs the larger of a memory time (stream the
        weights once) and a compute time (proportional to the tokens processed). With speculation
        each request processes k+1 tokens per step and gains (1 − α^(k+1))/(1 − α) tokens:
        """),
        code("""
        import plotly.graph_objects as go

        T_MEMORY = 1.0          # time to stream the weights once (one unit)
        T_TOKEN = 1 / 64        # compute time per token: compute-bound above 64 tokens per step (assumed ridge)
        K, ALPHA = 4, 0.8

        def step_time(tokens: int) -> float:
            return max(T_MEMORY, T_TOKEN * tokens)

        def speedup(batch: int) -> float:
            plain = batch / step_time(batch)                                   # tokens per unit time
            spec = batch * tokens_per_step(ALPHA, K) / step_time(batch * (K + 1))
            return spec / plain

        batches = [1, 2, 4, 8, 16, 32, 64, 128, 256]
        gains = [round(speedup(b), 2) for b in batches]
        print(dict(zip(batches, gains)))
        fig = go.Figure(go.Scatter(x=batches, y=gains, mode="lines+markers"))
        fig.add_hline(y=1, line_dash="dot")
        fig.update_layout(title=f"Toy model: speculative decoding speed-up vs batch size (k={K}, α={ALPHA})",
                          xaxis={"title": "requests in flight", "type": "log"}, yaxis={"title": "speed-up"},
                          height=360, width=720)
        fig.show()
        """),
        md("""
        In the model the gain is the full (1 − α^(k+1))/(1 − α) while the step stays memory bound,
        shrinks once batch × (k+1) crosses the ridge, and becomes a loss at large batches. Where the
        ridge lies depends on the GPU and the model; a live measurement on the course's CPU engine
        belongs next to this model, and the benchmark chapter measures it.

        ## 3.3 INT4 at small batch without Marlin

        INT4 weight-only quantization stores weights in 4 bits and dequantizes them on the fly. At
        small batch sizes the dequantization dominates; without a kernel that fuses it efficiently,
        an INT4 model decodes *slower* than the FP16 one. Marlin is that kernel (Ampere or newer).
        The rule fires for INT4 at small batch on a GPU without Marlin:
        """),
        code("""
        for gpu in ("T4", "V100", "A100", "H100"):
            fired = [c["id"] for c in conflicts_for(["int4_awq_marlin"], {"gpu_type": gpu, "concurrency": 1})]
            print(f"INT4 at concurrency 1 on {gpu:5s}: {fired or 'ok (Marlin available)'}")
        """),
        md("""
        ## 3.4 PagedAttention + speculative decoding

        Verification runs several candidate tokens per request at once, and rejected tokens must be
        rolled back. With a paged KV cache this means the page manager must allocate slots for
        tentative tokens, fork or copy pages, and free them again. vLLM does this; not every engine
        does it maturely. The rule is informational: check your engine before combining the two.
        """),
        code("""
        c = conflicts_for(["paged_attention", "speculative_decoding"])[0]
        print(f"[{c['severity']}] {c['title']}: {c['advice']}")
        """),
        md("""
        ## 3.5 Multi-LoRA + prefix cache

        The prefix cache reuses KV blocks for identical token prefixes. But a LoRA adapter changes
        the weights, so the same tokens give different keys and values under different adapters;
        their blocks cannot be shared, and the hit rate drops as traffic spreads across adapters.
        The fix is a per-LoRA prefix cache: sharing only within one adapter.

        vLLM already does this, and we can show it with vLLM's own code rather than take it on
        faith. The cache key of a block is a hash of its tokens, its parent block and "extra keys";
        for a LoRA request the extra keys include the adapter's name and path. The same 16 tokens,
        hashed by vLLM's function under different adapters:
        """),
        code("""
        import contextlib, io
        from types import SimpleNamespace
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            # vLLM logs machine-specific lines while it imports (e.g. about Triton on a CPU); keep them out
            from vllm.lora.request import LoRARequest
            from vllm.utils.hashing import sha256
            from vllm.v1.core import kv_cache_utils

        kv_cache_utils.init_none_hash(sha256)
        tokens = list(range(100, 116))     # one full 16-token block

        def block_hash(lora):
            extra = kv_cache_utils._gen_lora_extra_hash_keys(SimpleNamespace(lora_request=lora))
            return kv_cache_utils.hash_block_tokens(sha256, None, tokens, tuple(extra) or None)

        base = block_hash(None)
        sql_a = block_hash(LoRARequest("sql", 1, "/adapters/sql"))
        sql_b = block_hash(LoRARequest("sql", 1, "/adapters/sql"))
        chat = block_hash(LoRARequest("chat", 2, "/adapters/chat"))
        print("base model vs sql adapter share the block:", base == sql_a)
        print("sql adapter vs chat adapter share it:     ", sql_a == chat)
        print("two sql requests share it:                ", sql_a == sql_b)
        print([c["id"] for c in conflicts_for(["prefix_cache"], {"lora_adapters": 8})])
        """),
        md("""
        So with 8 adapters and traffic spread evenly, a shared system prompt is cached 8 times over
        (once per adapter) and each copy is hit by an eighth of the requests. Group traffic by
        adapter where you can, and budget KV memory for the copies.

        ## Takeaways

        | pitfall | symptom you would see | advice |
        |---|---|---|
        | spec + quantized draft | acceptance rate drops, little speed-up | quantize the target, keep the draft BF16 |
        | spec + high concurrency | no gain, or a loss, at high load | speculate only at small batch |
        | INT4 without Marlin | small-batch decode slower than FP16 | use Marlin kernels (Ampere+) |
        | paged KV + spec | engine errors or slow fork/copy | check engine support |
        | multi-LoRA + prefix cache | prefix-cache hit rate falls | per-LoRA cache, group traffic |

        The decision engine checks these rules on every diagnosis (chapter 2), for the techniques
        already on and for the ones it is about to recommend.
        """),
    ]


# ----------------------------------------------------------------------------------------- 04
def chapter04():
    return [
        md("""
        # 4. Optimization order: what to fix first

        When several metrics miss their targets at once, the order matters. Fixing them in the
        wrong order wastes measurements: a TPOT tuning done before an OOM fix has to be redone once
        the model is quantized, and tail-latency work on a system that misses its averages is
        premature. The order (优化顺序) lives in `assets/optimization_order.yaml`:
        """),
        code("""
        from inferopt import knowledge

        order = knowledge.load("optimization_order")
        for s in order["steps"]:
            print(f"{s['step']}. [{s['branch']}] {s['title']}: {s['reason']}")
            print(f"   typical fixes: {', '.join(s['techniques'] + s.get('actions', []))}")
        print("\\nrule:", order["rule"])
        """),
        md("""
        The reasons, in short: **OOM first**, because a server that does not start measures nothing.
        **TTFT next**, because users feel the wait for the first token directly. **Then TPOT and
        throughput**, so answers stream quickly and each GPU serves more users. **Tail latency last**,
        because its fixes (prefill/decode disaggregation, SLO-aware scheduling) cost the most and
        only make sense once the averages are right.

        ## The engine follows the order

        The decision engine picks the branch of the first failing step, whatever metric is worst.
        The cell below checks this for every one of the 15 non-empty combinations of failing
        symptoms: it builds a baseline where exactly those fail and compares the branch chosen with
        the order.
        """),
        code("""
        from itertools import combinations
        from inferopt.decision import diagnose

        SLO = {"ttft_p95_ms": 500, "tpot_p95_ms": 50, "tpot_p99_ms": 100}
        failing_metrics = {
            "C": {"oom": True},
            "A": {"ttft_p95_ms": 900},
            "B": {"tpot_p95_ms": 80},
            "D": {"tpot_p99_ms": 300},
        }
        healthy = {"ttft_p95_ms": 200, "tpot_p95_ms": 30, "tpot_p99_ms": 60}
        steps = [s["branch"] for s in order["steps"]]
        checked = 0
        for n in range(1, 5):
            for combo in combinations(steps, n):
                metrics = dict(healthy)
                for b in combo:
                    metrics.update(failing_metrics[b])
                d = diagnose(metrics, SLO, None, [])
                assert d.branch == combo[0] and d.order == list(combo), (combo, d.branch, d.order)
                checked += 1
                if n == 4 or combo in (("A", "B"), ("B", "D")):
                    print(f"failing {'+'.join(sorted(combo)):8s} -> enter {d.branch}, then {d.order[1:]}")
        print(f"{checked} combinations: the branch is always the first failing step of the order")
        """),
        md("""
        ## One change at a time

        The second half of the rule matters as much as the first: **after each change, run the
        benchmark again** and let the new baseline decide the next step (每一步都要重新跑
        benchmark). Two reasons. A fix can move other metrics (quantizing the weights frees memory
        for KV cache, which raises the batch size, which changes TPOT). And if you change three
        flags at once and the numbers move, you do not know which flag did it, or whether one of
        them made things worse.

        Below, a walk-through of one deployment. The "measured" numbers are an illustrative script,
        not a measurement; what the cell shows is the loop: diagnose, apply the one change it names,
        measure, diagnose again.
        """),
        code("""
        SLO = {"ttft_p95_ms": 500, "tpot_p95_ms": 50}
        workload = {"model_weights_gib": 130.4, "gpu_type": "H100", "num_gpus": 8, "prompt_tokens": 2500,
                    "output_tokens": 150, "shared_prefix_frac": 0.6, "concurrency": 64}
        on = ["paged_attention", "continuous_batching", "flash_attention"]
        # illustrative baselines after each change (a script, not a measurement)
        rounds = [
            {"oom": True},
            {"ttft_p95_ms": 1900, "tpot_p95_ms": 70, "gpu_util": 0.7},
            {"ttft_p95_ms": 900, "tpot_p95_ms": 68, "gpu_util": 0.7},
            {"ttft_p95_ms": 420, "tpot_p95_ms": 64, "gpu_util": 0.35},
            {"ttft_p95_ms": 410, "tpot_p95_ms": 44, "gpu_util": 0.8},
        ]
        for i, metrics in enumerate(rounds, 1):
            d = diagnose(metrics, SLO, workload, on)
            if d.branch is None:
                print(f"round {i}: all SLOs met with {sorted(on)}")
                break
            change = (d.techniques + [a["id"] for a in d.actions])[0]
            print(f"round {i}: branch {d.branch} (worst {d.worst_metric}) -> change one thing: {change}")
            if change in knowledge.technique_ids():
                on.append(change)
        """),
        md("""
        Round 4 is worth a second look: TPOT had been failing since round 2, but the engine stayed
        in branch A until TTFT passed, and moved to branch B only then. There, continuous batching
        was already on, so the change it names is a tuning step (raise `--max-num-seqs`), not a new
        technique. Chapter 2's widget lets you replay such a sequence with your own numbers.

        ## Takeaways

        - OOM → TTFT → TPOT/throughput → tail, each for a reason you can say in one sentence.
        - One change per round, then measure again. Do not stack every technique at once.
        - A metric can fix or break another; only a new baseline tells you which.
        """),
    ]


# ----------------------------------------------------------------------------------------- 07
def chapter07():
    return [
        md("""
        # 7. The knowledge map and the trade-off table

        This chapter steps back from inference to the whole course: four modules and one
        cross-cutting skill, and the single idea that ties them together — every optimization gives
        something up to buy something else (权衡).

        ## The knowledge map

        The course's modules (`assets/knowledge_map.yaml`), with the thirteen techniques of
        chapter 1 placed under the module that teaches them (computed from `techniques.yaml`):
        """),
        code("""
        from collections import defaultdict
        from inferopt import knowledge

        kmap = knowledge.load("knowledge_map")
        techs_by_module = defaultdict(list)
        for t in knowledge.techniques():
            for mid, prefix in kmap["module_prefix"].items():
                if t.module.startswith(prefix + ","):
                    techs_by_module[mid].append(t.id)
        print(kmap["root"])
        for m in kmap["modules"]:
            print(f"  {m['name']} ({m['name_zh']})")
            print(f"      topics: {', '.join(m['topics'])}")
            if techs_by_module[m["id"]]:
                print(f"      techniques of chapter 1: {', '.join(techs_by_module[m['id']])}")
        assert sum(len(v) for v in techs_by_module.values()) == 13
        """),
        code("""
        import plotly.graph_objects as go

        ids, labels, parents = ["root"], [kmap["root"]], [""]
        for m in kmap["modules"]:
            ids.append(m["id"]); labels.append(m["name"]); parents.append("root")
            for topic in m["topics"]:
                ids.append(f"{m['id']}/{topic}"); labels.append(topic); parents.append(m["id"])
            for t in techs_by_module[m["id"]]:
                ids.append(f"{m['id']}/tech/{t}"); labels.append(t); parents.append(m["id"])
        fig = go.Figure(go.Sunburst(ids=ids, labels=labels, parents=parents, insidetextorientation="radial"))
        fig.update_layout(title="The course's knowledge map: modules, topics, and the 13 techniques",
                          height=620, width=620, margin={"l": 0, "r": 0, "t": 50, "b": 0})
        fig.show()
        """),
        md("""
        Module 4 (inference optimization) holds most of the techniques, but not all: FlashAttention
        and torch.compile come from the operator module, tensor parallelism from distributed
        training. Inference optimization borrows from everything before it.

        ## The trade-off table

        Eight optimizations from across the course, each with what it gives up (牺牲) and what it
        buys (换取):
        """),
        code("""
        trade = knowledge.load("tradeoffs")
        print(f"{'optimization':26s} {'gives up':58s} buys")
        for r in trade["rows"]:
            print(f"{r['name']:26s} {r['gives_up']:58s} {r['buys']}")
        """),
        md("""
        The same table as a picture: red = what a row gives up, green = what it buys, across the
        four quadrants of compute, communication, memory and accuracy, plus latency and simplicity
        so that every entry of the table has a column.
        """),
        code("""
        from inferopt.widgets.tradeoff_plot import tradeoff_figure, tradeoff_matrix

        tradeoff_figure().show()
        """),
        md("""
        Read the columns rather than the rows and a pattern appears: memory is the currency most
        often bought, with communication and compute the currencies most often spent. Counted from
        the data:
        """),
        code("""
        names, labels, z, _ = tradeoff_matrix()
        for j, label in enumerate(labels):
            buys = [names[i] for i in range(len(names)) if z[i][j] > 0]
            gives = [names[i] for i in range(len(names)) if z[i][j] < 0]
            print(f"{label:34s} bought by {len(buys)}, spent by {len(gives)}")
        bought = {labels[j]: sum(z[i][j] > 0 for i in range(len(names))) for j in range(len(labels))}
        assert max(bought, key=bought.get).startswith("memory")
        print("\\n" + trade["gist"])
        """),
        md("""
        That is the one-line summary of the field (这就是 AI Infra 的本质): hardware gives more compute
        each generation than bandwidth and memory, so most optimizations spend the abundant resource
        (compute, communication over fast links) to save the scarce one (memory and memory
        bandwidth), and accuracy is spent only where the model can afford it.

        ## Takeaways

        - The thirteen inference techniques come from three of the four modules.
        - Every row of the trade-off table gives up something; learn each as a pair.
        - Chapter 8's self-check asks you to reproduce at least six of these pairs.
        """),
    ]


# ----------------------------------------------------------------------------------------- 08
def chapter08():
    return [
        md("""
        # 8. Learning path and self-check

        The tools in this chapter will be outdated in a few years. The way of thinking will not.
        This last chapter collects where to keep learning (持续学习), and ends with a graded
        self-check (自我检验清单) over the whole chapter.

        ## Keep up with the field
        """),
        code("""
        from inferopt import knowledge

        path = knowledge.load("learning_path")
        for f in path["follow"]:
            print(f"- {f['channel']}: {f['what']}")
        """),
        md("""
        ## Contribute to open source

        The best way to learn a system is to change it. Start small: documentation and unit tests
        are welcome everywhere and teach you how the code is organized.
        """),
        code("""
        for o in path["open_source"]:
            print(f"- {o['project']}: {o['start']}")
        """),
        md("""
        ## Build things, on real hardware

        Reading papers is not enough; run the systems. Four projects, in rising difficulty:
        """),
        code("""
        for i, p in enumerate(path["practice"], 1):
            print(f"{i}. {p}")
        """),
        md("""
        ## What changes, and what stays

        Tools, hardware and models all change quickly. Underneath each, something stays:
        """),
        code("""
        for m in path["mindset"]:
            print(f"changes: {m['changes']}\\n  stays: {m['stays']}\\n")
        """),
        md("""
        ## Self-check

        Seven items, one per skill this chapter set out to teach. Each is graded on the spot, with
        an explanation for every mistake. The grading reads the course's own data: the symptom
        questions are checked by running the decision engine on the question's numbers, the
        conflict question against the pitfall rules, the order against chapter 4's order.

        (The stored output shows the quiz's summary line; in JupyterLab you get the questions.)
        """),
        code("""
        from inferopt.widgets.selfcheck import SelfCheck, answer_key, grade, items

        for it in items():
            print(f"- [{it['id']}] {it['title']}")
        quiz = SelfCheck()
        quiz
        """),
        md("""
        How the grading works, shown on two answers to the order question — a wrong one and the
        right one:
        """),
        code("""
        wrong = grade("order", ["ttft_high", "oom", "tpot_high", "tail_latency"])
        print(wrong.correct, wrong.score)
        for line in wrong.feedback:
            print("  ", line)
        right = grade("order", ["oom", "ttft_high", "tpot_high", "tail_latency"])
        print(right.correct, right.score)
        """),
        md("""
        And the symptom item: the answer key is whatever the decision engine recommends for each
        question, so if an instructor edits the tree, the key follows.
        """),
        code("""
        symptoms = next(it for it in items() if it["id"] == "symptoms")
        key = answer_key("symptoms")
        for q in symptoms["questions"]:
            print(f"{q['id']:7s} -> {key[q['id']]:22s} ({q['prompt'][:70]}...)")
        print(grade("symptoms", key).score)
        """),
        md("""
        The last item has no single right answer: a six-month plan of your own. It is graded only
        on its shape (one concrete line per month). Write yours in the quiz above.

        ## Where to go from here

        Serve a model, measure it, diagnose it with chapter 2's tree, fix one thing, and measure
        again. Everything else in this chapter is a way of making that loop faster.
        """),
    ]


# ----------------------------------------------------------------------------------------- lab 1
def lab1():
    return [
        md("""
        # Lab 1: diagnose six incidents with the decision tree

        You are on call for a team that serves several LLM applications with vLLM. Six incident
        reports came in overnight, each with a measured baseline. Your job:

        1. write the two functions at the root of the decision tree — find the worst metric against
           its SLO, and choose the branch to enter first (chapter 2 and chapter 4);
        2. diagnose each incident: which branch, and which technique (or tuning action) to try first;
        3. name the combination pitfall hidden in one of the reports (chapter 3).

        Fill in the cells between the markers; the check cells after each part grade your work
        against the course's decision engine.
        """),
        code("""
        from inferopt import knowledge
        from inferopt.decision import diagnose, conflicts_for

        SLO = {"ttft_p95_ms": 500, "tpot_p95_ms": 50, "tpot_p99_ms": 150}
        VLLM_DEFAULTS = ["flash_attention", "paged_attention", "continuous_batching",
                         "prefix_cache", "chunked_prefill", "torch_compile"]
        INCIDENTS = {
            "support-bot": dict(
                report="Customer-support chat. Users complain the bot 'thinks' for seconds before answering. "
                       "Every request starts with the same 1,100-token policy prompt. Someone turned prefix "
                       "caching off while debugging last week.",
                metrics={"ttft_p95_ms": 2400, "tpot_p95_ms": 28, "gpu_util": 0.75},
                workload={"prompt_tokens": 1300, "output_tokens": 120, "shared_prefix_frac": 0.85,
                          "concurrency": 24, "gpu_type": "A100"},
                techniques_on=[t for t in VLLM_DEFAULTS if t != "prefix_cache"]),
            "code-assist": dict(
                report="An IDE assistant for one developer at a time. The first token is quick, then the "
                       "code trickles out.",
                metrics={"ttft_p95_ms": 180, "tpot_p95_ms": 120, "gpu_util": 0.2},
                workload={"prompt_tokens": 900, "output_tokens": 400, "concurrency": 1, "gpu_type": "L40S"},
                techniques_on=VLLM_DEFAULTS),
            "rag-70b": dict(
                report="A new 70B model (130 GiB of BF16 weights) was deployed on a node of 4 A100 80GB "
                       "with default settings. The server crashes at start-up with CUDA out of memory.",
                metrics={"oom": True},
                workload={"model_weights_gib": 130.4, "gpu_type": "A100", "num_gpus": 4},
                techniques_on=VLLM_DEFAULTS),
            "doc-summarizer": dict(
                report="Summaries of 8,000-token documents, streamed to a dashboard. Averages are fine, "
                       "but every few seconds all streams freeze. Chunked prefill was disabled to 'speed "
                       "up long prompts'.",
                metrics={"ttft_p95_ms": 450, "tpot_p95_ms": 45, "tpot_p99_ms": 900},
                workload={"prompt_tokens": 8000, "output_tokens": 300, "concurrency": 12, "num_gpus": 2,
                          "gpu_type": "H100"},
                techniques_on=[t for t in VLLM_DEFAULTS if t != "chunked_prefill"]),
            "batch-api": dict(
                report="An offline batch API. Nobody watches latency, but the throughput target is "
                       "3,000 output tokens/s and the GPU is mostly idle. Hundreds of requests queue.",
                metrics={"ttft_p95_ms": 400, "tpot_p95_ms": 40, "throughput_tok_s": 600, "gpu_util": 0.25,
                         "queue_len": 300},
                workload={"prompt_tokens": 500, "output_tokens": 200, "concurrency": 200},
                techniques_on=VLLM_DEFAULTS,
                slos={**SLO, "throughput_tok_s": 3000}),
            "legal-search": dict(
                report="Long legal queries on H100s. Both TTFT and TPOT miss their targets; TPOT by more. "
                       "The team wants to start with TPOT because it is 'the worst'.",
                metrics={"ttft_p95_ms": 700, "tpot_p95_ms": 150, "gpu_util": 0.8},
                workload={"prompt_tokens": 4000, "output_tokens": 200, "concurrency": 32,
                          "gpu_type": "H100", "model_weights_gib": 15},
                techniques_on=VLLM_DEFAULTS),
        }
        for name, inc in INCIDENTS.items():
            print(f"{name:15s} {inc['metrics']}")
        """),
        md("""
        ## Part 1: the root of the tree

        Write `worst_metric(metrics, slos)`: among the latency metrics that have both a measured
        value and an SLO (`ttft_p95_ms`, `tpot_p95_ms`, `ttft_p99_ms`, `tpot_p99_ms`), plus
        `throughput_tok_s` (where higher is better), return the name of the one with the largest
        ratio of "how bad" — measured / SLO for latencies, SLO / measured for throughput — **among
        those that fail** (ratio > 1). If `metrics.get("oom")` is true, return `"oom"`. If nothing
        fails, return `None`.

        Then write `branch_for(metrics, slos)`: the branch to enter first, following the order
        OOM (`"C"`) → TTFT P95 (`"A"`) → TPOT P95 or throughput (`"B"`) → P99 tail (`"D"`); `None` if
        nothing fails.
        """),
        code("""
        LATENCY = ["ttft_p95_ms", "tpot_p95_ms", "ttft_p99_ms", "tpot_p99_ms"]
        BRANCH_OF = {"oom": "C", "ttft_p95_ms": "A", "tpot_p95_ms": "B", "throughput_tok_s": "B",
                     "ttft_p99_ms": "D", "tpot_p99_ms": "D"}
        ORDER = ["C", "A", "B", "D"]


        def failing_ratios(metrics: dict, slos: dict) -> dict:
            \"\"\"{metric: how-bad ratio} for the metrics that fail their SLO (ratio > 1).\"\"\"
            ### BEGIN SOLUTION
            out = {}
            for k in LATENCY:
                if metrics.get(k) is not None and slos.get(k):
                    r = metrics[k] / slos[k]
                    if r > 1:
                        out[k] = r
            if slos.get("throughput_tok_s") and metrics.get("throughput_tok_s") is not None:
                have = metrics["throughput_tok_s"]
                r = slos["throughput_tok_s"] / have if have > 0 else float("inf")
                if r > 1:
                    out["throughput_tok_s"] = r
            return out
            ### END SOLUTION


        def worst_metric(metrics: dict, slos: dict):
            \"\"\"The failing metric with the largest ratio; "oom" if the server ran out of memory; None if all pass.\"\"\"
            ### BEGIN SOLUTION
            if metrics.get("oom"):
                return "oom"
            ratios = failing_ratios(metrics, slos)
            return max(ratios, key=ratios.get) if ratios else None
            ### END SOLUTION


        def branch_for(metrics: dict, slos: dict):
            \"\"\"The branch to enter first: the earliest failing step of C, A, B, D; None if all pass.\"\"\"
            ### BEGIN SOLUTION
            failing = set(failing_ratios(metrics, slos))
            if metrics.get("oom"):
                failing.add("oom")
            branches = {BRANCH_OF[m] for m in failing}
            return next((b for b in ORDER if b in branches), None)
            ### END SOLUTION
        """),
        code("""
        # check: your functions agree with the course's engine on every incident, and on a few edge cases
        for name, inc in INCIDENTS.items():
            slos = inc.get("slos", SLO)
            d = diagnose(inc["metrics"], slos, inc["workload"], inc["techniques_on"])
            assert worst_metric(inc["metrics"], slos) == d.worst_metric, (name, worst_metric(inc["metrics"], slos), d.worst_metric)
            assert branch_for(inc["metrics"], slos) == d.branch, (name, branch_for(inc["metrics"], slos), d.branch)
        assert worst_metric({"ttft_p95_ms": 100, "tpot_p95_ms": 10}, SLO) is None
        assert branch_for({"ttft_p95_ms": 100, "tpot_p95_ms": 10}, SLO) is None
        assert worst_metric({"ttft_p95_ms": 600, "tpot_p95_ms": 200}, SLO) == "tpot_p95_ms"
        assert branch_for({"ttft_p95_ms": 600, "tpot_p95_ms": 200}, SLO) == "A"
        assert branch_for({"oom": True, "ttft_p95_ms": 5000}, SLO) == "C"
        print("Part 1 passes: worst metric and branch agree with the engine on all 6 incidents")
        """),
        md("""
        ## Part 2: diagnose the six incidents

        For each incident give the branch and the **first thing to try**: a technique id from
        chapter 1, or — when the fitting technique is already on — the id of the tuning action the
        tree names (e.g. `raise_concurrency`). Read the reports: what is already on matters.
        You may look at `knowledge.technique_ids()` and `knowledge.load("decision_tree")`, but work
        it out from the tree, not by calling `diagnose` on the incidents.
        """),
        code("""
        print(knowledge.technique_ids())
        for b in knowledge.load("decision_tree")["branches"]:
            for c in b["conditions"]:
                print(c["id"], [t["id"] for t in c["techniques"]], [a["id"] for a in c["actions"]])
        """),
        code("""
        # {incident: (branch, first thing to try)}
        ### BEGIN SOLUTION
        answers = {
            "support-bot": ("A", "prefix_cache"),
            "code-assist": ("B", "speculative_decoding"),
            "rag-70b": ("C", "int4_awq_marlin"),
            "doc-summarizer": ("D", "chunked_prefill"),
            "batch-api": ("B", "raise_concurrency"),
            "legal-search": ("A", "fp8"),
        }
        ### END SOLUTION
        """),
        code("""
        # check: each answer names the branch the engine takes and one of the fixes it recommends
        score = 0
        for name, inc in INCIDENTS.items():
            d = diagnose(inc["metrics"], inc.get("slos", SLO), inc["workload"], inc["techniques_on"])
            fixes = d.techniques + [a["id"] for a in d.actions]
            branch, fix = answers[name]
            ok = branch == d.branch and fix in fixes
            score += ok
            print(f"{name:15s} {'right' if ok else 'WRONG':5s}  you: {branch} {fix:22s}"
                  + ("" if ok else f"  tree: {d.branch} {fixes}  because {d.matched_conditions[0]['title'] if d.matched_conditions else '-'}"))
        assert score == len(INCIDENTS), f"{score}/{len(INCIDENTS)} right"
        """),
        md("""
        Two incidents reward a second look. In **batch-api** continuous batching is already on (it
        always is in vLLM), so the fix is to raise its cap, `--max-num-seqs`. In **legal-search**
        TPOT is the worst metric, but TTFT fails too and comes first in the order; the long prompts
        on H100s point to FP8 (chunked prefill is already on).

        ## Part 3: the hidden pitfall

        After the code-assist fix, the team plans to *also* quantize to save memory: INT4 (AWQ +
        Marlin) weights for the L40S, and — to be thorough — an INT4 version of their 160M draft
        model. Which pitfall of chapter 3 does this walk into? Give its id from
        `assets/pitfalls.yaml`.
        """),
        code("""
        print([p["id"] for p in knowledge.load("pitfalls")["pitfalls"]])
        """),
        code("""
        ### BEGIN SOLUTION
        pitfall = "spec_quant"
        ### END SOLUTION
        """),
        code("""
        # check: the engine's rules fire exactly this pitfall for the team's plan
        plan = ["speculative_decoding", "int4_awq_marlin"]
        fired = [c["id"] for c in conflicts_for(plan, {"concurrency": 1, "gpu_type": "L40S", "draft_model": "draft-160m"})]
        assert fired == [pitfall], fired
        print("Part 3 passes:", knowledge.load("pitfalls")["pitfalls"][0]["advice"])
        """),
    ]


BUILDERS = {
    "chapters/01-technique-map.ipynb": chapter01,
    "chapters/02-decision-tree.ipynb": chapter02,
    "chapters/03-combination-pitfalls.ipynb": chapter03,
    "chapters/04-optimization-order.ipynb": chapter04,
    "chapters/07-knowledge-map-and-tradeoffs.ipynb": chapter07,
    "chapters/08-learning-path-and-self-check.ipynb": chapter08,
    "solutions/lab1-decision-tree.ipynb": lab1,
}


def main(argv) -> int:
    wanted = [a for a in argv if a] or list(BUILDERS)
    for rel in wanted:
        key = next((k for k in BUILDERS if k == rel or Path(k).name == Path(rel).name or Path(k).stem.startswith(rel)), None)
        if key is None:
            print(f"unknown notebook {rel!r}; choose from {', '.join(BUILDERS)}", file=sys.stderr)
            return 2
        write(key, BUILDERS[key]())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
