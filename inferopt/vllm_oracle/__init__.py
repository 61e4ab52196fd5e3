"""The installed vLLM as the oracle: the ONLY package that imports vLLM's internals.

Nothing on the fast path (the ``diagnose`` / ``memory`` commands, the widgets) imports it: they read
what it generated (``assets/hardware_rules.yaml``) and the tests keep the two equal. Its calls run in
a worker process (:mod:`inferopt.vllm_oracle.worker`) because vLLM binds its platform (CPU or a
target GPU, :mod:`inferopt.vllm_oracle.target_platform`) once per process.

    from inferopt.vllm_oracle import client
    client.check_command("vllm serve meta-llama/Llama-3.1-8B --max-model-len 200000", gpu="H100")
    # -> {"ok": False, "refusal": "vLLM 0.32 refuses: ModelConfig: User-specified max_model_len ..."}
"""

# the line a kept worker (worker.py --serve) starts each batch's answers with; client.py reads up to it
WORKER_MARK = "@@oracle-answers "
