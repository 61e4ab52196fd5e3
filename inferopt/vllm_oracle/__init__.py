"""The installed vLLM as the oracle: the ONLY package that imports vLLM's internals.

Nothing on the fast path imports vLLM: the commands read what it generated (``assets/hardware_rules.yaml``,
kept equal by the tests), and ``plan``, ``memory``, ``predict``, ``diagnose`` and the memory widget ask it about the
commands they emit or size through :mod:`inferopt.vllm_oracle.runtime`, whose calls run in a worker process
(:mod:`inferopt.vllm_oracle.worker`; vLLM binds its platform, CPU or a target GPU,
:mod:`inferopt.vllm_oracle.target_platform`, once per process) and are cached on disk.

    from inferopt.vllm_oracle import client
    client.check_command("vllm serve meta-llama/Llama-3.1-8B --max-model-len 200000", gpu="H100")
    # -> {"ok": False, "refusal": "vLLM 0.32 refuses: ModelConfig: User-specified max_model_len ..."}
"""

# the line a kept worker (worker.py --serve) starts each batch's answers with; client.py reads up to it
WORKER_MARK = "@@oracle-answers "
