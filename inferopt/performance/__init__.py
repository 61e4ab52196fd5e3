"""Where the time goes: a performance model of a vLLM engine (pure functions, milliseconds per point).

Rooms (arrows point down: this package uses :mod:`inferopt.planning`, never :mod:`inferopt.diagnosis`):

- :mod:`.profiles`: the fitted factors (``assets/performance/profiles.yaml``): efficiency of each roof,
  fixed per-step overhead (larger with ``--enforce-eager``), per-sequence step cost, all-reduce latency,
  the front-end's cost, and the error the calibration measured;
- :mod:`.steptime`: one engine step's time from the per-kernel roofline of
  :func:`inferopt.planning.roofline.step_roofline` with a profile's factors;
- :mod:`.frontend`: the API server's cost (tokenize / detokenize per request and per token,
  ``--api-server-count``);
- :mod:`.scheduler`: continuous batching like vLLM's V1 scheduler, step by step: ``--max-num-seqs``,
  the token budget and chunked prefill, the KV capacity of the memory calculator, preemption when it
  runs out, prefix-cache hits; closed loop (concurrency) or open loop (Poisson arrivals);
- :mod:`.predict`: TTFT, TPOT, ITL, throughput, queue length, KV usage and the binding limit of a
  workload, and the ``python -m inferopt predict`` command;
- :mod:`.calibration`: fit the factors on stored runs (the course's CPU runs, cited public GPU runs)
  and report the error on the runs not used to fit them;
- :mod:`.measured`: the TTFT and TPOT error on 81 measured vLLM runs at load (H200, cited), fitted rows
  and held-out rows.
"""
