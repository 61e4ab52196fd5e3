"""A sweep: the same workload at several concurrency levels (or request rates), saved as it runs.

Each level gets fresh prompts (a different seed), so no level profits from the prefix cache
filled by the one before. Every request is written to the results file when it completes and
every level's summary when the level completes, so an interrupted sweep keeps what finished.
"""
from __future__ import annotations

import time
from dataclasses import replace

from inferopt.bench import loadgen
from inferopt.bench.metrics import SLO
from inferopt.bench.results import ResultWriter
from inferopt.bench.workload import Workload, build_requests
from inferopt.errors import CourseError


def sweep(endpoint: loadgen.Endpoint, workload: Workload, *, concurrencies=None, rates=None,
          tokenizer=None, slo: SLO | None = None, warmup: int = 1, min_rounds: int = 2,
          writer: ResultWriter | None = None, progress: bool = True, label: str = "") -> list[dict]:
    """Run ``workload`` at each concurrency (closed loop) or each rate in req/s (open loop).

    Requests per level = max(workload.num_requests, min_rounds × concurrency), so every level
    keeps its concurrency busy for a while. Returns one summary per level (see metrics.summarize),
    with ``wall_s`` (level wall time incl. warm-up) and ``client_cpu_ms_per_request`` added."""
    if (concurrencies is None) == (rates is None):
        raise CourseError("give either concurrencies=[1, 2, 4, ...] or rates=[0.5, 1, ...] (requests/s)")
    levels = list(concurrencies if concurrencies is not None else rates)
    if not levels or any(x <= 0 for x in levels):
        raise CourseError(f"levels {levels}: give positive numbers")
    if tokenizer is None:
        from inferopt.bench.workload import load_tokenizer

        tokenizer = load_tokenizer()
    out = []
    for i, level in enumerate(levels):
        if concurrencies is not None:
            n = max(workload.num_requests, min_rounds * int(level))
            key = {"concurrency": int(level)}
        else:
            n = workload.num_requests
            key = {"rate": float(level)}
        wl = replace(workload, num_requests=n, seed=workload.seed * 1000 + i + 1)
        reqs = build_requests(wl, tokenizer)
        t0 = time.perf_counter()
        on_record = writer.on_record(label=label, **key) if writer else None
        desc = f"{label + ' ' if label else ''}" + ", ".join(f"{k}={v}" for k, v in key.items())
        if concurrencies is not None:
            res = loadgen.run(endpoint, reqs, concurrency=int(level), warmup=warmup, on_record=on_record,
                              progress=progress, desc=desc)
        else:
            res = loadgen.run(endpoint, reqs, rate=float(level), warmup=warmup, on_record=on_record,
                              progress=progress, seed=wl.seed, desc=desc)
        s = res.summary(slo)
        s.update(key)
        s["wall_s"] = time.perf_counter() - t0
        if label:
            s["label"] = label
        s["workload"] = wl.to_dict()
        if writer:
            writer.summary(s, slo=slo.to_dict() if slo else None)
        out.append(s)
    return out
