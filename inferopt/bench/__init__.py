"""Benchmarking against any OpenAI-compatible endpoint: workloads, load generation, metrics,
results on disk, plots and the live decision-tree experiments.

- ``workload``: synthetic prompts with exact token counts (the model's tokenizer);
- ``loadgen``: async streaming client, closed-loop concurrency or open-loop rate, API key;
- ``metrics``: TTFT, TPOT, ITL, E2E, throughput, goodput, percentiles, SLO checks;
- ``results``: JSON lines saved as requests complete; genai-perf/aiperf/vllm-bench importers;
- ``sweep``: one workload at several concurrencies or rates;
- ``vllm_bench``: vLLM's own ``bench serve`` run and imported (the agreement test uses it);
- ``plots``: plotly figures; ``experiments``: the one-change-at-a-time live experiments;
- ``cli``: ``python -m inferopt bench sweep|import``.
"""
from inferopt.bench.metrics import SLO, RequestRecord, summarize  # noqa: F401
